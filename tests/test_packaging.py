"""The wheel and sdist as a user gets them: one ``stateflow`` namespace, resources inside, no clashes.

The repository keeps top-level ``envs/ tasks/ prompts/ sf_agent/`` folders, but they are installed
as ``stateflow.envs`` etc. (pyproject's package-dir mapping). This builds both archives, installs
the wheel into a fresh virtualenv outside the checkout (dependencies come from the project's venv,
so nothing is downloaded), and uses it from a directory that has its own ``envs/`` and ``tasks/``
packages, which used to shadow ours.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
import sysconfig
import tarfile
import textwrap
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
APP_FOLDERS = {folder: f"stateflow.{folder}" for folder in ("sf_agent", "envs", "tasks", "prompts")}

pytestmark = pytest.mark.slow


def _pyproject() -> dict:
    import tomllib

    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def test_every_package_folder_is_listed_under_the_namespace() -> None:
    setuptools_cfg = _pyproject()["tool"]["setuptools"]
    listed = set(setuptools_cfg["packages"])
    on_disk = set()
    for init in ROOT.glob("**/__init__.py"):
        rel = init.parent.relative_to(ROOT)
        top = rel.parts[0]
        if top == "stateflow":
            on_disk.add(".".join(rel.parts))
        elif top in APP_FOLDERS:
            on_disk.add(".".join([APP_FOLDERS[top], *rel.parts[1:]]))
    assert on_disk == listed, f"pyproject lacks {on_disk - listed}, lists absent {listed - on_disk}"
    for folder, name in APP_FOLDERS.items():
        assert setuptools_cfg["package-dir"][name] == folder


def test_code_imports_the_application_only_through_the_namespace() -> None:
    """A bare ``import envs`` would load a second copy of the module (or a user's folder)."""
    offenders = []
    for top in ["stateflow", *APP_FOLDERS, "tests", "scripts"]:
        for path in (ROOT / top).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
                names = []
                if isinstance(node, ast.Import):
                    names = [a.name for a in node.names]
                elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    names = [node.module]
                where = f"{path.relative_to(ROOT)}:{getattr(node, 'lineno', 0)}"
                offenders += [f"{where} {n}" for n in names if n.split(".")[0] in APP_FOLDERS]
    assert not offenders, offenders


@pytest.fixture(scope="module")
def archives(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The sdist, and the wheel built *from that sdist* (so a file missing from the sdist shows)."""
    out = tmp_path_factory.mktemp("dist")
    subprocess.run([sys.executable, "-m", "build", "--outdir", str(out), str(ROOT)], check=True, capture_output=True)
    (wheel,) = out.glob("stateflow-*.whl")
    (sdist,) = out.glob("stateflow-*.tar.gz")
    return wheel, sdist


def test_archives_carry_the_dockerfiles_and_prompts(archives: tuple[Path, Path]) -> None:
    wheel, sdist = archives
    in_wheel = set(zipfile.ZipFile(wheel).namelist())
    for needed in [
        "stateflow/envs/bash/docker/Dockerfile",
        "stateflow/envs/bash/docker/pid1.py",
        "stateflow/envs/sql/docker/Dockerfile",
        "stateflow/envs/sql/docker/server.cnf",
        "stateflow/envs/sql/demo/demo_dbs.sql",
        "stateflow/envs/bash/demo/tasks.json",
        "stateflow/prompts/sql/solve.md",
        "stateflow/prompts/bash/system.md",
        "stateflow/prompts/pdoctor/extract.md",
        "stateflow/spec/library/react.lisp",
        "stateflow/tasks/harness/runner.py",
    ]:
        assert needed in in_wheel, needed
    tops = {n.split("/")[0] for n in in_wheel}
    clashing = sorted(t for t in tops if t != "stateflow" and not t.endswith(".dist-info"))
    assert not clashing, f"top-level names besides stateflow: {clashing}"
    with tarfile.open(sdist) as tar:
        in_sdist = {n.split("/", 1)[1] for n in tar.getnames() if "/" in n}
    for needed in ["envs/bash/docker/Dockerfile", "envs/sql/docker/Dockerfile", "prompts/sql/solve.md"]:
        assert needed in in_sdist, needed


def _fresh_venv(where: Path) -> Path:
    """A virtualenv whose only extra path is this venv's site-packages (the dependencies)."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(where)], check=True)
    py = where / "bin" / "python"
    purelib = subprocess.run(
        [str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    # Lines of a .pth only extend sys.path; the project venv's own .pth files (its editable
    # install of this checkout) are not processed, so `stateflow` can come only from the wheel.
    # Every site-packages directory of this interpreter: a worktree's venv reaches the shared
    # dependencies through a .pth of its own, which the fresh venv would not process.
    deps = dict.fromkeys([sysconfig.get_paths()["purelib"], *(p for p in sys.path if p.endswith("site-packages"))])
    Path(purelib, "deps.pth").write_text("".join(f"{d}\n" for d in deps))
    return py


def test_installed_wheel_works_from_a_project_with_its_own_envs_and_tasks(
    archives: tuple[Path, Path], tmp_path: Path
) -> None:
    wheel, _ = archives
    py = _fresh_venv(tmp_path / "venv")
    subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(py), "install", "-q", "--no-deps", "--no-index", str(wheel)],
        check=True,
    )
    project = tmp_path / "user-project"
    for clash in ["envs", "tasks", "prompts", "sf_agent"]:
        (project / clash).mkdir(parents=True)
        (project / clash / "__init__.py").write_text("raise ImportError('the user project shadowed stateflow')\n")
    (project / "myflow.py").write_text(
        textwrap.dedent(
            """
            from stateflow import LLM, Flow, State, Transition, last_contains

            ask = State("Ask", LLM())
            done = State("Done", final=True)
            FLOW = Flow("one", initial=ask, transitions=[Transition(ask, done, when=last_contains("OK"))])
            """
        )
    )
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["PYTHONPATH"] = str(project)  # the user's folders come first on the path, on purpose

    def sf(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(py.parent / "stateflow"), *args],  # the console script the wheel installs
            cwd=project,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )

    where = subprocess.run(
        [
            str(py),
            "-c",
            "import stateflow.tasks.harness.runner as r, stateflow.envs.sql as s; print(r.__file__, s.__file__)",
        ],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert str(ROOT) not in where and str(tmp_path / "venv") in where, where

    methods = sf("run", "--list-methods")
    assert methods.returncode == 0, methods.stderr
    assert "sf_agent" in methods.stdout and "react" in methods.stdout

    graph = sf("graph", "intercode-sql")
    assert graph.returncode == 0, graph.stderr
    assert "Observe" in graph.stdout and "Solve" in graph.stdout

    from stateflow.testing.fake_openai import FakeOpenAIServer

    with FakeOpenAIServer(lambda model, messages, body: "OK") as srv:
        ran = sf("run", "myflow:FLOW", "--task", "say OK", "--model", f"openai:fake@{srv.url}")
    assert ran.returncode == 0, ran.stderr
    assert "Done" in ran.stdout

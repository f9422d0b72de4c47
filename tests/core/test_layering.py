"""The dependency direction the project promises: ``tasks -> sf_agent/envs -> stateflow`` (core),
and inside ``tasks/`` the rooms: ``cli -> ui -> reports -> harness -> sql | bash | pdoctor -> agents -> kit``.

Checked on the source by AST, every import statement (top-level or inside a function), so a lazy
import cannot hide a dependency. A module's layer is the repository folder its file lives in
(``envs/`` installs as ``stateflow.envs``, but it is not part of the core).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# layer (repository folder) -> installed packages it must not import
FORBIDDEN: dict[str, tuple[str, ...]] = {
    "stateflow": ("stateflow.tasks", "stateflow.envs", "stateflow.sf_agent", "stateflow.prompts"),
    "sf_agent": ("stateflow.tasks", "stateflow.envs"),
    "envs": ("stateflow.tasks", "stateflow.sf_agent"),
}


def imported_modules(path: Path) -> list[tuple[int, str]]:
    """``(line, module)`` for every import in ``path``; ``from X import a`` also yields ``X.a``
    (so ``from stateflow import tasks`` is caught)."""
    out: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.append((node.lineno, node.module))
            out += [(node.lineno, f"{node.module}.{a.name}") for a in node.names]
    return out


def violations(folder: str) -> list[str]:
    found = []
    for path in sorted((ROOT / folder).rglob("*.py")):
        for line, module in imported_modules(path):
            for banned in FORBIDDEN[folder]:
                if module == banned or module.startswith(banned + "."):
                    found.append(f"{path.relative_to(ROOT)}:{line} imports {module}")
    return found


@pytest.mark.parametrize("folder", sorted(FORBIDDEN))
def test_layer_imports_nothing_above_it(folder: str) -> None:
    assert violations(folder) == []


# The application's rooms (tasks/<room>/) -> the rooms each may import, itself included.
# kit <- agents <- benchmarks (sql, bash, pdoctor: never each other) <- harness <- reports <- ui <- cli.
_BENCHMARKS = ("sql", "bash", "pdoctor")
ROOMS: dict[str, frozenset[str]] = {
    "kit": frozenset({"kit"}),
    "agents": frozenset({"kit", "agents"}),
    **{b: frozenset({"kit", "agents", b}) for b in _BENCHMARKS},
    "harness": frozenset({"kit", "agents", *_BENCHMARKS, "harness"}),
    "reports": frozenset({"kit", "agents", *_BENCHMARKS, "harness", "reports"}),
    # `stateflow ui` and the one-file report drawn from its templates
    "ui": frozenset({"kit", "agents", *_BENCHMARKS, "harness", "reports", "ui"}),
    # `stateflow optimize`: searches with the runner, reports with the statistics
    "optimize": frozenset({"kit", "agents", *_BENCHMARKS, "harness", "reports", "optimize"}),
    "cli": frozenset({"kit", "agents", *_BENCHMARKS, "harness", "reports", "ui", "optimize", "cli"}),
}


def room_violations(room: str, root: Path = ROOT) -> list[str]:
    """``path:line imports stateflow.tasks.<room>`` for each import ``ROOMS[room]`` does not allow."""
    found: list[str] = []
    for path in sorted((root / "tasks" / room).rglob("*.py")):
        for line, module in imported_modules(path):
            parts = module.split(".")
            if parts[:2] != ["stateflow", "tasks"]:
                continue
            target = parts[2] if len(parts) > 2 else ""  # `from stateflow import tasks`: no room
            entry = f"{path.relative_to(root)}:{line} imports stateflow.tasks.{target}"
            if target not in ROOMS[room] and entry not in found:
                found.append(entry)
    return found


def test_tasks_holds_only_rooms() -> None:
    # Every module lives in a room, so every module is under one of the rules below.
    loose = sorted(p.name for p in (ROOT / "tasks").glob("*.py") if p.name != "__init__.py")
    rooms = sorted(p.name for p in (ROOT / "tasks").iterdir() if p.is_dir() and (p / "__init__.py").exists())
    assert loose == []
    assert rooms == sorted(ROOMS)


@pytest.mark.parametrize("room", sorted(ROOMS))
def test_room_imports_only_the_rooms_below_it(room: str) -> None:
    assert room_violations(room) == []


def test_the_room_check_sees_a_benchmark_importing_another(tmp_path: Path) -> None:
    # The checker itself: a benchmark room reaching into another benchmark, or the kit reaching
    # into a benchmark (what tools.execute once did with the SQL rebind), is reported.
    for room, source in {
        "sql": "from stateflow.tasks.bash.flow import build_bash_flow\n",
        "kit": "def f():\n    from stateflow.tasks.sql.rebind import rebind_columns\n",
        "harness": "from stateflow.tasks.sql.benchmark import INTERCODE_SQL\n",
    }.items():
        (tmp_path / "tasks" / room).mkdir(parents=True)
        (tmp_path / "tasks" / room / "m.py").write_text(source)
    assert room_violations("sql", tmp_path) == ["tasks/sql/m.py:1 imports stateflow.tasks.bash"]
    assert room_violations("kit", tmp_path) == ["tasks/kit/m.py:2 imports stateflow.tasks.sql"]
    assert room_violations("harness", tmp_path) == []


def test_the_check_sees_lazy_and_from_imports(tmp_path: Path) -> None:
    # The checker itself: a function-level import and a `from stateflow import tasks` both count.
    source = tmp_path / "m.py"
    source.write_text("def f():\n    from stateflow.tasks.harness.runner import evaluate\nfrom stateflow import envs\n")
    modules = [m for _, m in imported_modules(source)]
    assert "stateflow.tasks.harness.runner" in modules and "stateflow.envs" in modules


def test_core_cli_commands_are_the_core_ones_and_plugins_add_the_rest() -> None:
    # The core registers graph/validate/llm/spec/verify/version itself; run/report/demo/data come from
    # the application's entry point (declared in pyproject.toml, loaded by the installed metadata).
    import tomllib

    from stateflow.cli.plugins import load_plugins

    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["entry-points"]["stateflow.plugins"]
    assert declared == {"tasks": "stateflow.tasks.cli:PLUGIN"}
    loaded = load_plugins()
    assert loaded.errors == ()
    assert [p.name for p in loaded.plugins] == ["stateflow.tasks"]
    core = (ROOT / "stateflow" / "cli").glob("*.py")
    # reference: no command, the site's CLI page written from the command tree (issue 48);
    # inputs: no command, the checks of paths and ports every command shares (issue 57)
    commands = {"flows", "llm", "spec", "verify"}
    assert {p.stem for p in core} == {"__init__", "inputs", "main", "plugins", "reference", *commands}

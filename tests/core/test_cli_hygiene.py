"""CLI hygiene: no markup injection, --version, completion, enum choices, --list-methods, data locate."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import stateflow
from stateflow.testing.fake_openai import FakeOpenAIServer

ROOT = Path(__file__).resolve().parents[2]


def sf(*args: str, cwd: Path | None = None, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    base = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "200"}
    return subprocess.run(
        [sys.executable, "-m", "stateflow.cli.main", *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=cwd,
        env={**base, **(env or {})},
    )


def test_errors_keep_brackets(tmp_path):
    cfg = tmp_path / "m.toml"
    cfg.write_text('[profiles.x]\nmodel = "m"\ntemperature = "hot"\n')
    p = sf("run", "intercode-sql", "--config", str(cfg))
    assert p.returncode == 1
    assert f"error: {cfg}: [profiles.x]: profile 'x': temperature = 'hot'" in p.stderr


def test_help_is_not_markup():
    p = sf("run", "--help")
    assert p.returncode == 0 and "TOML file with [profiles.*] and [models]" in p.stdout


def test_transcript_with_markup_like_model_output(tmp_path):
    (tmp_path / "myflow.py").write_text(
        "from stateflow import LLM, Flow, State, Transition\n"
        "a = State('Ask', LLM())\nb = State('Done', final=True)\n"
        "FLOW = Flow('echo', initial=a, transitions=[Transition(a, b)])\n"
    )
    reply = "[/INST] the answer uses [a-z]+ and [bold]no style[/bold]"
    with FakeOpenAIServer(lambda model, messages, body: reply) as srv:
        p = sf("run", "myflow:FLOW", "--task", "T", "--model", f"openai:fake@{srv.url}", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert f"Ask/llm assistant: {reply}" in p.stderr
    assert '"exit_state": "Done"' in p.stdout  # the summary after the transcript survives


def test_version_and_completion():
    p = sf("--version")
    assert p.returncode == 0 and p.stdout.strip() == f"stateflow {stateflow.__version__}"
    assert "--install-completion" in sf("--help").stdout
    p = sf(env={"_STATEFLOW_COMPLETE": "complete_bash", "COMP_WORDS": "stateflow gra", "COMP_CWORD": "1"})
    assert p.stdout.split() == ["graph"]


def test_package_and_cli_help_do_not_load_autogen():
    # AutoGen's import takes ~1.5 s (matplotlib, provider SDKs); tab completion runs the CLI on
    # every key press, so only commands that run an episode may pay for it.
    probe = (
        "import sys, runpy; sys.argv = ['stateflow', '--help']\n"
        "try:\n    runpy.run_module('stateflow.cli.main', run_name='__main__')\n"
        "except SystemExit:\n    pass\n"
        "import stateflow\n"
        "print('autogen' in sys.modules, file=sys.stderr)\n"
        "from stateflow import run\n"
        "print('autogen' in sys.modules, run.__module__, file=sys.stderr)\n"
    )
    p = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert p.returncode == 0, p.stderr
    assert p.stderr.split() == ["False", "True", "stateflow.runtime"]


@pytest.mark.parametrize(
    ("args", "valid"),
    [
        (("run", "intercode-sql", "--policy", "gold"), ("llm", "oracle")),
        (("run", "intercode-sql", "--backend", "podman"), ("embedded", "docker", "dsn", "sandbox")),
        (("graph", "intercode-sql", "--format", "svg"), ("mermaid", "dot", "png")),
    ],
)
def test_choices_exit_2_listing_valid_values(args, valid):
    p = sf(*args)
    assert p.returncode == 2
    assert all(f"'{v}'" in p.stderr for v in valid), p.stderr


def test_list_methods_needs_no_target_but_a_run_does():
    p = sf("run", "--list-methods")
    lines = p.stdout.splitlines()
    # grouped by family: a "# family" heading, then one line per method
    assert p.returncode == 0 and lines[0] == "# StateFlow view" and lines[1].split()[0] == "stateflow"
    p = sf("run")
    assert p.returncode == 2 and "TARGET" in p.stderr


def test_data_locate_fails_when_files_are_missing(tmp_path, monkeypatch, capsys):
    from stateflow.tasks.cli import data

    from stateflow.cli.main import main

    # only the given directory is searched (the shared checkout may hold the real data)
    monkeypatch.setattr(data, "candidate_dirs", lambda explicit=None: [Path(explicit)] if explicit else [])
    assert main(["data", "locate", "--data", str(tmp_path), "--only", "sql"]) == 1
    err = capsys.readouterr().err
    assert "3 of 3 InterCode file(s) missing" in err and "stateflow data fetch" in err


@pytest.mark.parametrize(
    "argv",
    [
        ["run", "intercode-sql", "--tasks", "bogus"],
        ["run", "intercode-sql", "--out", "__FILE__"],
        ["optimize", str(ROOT / "examples/optimize/sql-measure-small.toml"), "--out", "__FILE__"],
    ],
)
def test_a_bad_argument_is_refused_before_the_heavy_imports(argv, tmp_path):
    # regression ([edges] 16): rejecting an invalid --tasks cost 4-5 s of CPU (AutoGen, every benchmark)
    afile = tmp_path / "a-file"
    afile.write_text("x")
    argv = [str(afile) if a == "__FILE__" else a for a in argv]
    probe = (
        "import sys\nfrom stateflow.cli.main import main\n"
        f"code = main({argv!r})\n"
        "print(code, 'autogen' in sys.modules, 'stateflow.tasks.harness.runner' in sys.modules, file=sys.stderr)\n"
    )
    p = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    *message, verdict = p.stderr.strip().splitlines()
    assert verdict.split() == ["1", "False", "False"], p.stderr
    assert message[-1].startswith("error: --"), message

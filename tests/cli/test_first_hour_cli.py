"""Command-line defects a new user hit in their first hour (issue 48, item 4), as child processes.

Each bad input gets one clear line naming the file or value and leaves the disk as it was; a
scripted (test-double) profile is refused at start; a method whose episodes never submit is
warned about by ``stateflow run`` and ``stateflow report``.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent.parent

# A flow that asks the model but never runs the environment's tools: it can never submit.
SILENT_FLOW = """
from stateflow import LLM, Flow, Prompt, State, Transition

answer = State("Answer", Prompt("Reply with Thought: and Action: execute[CMD]."), LLM())
end = State("End", final=True)
SILENT = Flow("silent", initial=answer, transitions=[Transition(answer, end)])
"""


def _run(project: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "stateflow.cli.main", *args],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
        cwd=project,
    )


def _snapshot(root: Path) -> dict[str, bytes | None]:
    return {str(p.relative_to(root)): (p.read_bytes() if p.is_file() else None) for p in sorted(root.rglob("*"))}


@pytest.fixture
def project(tmp_path: Path) -> Path:
    p = tmp_path / "project"
    p.mkdir()
    (p / "latin1.toml").write_bytes('[models]\ndefault = "café"\n'.encode("latin-1"))
    (p / "configs").mkdir()
    (p / "existing.txt").write_text("keep me\n")
    (p / "scripted.toml").write_text(
        '[profiles.fake]\nmodel = "x"\nprovider = "scripted"\n[models]\ndefault = "fake"\n'
    )
    return p


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (("--config", "latin1.toml"), "error: latin1.toml: not UTF-8 text (byte 0xe9 at offset 23); save it as UTF-8"),
        (("--config", "configs"), "error: configs: is a directory, not a config file (give the file inside it)"),
        (
            ("--policy", "oracle", "--out", "existing.txt"),
            "error: --out existing.txt: is a file, not a directory; give a directory (it is created if missing)",
        ),
        (
            ("--policy", "oracle", "--tasks", "1,,2", "--out", "fresh"),
            "error: --tasks '1,,2': use all, A:B or a comma list of indices such as 0,4,9 (no empty items)",
        ),
        (
            ("--config", "scripted.toml", "--out", "fresh"),
            "error: model profile(s) default=fake (provider 'scripted'): scripted and replay are test doubles",
        ),
    ],
    ids=["config-not-utf8", "config-directory", "out-existing-file", "tasks-empty-item", "scripted-profile"],
)
def test_issue48_bad_command_line_input_is_one_line_and_changes_nothing(project, bash_available, args, line):
    before = _snapshot(project)
    r = _run(project, "run", "intercode-bash", *args, "--no-progress")
    assert r.returncode == 1, r.stderr
    errors = [x for x in r.stderr.splitlines() if x.startswith(("error:", "unexpected error:", "Traceback"))]
    assert len(errors) == 1 and errors[0].startswith(line), r.stderr
    assert _snapshot(project) == before


def test_issue48_method_that_never_submits_is_warned_about_by_run_and_report(project, bash_available):
    (project / "my_flows.py").write_text(SILENT_FLOW)
    out = project / "out"
    r = _run(
        project, "run", "intercode-bash", "--method", "my_flows:SILENT,stateflow", "--policy", "oracle",
        "--tasks", "0:2", "--out", str(out), "--no-progress",
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    warned = [x for x in r.stderr.splitlines() if x.startswith("warning:")]
    # Only the silent flow: the built-in method submits the gold answer the oracle replays.
    assert len(warned) == 1, r.stderr
    expected = "method 'my_flows:SILENT' (intercode-bash, models oracle) never submitted an answer in 2 finished"
    assert expected in warned[0]
    assert "--policy oracle" in warned[0]
    report = _run(project, "report", str(out))
    assert report.returncode == 0, report.stderr
    assert [x for x in report.stderr.splitlines() if x.startswith("warning:")] == warned

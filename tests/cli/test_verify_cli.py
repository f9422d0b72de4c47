"""`stateflow verify FLOW --spec SPEC` on the command line (issue 60)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from stateflow.cli.main import main

ROOT = Path(__file__).resolve().parents[2]
SPECS = ROOT / "tasks" / "kit" / "specs"


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    capsys.readouterr()
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out + out.err


def test_holds_exits_zero_and_states_the_bound(capsys: pytest.CaptureFixture[str]) -> None:
    code, out = _run(capsys, "verify", "intercode-sql", "--spec", str(SPECS / "setup-once.lisp"))
    assert code == 0, out
    assert out.startswith("holds: every path of 'intercode-sql' with at most 40 transitions keeps spec 'setup-once'")
    assert "free choices (may hold or not on any visit): action failed" in out
    assert "flowchart" not in out


def test_violated_exits_one_with_the_path_and_the_diagram(capsys: pytest.CaptureFixture[str]) -> None:
    code, out = _run(capsys, "verify", "intercode-sql", "--spec", str(SPECS / "three-repairs.lisp"), "--bound", "10")
    assert code == 1
    assert "violated: spec 'three-repairs' fails on a path of 5 states of 'intercode-sql' (bound 10)" in out
    assert "  5. Error  (#3 ANY -> Error [action failed])" in out
    assert "the spec does not allow 'Error' after Init Error Error Error" in out
    assert "flowchart TD" in out and "class s_Init,s_Error path" in out


def test_json_and_mermaid_file(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    diagram = tmp_path / "out" / "cex.mmd"
    spec = str(SPECS / "select-before-submit.lisp")
    code, out = _run(capsys, "verify", "intercode-bash", "--spec", spec, "--json", "--mermaid", str(diagram))
    assert code == 1
    verdict = json.loads(out[: out.rindex("}") + 1])
    assert verdict["holds"] is False and verdict["bound"] == 40
    assert verdict["counterexample"]["path"] == ["Init", "End"]
    assert verdict["counterexample"]["rules"] == ["start", "#1 ANY -> End [submitted]"]
    assert diagram.read_text().startswith("flowchart TD\n")
    assert f"wrote {diagram}" in out


def test_map_and_cut_off(capsys: pytest.CaptureFixture[str]) -> None:
    spec = str(SPECS / "ends-within-bound.lisp")
    code, out = _run(capsys, "verify", "intercode-bash", "--spec", spec, "--bound", "3", "--cut-off", "complete")
    assert code == 1 and "the bound of 3 transitions stops the run in" in out
    # hiding every working state leaves End alone: a run that ends ends in End
    hide = [a for s in ("Init", "Solve", "Verify", "Error") for a in ("--map", f"{s}=")]
    code, out = _run(capsys, "verify", "intercode-bash", "--spec", spec, *hide)
    assert code == 0, out
    assert "hidden from the spec: Init, Solve, Verify, Error" in out

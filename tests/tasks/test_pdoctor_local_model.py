"""Smoke test with the REAL embedded local-small model: one request, ReAct and the planning flow.

Runs the CLI in a child process (a native crash cannot take the test run down) and checks that
each method produced a complete record judged by the oracle. It does not assert success: a 0.5B
model often fails these requests, and that is what the benchmark measures.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.local_model, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]


def test_real_model_runs_pdoctor_with_react_and_the_planning_flow(tmp_path, local_small_model):
    out = tmp_path / "run"
    args = ["run", "pdoctor", "--method", "react,stateflow", "--n", "1", "--actions", "3:3", "--sentences", "2:2"]
    args += ["--seed", "4", "--model", "local-small", "--out", str(out), "--no-progress"]
    p = subprocess.run(
        [sys.executable, "-m", "stateflow.cli.main", *args], capture_output=True, text=True, timeout=1500, cwd=ROOT
    )
    assert p.returncode == 0, p.stderr[-3000:]
    records = [json.loads(x) for x in (out / "results.jsonl").read_text().splitlines()]
    assert sorted(r["method"] for r in records) == ["react", "stateflow"]
    for r in records:
        assert r["status"] == "ok", r["error"]
        assert r["llm_calls"] >= 1 and r["verdict"]["n_actions"] == 3
        assert r["success"] == r["verdict"]["success"]
    plan = next(r for r in records if r["method"] == "stateflow")
    assert plan["path"][:3] == ["Init", "Extract", "Check"] and plan["path"][-1] == "End"

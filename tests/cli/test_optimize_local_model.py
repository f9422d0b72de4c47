"""`stateflow optimize` with the REAL embedded model (local-small) on 5 demo SQL tasks: a smoke test.

It fails on a crash (exit status, missing outputs, a record that is not one per candidate and
task), never on a score. The CLI runs in a child process, so a native crash cannot take the test
session down. Run it under the shared model lock: `flock /work/model.lock pytest ...`.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent.parent

pytestmark = pytest.mark.local_model

_SPACE = """
name = "smoke"
benchmark = "intercode-sql"
dataset = "demo"
tasks = "0:5"
heldout = "5:7"
bases = ["sf_agent_hint"]
levers = ["values"]
max_levers = 1
profiles = ["local-small"]
max_turns = 4

[search]
first_rung = 3
eta = 2

[budget]
unit = "model_seconds"
limit = 3000
per_episode = 10
"""


def test_optimize_on_five_demo_tasks_with_the_small_model(tmp_path, sql_available, local_small_model):
    space = tmp_path / "space.toml"
    space.write_text(_SPACE)
    config = tmp_path / "models.toml"
    config.write_text("[profiles.local-small]\ntimeout = 3000.0\n")  # a busy machine is slow, not broken
    out = tmp_path / "opt"
    args = ["optimize", str(space), "--config", str(config), "--out", str(out), "--no-progress", "--timeout", "3600"]
    args += ["--archive", str(tmp_path / "archive.jsonl")]
    done = subprocess.run(
        [sys.executable, "-m", "stateflow.cli.main", *args],
        capture_output=True,
        text=True,
        timeout=3600,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    summary = json.loads((out / "optimize.json").read_text())
    assert len(summary["candidates"]) == 2 and summary["stop"] == "complete"
    for c in summary["candidates"]:
        lines = (out / "candidates" / c["key"] / "results.jsonl").read_text().splitlines()
        tasks = [json.loads(line)["task"] for line in lines]
        assert len(tasks) == len(set(tasks)) == c["n"] >= 3
        assert all(json.loads(line)["status"] == "ok" for line in lines)  # the model answered every call
    assert summary["heldout"]["n"] == 2 and summary["spent"] > 0
    assert (out / "front.png").read_bytes()[:4] == b"\x89PNG" and "| yes |" in (out / "front.md").read_text()

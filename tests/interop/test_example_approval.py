"""examples/approval_over_two_processes.py, as written, on the embedded 0.5B model: one process
pauses on the approval question and exits, a second one answers and finishes the run."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from stateflow.checkpoint import SQLiteCheckpointer

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "approval_over_two_processes.py"


def _run(*args: str, env: dict[str, str]) -> str:
    done = subprocess.run([sys.executable, str(EXAMPLE), *args], env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def test_a_paused_approval_is_answered_by_another_process(tmp_path, local_small_model) -> None:
    store = tmp_path / "threads.db"
    env = {**os.environ, "STATEFLOW_CHECKPOINTS": str(store)}
    first = _run("start", env=env)
    assert "paused in state Approve" in first and "Publish this note?" in first
    thread = first.split("(thread ", 1)[1].split(")", 1)[0]
    saved = SQLiteCheckpointer(store)
    try:
        assert saved.latest(thread).status.value == "paused"
    finally:
        saved.close()
    second = _run("answer", thread, "yes", env=env)
    assert "finished: Draft -> Approve -> Published" in second
    saved = SQLiteCheckpointer(store)
    try:
        statuses = [c.status.value for c in saved.list(thread)]
        answered = [m for m in saved.latest(thread).payload["history"] if m["kind"] == "human"]
    finally:
        saved.close()
    assert statuses[-1] == "finished" and "paused" in statuses
    assert [(m["name"], m["content"]) for m in answered] == [("editor", "yes")]

"""One writer per results directory: a second run into a busy --out is refused, nothing is lost."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from stateflow.tasks.bash.benchmark import INTERCODE_BASH
from stateflow.tasks.harness.run_lock import LOCK_NAME, RunInProgressError, RunLock
from stateflow.tasks.harness.runner import RunSpec, evaluate

from stateflow import ModelAssignment
from tests.tasks.fakes import FakeEnv

ORACLE = {"models": ModelAssignment.of("local"), "models_label": "default=local", "oracle": True}


def _spec(out: Path, tasks: str = "0:3") -> RunSpec:
    return RunSpec(INTERCODE_BASH, ("stateflow",), out=out, tasks=tasks, **ORACLE)


def _holder(directory: Path) -> subprocess.Popen:
    """Another process holding the directory's lock until it is killed."""
    code = textwrap.dedent(
        f"""
        import sys, time
        from pathlib import Path
        from stateflow.tasks.harness.run_lock import RunLock
        lock = RunLock(Path({str(directory)!r}))
        print("held", flush=True)
        time.sleep(600)
        """
    )
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
    return proc


def test_a_second_run_into_a_busy_directory_is_refused_and_the_records_stay(tmp_path):
    out = tmp_path / "out"
    evaluate(_spec(out), progress=False, env_factory=lambda s: FakeEnv())
    before = (out / "results.jsonl").read_bytes()
    holder = _holder(out)
    try:
        with pytest.raises(RunInProgressError) as info:
            evaluate(_spec(out, "0:5"), progress=False, env_factory=lambda s: FakeEnv())
        assert str(out) in str(info.value) and f"process {holder.pid}" in str(info.value)
        assert (out / "results.jsonl").read_bytes() == before
    finally:
        holder.send_signal(signal.SIGKILL)  # a killed holder must not leave a stale lock
        holder.wait()
    summary = evaluate(_spec(out, "0:5"), progress=False, env_factory=lambda s: FakeEnv())
    assert (summary.finished, summary.skipped) == (2, 3)


def test_a_refused_run_into_a_new_directory_leaves_nothing_behind(tmp_path):
    out = tmp_path / "new"

    def broken(spec):
        if (out / LOCK_NAME).exists():  # the probe has run; the episodes' environment fails
            raise RuntimeError("no sandbox")
        return FakeEnv()

    with pytest.raises(RuntimeError, match="no sandbox"):
        evaluate(_spec(out), progress=False, env_factory=broken)
    assert not out.exists()


def test_the_lock_is_free_again_after_a_run_and_names_its_holder(tmp_path):
    evaluate(_spec(tmp_path), progress=False, env_factory=lambda s: FakeEnv())
    with RunLock(tmp_path) as lock:
        assert lock.path.read_text() == str(os.getpid())
        with pytest.raises(RunInProgressError, match=f"process {os.getpid()}"):
            RunLock(tmp_path)  # flock is per open file: a second open conflicts even in one process
    RunLock(tmp_path).release()

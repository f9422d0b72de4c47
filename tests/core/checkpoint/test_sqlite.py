"""SQLiteCheckpointer against the conformance suite, plus kill -9 during writes."""

from __future__ import annotations

import os
import random
import signal
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from stateflow.checkpoint import Checkpoint, SQLiteCheckpointer
from tests.core.checkpoint.contract import ROOT, CheckpointerContract, fill


class TestSQLiteCheckpointer(CheckpointerContract):
    @pytest.fixture
    def cp(self, tmp_path: Path) -> Iterator[SQLiteCheckpointer]:
        store = SQLiteCheckpointer(tmp_path / "runs.db")
        self.spec = ("sqlite", str(store.path))
        yield store
        store.close()

    def other(self, cp: SQLiteCheckpointer) -> SQLiteCheckpointer:  # type: ignore[override]
        return SQLiteCheckpointer(cp.path)

    def write_raw(self, cp: SQLiteCheckpointer, thread_id: str, step: int, text: str) -> None:  # type: ignore[override]
        with sqlite3.connect(cp.path) as conn:
            changed = conn.execute(
                "UPDATE checkpoints SET body = ? WHERE thread_id = ? AND step = ?", (text, thread_id, step)
            ).rowcount
        assert changed == 1


def test_the_file_uses_a_write_ahead_log_and_survives_reopening(tmp_path: Path) -> None:
    cp = SQLiteCheckpointer(tmp_path / "runs.db")
    written = fill(cp, "t", 3)
    cp.close()
    with sqlite3.connect(tmp_path / "runs.db") as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    again = SQLiteCheckpointer(tmp_path / "runs.db")
    assert again.list("t") == written
    again.close()


def test_a_checkpointer_is_shared_by_threads_each_with_its_connection(tmp_path: Path) -> None:
    import threading

    cp = SQLiteCheckpointer(tmp_path / "runs.db")
    errors: list[BaseException] = []

    def run(name: str) -> None:
        try:
            fill(cp, name, 20)
        except BaseException as err:
            errors.append(err)

    pool = [threading.Thread(target=run, args=(f"t{i}",)) for i in range(4)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    assert errors == []
    assert sorted(i.thread_id for i in cp.threads()) == ["t0", "t1", "t2", "t3"]
    assert all(i.step == 19 for i in cp.threads())
    cp.close()


def test_a_path_that_cannot_hold_a_database_fails_at_construction(tmp_path: Path) -> None:
    (tmp_path / "dir.db").mkdir()
    with pytest.raises(sqlite3.OperationalError):
        SQLiteCheckpointer(tmp_path / "dir.db")


def check_store(path: Path) -> dict[str, int]:
    """Integrity of the file and of every thread; returns each thread's checkpoint count."""
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    cp = SQLiteCheckpointer(path)
    try:
        counts = {}
        for info in cp.threads():
            steps: list[Checkpoint] = cp.list(info.thread_id)  # parses every row
            assert [c.step for c in steps] == list(range(len(steps)))
            assert len(steps[-1].payload["history"]) == 2 * len(steps)  # the content is whole
            counts[info.thread_id] = len(steps)
        return counts
    finally:
        cp.close()


def test_kill_9_at_random_moments_while_writing_never_damages_the_file(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    rng = random.Random(43)
    kills, totals = 25, []
    for _ in range(kills):
        child = subprocess.Popen(
            [sys.executable, "-m", "tests.core.checkpoint.writer", "sqlite", str(path), "3"],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert child.stdout is not None and child.stdout.readline().strip() == "ready"
        try:
            child.wait(timeout=rng.uniform(0.02, 0.4))
        except subprocess.TimeoutExpired:
            os.kill(child.pid, signal.SIGKILL)
        assert child.wait(timeout=30) == -signal.SIGKILL
        totals.append(sum(check_store(path).values()))
    # the writer made progress across the kills (each restart continued where the last one stopped)
    assert totals == sorted(totals) and totals[-1] > totals[0] > 0, totals

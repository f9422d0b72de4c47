"""SQLiteCheckpointer against the conformance suite, plus kill -9 during writes."""

from __future__ import annotations

import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from stateflow.checkpoint import Checkpoint, CheckpointCorrupt, CheckpointStoreUnavailable, SQLiteCheckpointer
from tests.core.checkpoint.contract import ROOT, CheckpointerContract, fill, make


class TestSQLiteCheckpointer(CheckpointerContract):
    deltas = True

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


def test_a_threads_connection_is_closed_when_the_thread_ends(tmp_path: Path) -> None:
    # issue 59 part 3: a served flow runs each streamed run on a new thread; every one of them
    # left its connection open (two file descriptors and SQLite's page cache): 600 runs kept 603
    # connections and 1,220 descriptors, and the server's memory grew ~180 KiB per run.
    import threading

    cp = SQLiteCheckpointer(tmp_path / "runs.db")

    def fds() -> int:
        return len(os.listdir("/proc/self/fd"))

    def one_thread(name: str) -> None:
        t = threading.Thread(target=fill, args=(cp, name, 3))
        t.start()
        t.join()

    cp.latest("warm")  # this thread's connection, kept while the thread lives
    one_thread("first")  # SQLite may keep one closed descriptor of the file for reuse
    before = fds()
    for i in range(30):
        one_thread(f"t{i}")
    assert len(cp._connections) == 1 and fds() == before  # only the live thread's connection
    assert len(cp.threads()) == 31 and cp.latest("t29") is not None  # nothing lost
    cp.close()
    assert not cp._connections


def test_rows_are_deltas_between_full_rows(tmp_path: Path) -> None:
    cp = SQLiteCheckpointer(tmp_path / "runs.db", snapshot_every=4)
    written = [make("t", s) for s in range(9)]
    for c in written:
        cp.put(c)
    with sqlite3.connect(tmp_path / "runs.db") as conn:
        kinds = [
            "delta" if json.loads(body).get("format") == "delta" else "full"
            for (body,) in conn.execute("SELECT body FROM checkpoints ORDER BY step")
        ]
        stored = conn.execute("SELECT SUM(LENGTH(body)) FROM checkpoints").fetchone()[0]
    assert kinds == ["full", "delta", "delta", "delta", "full", "delta", "delta", "delta", "full"]
    assert stored < 0.65 * sum(len(c.to_json()) for c in written)  # 59 % here; 1/16 at 50 steps
    assert cp.list("t") == written
    cp.close()
    full = SQLiteCheckpointer(tmp_path / "full.db", snapshot_every=1)
    for c in written:
        full.put(c)
    assert full.list("t") == written
    with sqlite3.connect(tmp_path / "full.db") as conn:
        assert all("format" not in json.loads(b) for (b,) in conn.execute("SELECT body FROM checkpoints"))
    full.close()


def test_a_long_chain_on_a_damaged_row_names_the_damaged_row(tmp_path: Path) -> None:
    cp = SQLiteCheckpointer(tmp_path / "runs.db")  # full rows at 0 and 10
    written = fill(cp, "t", 12)
    TestSQLiteCheckpointer().write_raw(cp, "t", 2, "{truncated")
    with pytest.raises(CheckpointCorrupt) as err:
        cp.get("t", 7)
    assert "built on step 2, which is damaged" in str(err.value) and "truncated" in str(err.value)
    assert (err.value.thread_id, err.value.step) == ("t", 7)
    assert cp.get("t", 1) == written[1] and cp.get("t", 10) == written[10] and cp.latest("t") == written[11]
    cp.close()


def test_a_put_after_a_damaged_latest_row_starts_a_full_row(tmp_path: Path) -> None:
    cp = SQLiteCheckpointer(tmp_path / "runs.db")
    fill(cp, "t", 3)
    TestSQLiteCheckpointer().write_raw(cp, "t", 2, "garbage")
    writer = SQLiteCheckpointer(tmp_path / "runs.db")  # no cached base: must read it, and cannot
    writer.put(make("t", 3))
    assert cp.get("t", 3) == make("t", 3) and cp.get("t", 1) == make("t", 1)
    cp.close()
    writer.close()


def test_a_path_that_cannot_hold_a_database_fails_at_construction(tmp_path: Path) -> None:
    (tmp_path / "dir.db").mkdir()
    with pytest.raises(CheckpointStoreUnavailable) as err:
        SQLiteCheckpointer(tmp_path / "dir.db")
    assert "dir.db" in str(err.value)
    (tmp_path / "text.db").write_text("this is not a database, it is a shopping list\n" * 100)
    with pytest.raises(CheckpointStoreUnavailable, match="not a database"):
        SQLiteCheckpointer(tmp_path / "text.db")


def test_a_writer_locked_out_past_its_timeout_gets_a_clear_error_and_writes_nothing(tmp_path: Path) -> None:
    cp = SQLiteCheckpointer(tmp_path / "runs.db", timeout=0.2)
    fill(cp, "t", 2)
    blocker = sqlite3.connect(tmp_path / "runs.db", isolation_level=None)
    blocker.execute("BEGIN IMMEDIATE")  # another process in the middle of a long write
    try:
        with pytest.raises(CheckpointStoreUnavailable) as err:
            cp.put(make("t", 2))
        assert "runs.db" in str(err.value) and "locked" in str(err.value)
    finally:
        blocker.execute("ROLLBACK")
        blocker.close()
    assert cp.latest("t") == make("t", 1)
    cp.put(make("t", 2))  # and the store works again
    assert cp.latest("t") == make("t", 2)
    cp.close()


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


def test_a_claim_makes_its_directory_again_if_it_was_removed_between_runs(tmp_path: Path) -> None:
    import shutil

    from stateflow.errors import ThreadBusy

    cp = SQLiteCheckpointer(tmp_path / "c.db")
    other = SQLiteCheckpointer(tmp_path / "c.db")
    with cp.claim("t", "first"):
        pass
    shutil.rmtree(tmp_path / "c.db.claims")  # e.g. a clean-up between runs
    with cp.claim("t", "second"):
        assert (tmp_path / "c.db.claims").is_dir()
        with pytest.raises(ThreadBusy, match="second"), other.claim("t", "third"):
            pass
    with other.claim("t", "third"):  # released at the end of the block
        pass
    cp.close()
    other.close()


def test_a_claims_lock_file_is_removed_when_its_claim_ends(tmp_path: Path) -> None:
    # issue 59 part 3: the claims folder kept one empty .lock file per thread forever
    cp = SQLiteCheckpointer(tmp_path / "c.db")
    claims = tmp_path / "c.db.claims"
    for n in range(5):
        with cp.claim(f"thread-{n}", "me"):
            assert len(list(claims.iterdir())) == 1  # the claim's own file, while it is held
    assert list(claims.iterdir()) == []
    with pytest.raises(RuntimeError), cp.claim("failing", "me"):
        raise RuntimeError("the run failed")
    assert list(claims.iterdir()) == []  # an exception ends the claim too
    cp.close()


def test_a_file_left_by_a_killed_holder_is_claimed_and_then_removed(tmp_path: Path) -> None:
    import hashlib

    cp = SQLiteCheckpointer(tmp_path / "c.db")
    claims = tmp_path / "c.db.claims"
    claims.mkdir()
    stale = claims / (hashlib.sha256(b"t").hexdigest()[:32] + ".lock")
    stale.write_text("killed (pid 1)")  # what a kill -9 leaves: the file, no lock
    with cp.claim("t", "next"):
        assert stale.read_text().startswith("next")
    assert not stale.exists()
    cp.close()


def test_removing_lock_files_never_lets_two_claimers_hold_one_thread(tmp_path: Path) -> None:
    # Claimers race on one thread while each release removes the file: one that opened the file
    # just before its removal must not end up holding a lock beside one that made a new file.
    import threading

    from stateflow.errors import ThreadBusy

    stores = [SQLiteCheckpointer(tmp_path / "c.db") for _ in range(6)]
    guard = threading.Lock()
    inside = [0]
    overlaps: list[int] = []
    held = [0]

    wins = 30  # each claimer races until it has held the claim this often: a loaded machine only slows it

    def claimer(store: SQLiteCheckpointer) -> None:
        mine = 0
        for _ in range(100_000):
            if mine == wins:
                return
            try:
                with store.claim("shared", "racer"):
                    mine += 1
                    with guard:
                        inside[0] += 1
                        held[0] += 1
                        if inside[0] > 1:
                            overlaps.append(inside[0])
                    time.sleep(0)
                    with guard:
                        inside[0] -= 1
            except ThreadBusy:
                pass

    workers = [threading.Thread(target=claimer, args=(s,)) for s in stores]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    assert overlaps == [] and held[0] == wins * len(stores)
    assert list((tmp_path / "c.db.claims").iterdir()) == []
    for s in stores:
        s.close()

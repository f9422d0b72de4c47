"""PostgresCheckpointer against the conformance suite and a real PostgreSQL server, plus the
server going away and coming back."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from stateflow import resume
from stateflow.checkpoint import CheckpointStoreUnavailable, ClaimLost, PostgresCheckpointer
from stateflow.testing.fake_openai import FakeOpenAIServer
from tests.core.checkpoint.contract import ROOT, CheckpointerContract, fill, make
from tests.core.checkpoint.pg_server import PgServer
from tests.core.durable.flows import fake_profile, responder


class TestPostgresCheckpointer(CheckpointerContract):
    deltas = True

    @pytest.fixture
    def cp(self, pg_dsn: str) -> Iterator[PostgresCheckpointer]:
        store = PostgresCheckpointer(pg_dsn)
        self.spec = ("postgres", pg_dsn)
        yield store
        store.close()

    def other(self, cp: PostgresCheckpointer) -> PostgresCheckpointer:  # type: ignore[override]
        return PostgresCheckpointer(cp.dsn)

    def write_raw(self, cp: PostgresCheckpointer, thread_id: str, step: int, text: str) -> None:  # type: ignore[override]
        with psycopg.connect(cp.dsn, autocommit=True) as conn:
            changed = conn.execute(
                "UPDATE stateflow_checkpoints SET body = %s WHERE thread_id = %s AND step = %s",
                (text, thread_id, step),
            ).rowcount
        assert changed == 1


@pytest.fixture
def own_server(pg_server: PgServer) -> Iterator[PgServer]:
    """A server of this test's own, to stop and restart (the session's one keeps serving the others)."""
    server = PgServer()
    server.start()
    yield server
    server.destroy()


def test_the_server_going_away_is_a_clear_error_and_the_last_checkpoint_survives(own_server: PgServer) -> None:
    dsn = own_server.dsn() + " password=hunter2"  # trust auth ignores it; the message must not show it
    cp = PostgresCheckpointer(dsn, connect_timeout=2)
    written = fill(cp, "t", 3)
    own_server.stop(immediate=True)  # like a crash: no shutdown checkpoint, recovery from WAL at restart
    for action in (lambda: cp.put(make("t", 3)), lambda: cp.latest("t"), lambda: cp.threads()):
        with pytest.raises(CheckpointStoreUnavailable) as err:
            action()
        assert "hunter2" not in str(err.value) and "password=***" in str(err.value)
        assert str(own_server.root) in str(err.value)
    with pytest.raises(CheckpointStoreUnavailable), cp.claim("t", "runner"):
        pass
    own_server.start()
    # the same object reconnects by itself; nothing committed was lost, the failed put left nothing
    assert cp.latest("t") == written[-1]
    assert cp.list("t") == written
    cp.put(make("t", 3))
    assert cp.latest("t") == make("t", 3)
    cp.close()


def test_kill_9_of_a_writer_at_random_moments_leaves_every_thread_whole(pg_dsn: str) -> None:
    # The client side of crash safety: a put is one transaction, so a writer killed mid-put leaves
    # no half row and no gap (the server's own crash safety is PostgreSQL's).
    rng = random.Random(4343)
    totals = []
    for _ in range(10):
        child = subprocess.Popen(
            [sys.executable, "-m", "tests.core.checkpoint.writer", "postgres", pg_dsn, "3"],
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
        cp = PostgresCheckpointer(pg_dsn)
        counts = []
        for info in cp.threads():
            steps = cp.list(info.thread_id)
            assert [c.step for c in steps] == list(range(len(steps)))
            assert len(steps[-1].payload["history"]) == 2 * len(steps)
            counts.append(len(steps))
        cp.close()
        totals.append(sum(counts))
    assert totals == sorted(totals) and totals[-1] > totals[0] > 0, totals


def test_an_unreachable_server_fails_at_construction_naming_the_dsn(pg_server: PgServer) -> None:
    dsn = f"host={pg_server.root}/nowhere port=5432 user=stateflow password=s3cret dbname=x"
    with pytest.raises(CheckpointStoreUnavailable) as err:
        PostgresCheckpointer(dsn, connect_timeout=1)
    assert "nowhere" in str(err.value) and "s3cret" not in str(err.value)


def test_a_claim_is_released_when_its_connection_dies(pg_dsn: str) -> None:
    # The server ends the holder's session (as it does when a machine disappears): the lock goes with it.
    cp = PostgresCheckpointer(pg_dsn)
    with cp.claim("t", "first"):
        with psycopg.connect(pg_dsn, autocommit=True) as admin:
            admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_locks WHERE locktype = 'advisory' AND granted "
                "AND pid <> pg_backend_pid()"
            )
        with cp.claim("t", "second"):
            pass
    cp.close()


def _run_losing_its_claim(
    server: PgServer, fake_url: str, lose: Any
) -> tuple[PostgresCheckpointer, pytest.ExceptionInfo, Any]:
    """A checkpointed run whose second edit calls ``lose()`` (the claim goes away mid-run);
    returns the store, the run's error and the flow (whose tool loses the claim only once)."""
    from stateflow import run
    from tests.core.durable.flows import edit, fake_profile, long_flow

    edits: list[int] = []

    def sabotaged(ctx):
        edits.append(1)
        if len(edits) == 2:
            lose()
        return edit(ctx)

    cp = PostgresCheckpointer(server.dsn(), connect_timeout=5)
    flow = long_flow(fake_url, tool=sabotaged)
    with pytest.raises(ClaimLost) as err:
        run(flow, "T", models=fake_profile(fake_url), thread_id="t", checkpointer=cp, telemetry=False)
    assert len(edits) == 2  # the run stopped at the first checkpoint after the loss
    return cp, err, flow


def test_a_claim_ended_by_the_server_mid_run_fails_the_run_and_keeps_its_checkpoints(own_server: PgServer) -> None:
    def terminate_claims() -> None:
        with psycopg.connect(own_server.dsn(), autocommit=True) as admin:
            ended = admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_locks WHERE locktype = 'advisory' AND granted "
                "AND pid <> pg_backend_pid()"
            ).fetchall()
        assert ended == [(True,)]  # exactly the run's claim

    with FakeOpenAIServer(responder) as fake:
        cp, err, _ = _run_losing_its_claim(own_server, fake.url, terminate_claims)
    assert err.value.thread_id == "t" and "claim" in str(err.value) and "resume" in str(err.value)
    written = cp.list("t")
    # the last checkpoint is the one before the loss (Edit entered the second time), readable,
    # and the run wrote nothing after it (not even a "failed" row: the thread may belong to another)
    assert [c.state for c in written][-1] == "Edit" and written[-1].status.value == "running"
    assert cp.latest("t") == written[-1]
    cp.close()


def test_a_server_restart_mid_run_fails_the_run_with_claim_lost_and_the_thread_resumes(own_server: PgServer) -> None:
    def restart() -> None:
        own_server.stop(immediate=True)  # a crash: the claim's session dies with the server
        own_server.start()

    with FakeOpenAIServer(responder) as fake:
        cp, err, flow = _run_losing_its_claim(own_server, fake.url, restart)
        assert "the claim of" in str(err.value) and "postgres" in str(err.value)
        last = cp.latest("t")  # the same object reads again (its old connection died with the server)
        assert last is not None and last.state == "Edit" and last.status.value == "running"
        done = resume("t", checkpointer=cp, flow=flow, models=fake_profile(fake.url), telemetry=False)
    assert done.stop_reason == "final" and done.path[-1] == "Done"
    assert cp.latest("t").status.value == "finished"
    cp.close()

"""The conformance suite every checkpointer passes (memory, SQLite, PostgreSQL).

A backend's test module subclasses :class:`CheckpointerContract` and provides three fixtures'
worth of hooks: ``cp`` (a checkpointer on a fresh, empty store), :meth:`~CheckpointerContract.other`
(a second handle on the same store, as another writer would open it) and
:meth:`~CheckpointerContract.write_raw` (overwrite a stored row's text directly, as a crash or a
disk fault would). Backends that several processes share also set ``spec`` for
:mod:`tests.core.checkpoint.holder`, which claims a thread from a child process.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from stateflow.checkpoint import (
    CHECKPOINT_SCHEMA_VERSION,
    Checkpoint,
    CheckpointConflict,
    CheckpointCorrupt,
    Checkpointer,
    CheckpointInvalid,
    CheckpointNotFound,
    CheckpointSchemaUnsupported,
    ThreadBusy,
    ThreadNotFound,
    ThreadStatus,
)
from stateflow.threads import history

ROOT = Path(__file__).resolve().parents[3]
FINGERPRINT = "0123456789abcdef" * 4


def make(thread: str, step: int, *, payload: dict[str, Any] | None = None, **kw: Any) -> Checkpoint:
    """A checkpoint shaped like a run's: a history growing by two messages per step."""
    fields: dict[str, Any] = {
        "flow_name": "demo",
        "flow_fingerprint": FINGERPRINT,
        "state": f"S{step}",
        "status": ThreadStatus.RUNNING,
        "created_at": 1_700_000_000.0 + step,
    }
    fields.update(kw)
    if payload is None:
        # messages long enough that a backend storing deltas stores them as deltas
        payload = {"history": [f"m{i} " + "x" * 120 for i in range(2 * step + 2)], "vars": {"step": step}}
    return Checkpoint(thread_id=thread, step=step, payload=payload, **fields)


def fill(cp: Checkpointer, thread: str, steps: int, **kw: Any) -> list[Checkpoint]:
    written = [make(thread, s, **kw) for s in range(steps)]
    for c in written:
        cp.put(c)
    return written


class CheckpointerContract:
    """Behaviour every :class:`~stateflow.checkpoint.Checkpointer` must have."""

    #: backend name and store address for tests/core/checkpoint/holder.py; None: one process only.
    spec: tuple[str, str] | None = None
    #: rows store changes since the previous step (stateflow/checkpoint/rows.py): a damaged row
    #: then also hides the steps built on it, up to the next full row.
    deltas: bool = False

    def other(self, cp: Checkpointer) -> Checkpointer:
        """A second handle on the store behind ``cp`` (closed by the test)."""
        raise NotImplementedError

    def write_raw(self, cp: Checkpointer, thread_id: str, step: int, text: str) -> None:
        """Replace the stored text of an existing row, bypassing every check."""
        raise NotImplementedError

    # -- put / read -------------------------------------------------------------------------

    def test_is_a_checkpointer(self, cp: Checkpointer) -> None:
        assert isinstance(cp, Checkpointer)

    def test_an_unknown_thread_has_no_latest_and_is_not_found(self, cp: Checkpointer) -> None:
        assert cp.latest("nope") is None
        with pytest.raises(ThreadNotFound) as err:
            cp.get("nope", 0)
        assert err.value.thread_id == "nope" and "'nope'" in str(err.value)
        with pytest.raises(ThreadNotFound):
            cp.list("nope")
        assert cp.threads() == []

    def test_put_then_read_back_every_step(self, cp: Checkpointer) -> None:
        written = fill(cp, "t1", 4)
        assert cp.latest("t1") == written[-1]
        assert [cp.get("t1", s) for s in range(4)] == written
        assert cp.list("t1") == written

    def test_a_missing_step_names_the_thread_and_its_range(self, cp: Checkpointer) -> None:
        fill(cp, "t1", 3)
        for step in (3, 99, -1):
            with pytest.raises(CheckpointNotFound) as err:
                cp.get("t1", step)
            assert (err.value.thread_id, err.value.step, err.value.latest) == ("t1", step, 2)
            assert "0..2" in str(err.value)

    def test_threads_lists_the_latest_state_newest_update_first(self, cp: Checkpointer) -> None:
        fill(cp, "old", 2)
        fill(cp, "new", 3, created_at=1_800_000_000.0)
        cp.put(make("old", 2, status=ThreadStatus.PAUSED, created_at=1_750_000_000.0))
        infos = cp.threads()
        assert [i.thread_id for i in infos] == ["new", "old"]
        old = infos[1]
        assert (old.status, old.state, old.step, old.flow_name) == (ThreadStatus.PAUSED, "S2", 2, "demo")
        assert (old.created_at, old.updated_at, old.parent) == (1_700_000_000.0, 1_750_000_000.0, None)

    def test_a_fork_keeps_its_parent(self, cp: Checkpointer) -> None:
        fill(cp, "base", 3)
        fork = make("fork", 0, parent=("base", 1))
        cp.put(fork)
        cp.put(make("fork", 1))  # later steps of the fork need not repeat the parent
        assert cp.get("fork", 0).parent == ("base", 1)
        assert next(i for i in cp.threads() if i.thread_id == "fork").parent == ("base", 1)

    @pytest.mark.parametrize(
        "payload",
        [
            {"text": "héllo wörld ✓ 🚀 مرحبا 日本語", "nul": "a\x00b", "quote": "\"'\\\n\t"},
            {"nested": {"a": [1, 2.5, None, True, False, {"b": [[], {}]}], "big": 2**62, "neg": -3}},
            {"history": [{"role": "user", "content": "x" * 300, "meta": {"i": i}} for i in range(4000)]},
            {},
        ],
        ids=["unicode", "nested", "large", "empty"],
    )
    def test_payloads_round_trip_exactly(self, cp: Checkpointer, payload: dict[str, Any]) -> None:
        cp.put(make("t", 0, payload=payload))
        back = cp.latest("t")
        assert back is not None and back.payload == payload
        assert json.dumps(back.payload, sort_keys=True) == json.dumps(payload, sort_keys=True)

    def test_stored_checkpoints_are_not_changed_by_the_caller_mutating_them(self, cp: Checkpointer) -> None:
        payload: dict[str, Any] = {"history": ["a"]}
        cp.put(make("t", 0, payload=payload))
        payload["history"].append("b")
        read = cp.latest("t")
        assert read is not None
        read.payload["history"].append("c")  # type: ignore[attr-defined]
        assert cp.get("t", 0).payload == {"history": ["a"]}

    def test_a_payload_that_is_not_json_is_refused_and_nothing_is_written(self, cp: Checkpointer) -> None:
        for bad in ({"s": {1, 2}}, {"x": float("nan")}, {"f": print}):
            with pytest.raises(CheckpointInvalid) as err:
                cp.put(make("t", 0, payload=bad))
            assert err.value.thread_id == "t" and err.value.step == 0
        assert cp.latest("t") is None and cp.threads() == []

    # -- conflicts --------------------------------------------------------------------------

    def test_a_new_thread_must_start_at_step_zero(self, cp: Checkpointer) -> None:
        with pytest.raises(CheckpointConflict) as err:
            cp.put(make("t", 1))
        assert (err.value.thread_id, err.value.step, err.value.latest) == ("t", 1, None)
        assert cp.latest("t") is None

    @pytest.mark.parametrize("step", [0, 1, 2, 4, 10])
    def test_a_step_that_does_not_continue_the_thread_conflicts(self, cp: Checkpointer, step: int) -> None:
        written = fill(cp, "t", 3)
        with pytest.raises(CheckpointConflict) as err:
            cp.put(make("t", step, state="Other"))
        assert (err.value.thread_id, err.value.step, err.value.latest) == ("t", step, 2)
        assert "'t'" in str(err.value) and f"step {step}" in str(err.value) and "latest stored step 2" in str(err.value)
        assert cp.list("t") == written

    def test_two_writers_racing_for_one_step_exactly_one_wins(self, cp: Checkpointer) -> None:
        fill(cp, "t", 2)
        writers = 6
        handles = [self.other(cp) for _ in range(writers)]

        def race(step: int) -> list[str | BaseException]:
            barrier = threading.Barrier(writers)
            outcomes: list[str | BaseException] = [""] * writers

            def write(i: int) -> None:
                barrier.wait()
                try:
                    handles[i].put(make("t", step, state=f"W{i}"))
                    outcomes[i] = f"W{i}"
                except BaseException as err:
                    outcomes[i] = err

            pool = [threading.Thread(target=write, args=(i,)) for i in range(writers)]
            for t in pool:
                t.start()
            for t in pool:
                t.join()
            return outcomes

        try:
            for step in (2, 3, 4):  # several rounds, each racing for the next step
                outcomes = race(step)
                winners = [o for o in outcomes if isinstance(o, str)]
                losers = [o for o in outcomes if not isinstance(o, str)]
                assert len(winners) == 1, outcomes
                assert all(isinstance(o, CheckpointConflict) for o in losers), losers
                assert cp.get("t", step).state == winners[0]
                assert [c.step for c in cp.list("t")] == list(range(step + 1))
        finally:
            for h in handles:
                if h is not cp:
                    h.close()

    # -- claims -----------------------------------------------------------------------------

    def test_a_claim_is_exclusive_between_threads_and_released_on_exit(self, cp: Checkpointer) -> None:
        second = self.other(cp)
        try:
            with cp.claim("t", "runner-A"):
                with pytest.raises(ThreadBusy) as err, second.claim("t", "runner-B"):
                    pass
                assert err.value.thread_id == "t" and "runner-A" in (err.value.holder or "")
                assert "'t'" in str(err.value) and "runner-A" in str(err.value)
                with second.claim("other-thread", "runner-B"):  # claims are per thread
                    pass
                # another Python thread is refused as well
                box: list[BaseException | None] = []

                def try_claim() -> None:
                    try:
                        with second.claim("t", "runner-C"):
                            box.append(None)
                    except ThreadBusy as busy:
                        box.append(busy)

                worker = threading.Thread(target=try_claim)
                worker.start()
                worker.join()
                assert isinstance(box[0], ThreadBusy)
            with second.claim("t", "runner-B"):
                pass
            with pytest.raises(RuntimeError), cp.claim("t", "runner-A"):
                raise RuntimeError("the holder fails")
            with second.claim("t", "runner-B"):  # released by the exception too
                pass
        finally:
            if second is not cp:
                second.close()

    def test_a_claim_held_by_another_process_is_busy_until_that_process_is_killed(self, cp: Checkpointer) -> None:
        assert self.spec is not None, "a backend shared by processes sets spec; others drop this test"
        backend, address = self.spec
        child = subprocess.Popen(
            [sys.executable, "-m", "tests.core.checkpoint.holder", backend, address, "t", "child-runner"],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            assert child.stdout is not None
            assert child.stdout.readline().strip() == "claimed"
            with pytest.raises(ThreadBusy) as err, cp.claim("t", "parent"):
                pass
            assert "child-runner" in str(err.value) and str(child.pid) in str(err.value)
            os.kill(child.pid, signal.SIGKILL)
            child.wait(timeout=30)
            with cp.claim("t", "parent"):  # no stale lock after kill -9
                pass
        finally:
            if child.poll() is None:
                child.kill()
                child.wait()

    # -- damaged rows -----------------------------------------------------------------------

    @pytest.mark.parametrize(
        "damage",
        ["garbage", "truncated", "empty", "wrong-type", "bad-status", "array"],
    )
    def test_a_damaged_row_names_its_thread_and_step_and_spares_the_rest(self, cp: Checkpointer, damage: str) -> None:
        written = fill(cp, "hurt", 3)
        fine = fill(cp, "fine", 2)
        good = written[1].to_json()
        text = {
            "garbage": "\x07not json at all",
            "truncated": good[: len(good) // 2],
            "empty": "",
            "wrong-type": good.replace('"step":1', '"step":"one"'),
            "bad-status": good.replace('"status":"running"', '"status":"exploded"'),
            "array": "[1, 2]",
        }[damage]
        self.write_raw(cp, "hurt", 1, text)
        with pytest.raises(CheckpointCorrupt) as err:
            cp.get("hurt", 1)
        message = str(err.value)
        assert "'hurt'" in message and "step 1" in message, message
        assert (err.value.thread_id, err.value.step) == ("hurt", 1)
        if damage == "truncated":
            assert "truncated" in message
        if damage == "bad-status":
            assert "exploded" in message
        with pytest.raises(CheckpointCorrupt):
            cp.list("hurt")
        # the steps before it and every other thread stay readable
        assert cp.get("hurt", 0) == written[0]
        assert cp.list("fine") == fine
        assert {i.thread_id for i in cp.threads()} == {"hurt", "fine"}
        if self.deltas:  # step 2 is stored as changes since step 1: unreadable, and says why
            for read in (lambda: cp.get("hurt", 2), lambda: cp.latest("hurt")):
                with pytest.raises(CheckpointCorrupt) as later:
                    read()
                assert "step 2" in str(later.value) and "built on step 1, which is damaged" in str(later.value)
                assert (later.value.thread_id, later.value.step) == ("hurt", 2)
        else:
            assert cp.get("hurt", 2) == written[2] and cp.latest("hurt") == written[2]
            cp.put(make("hurt", 3))  # and the thread can still be continued
            assert cp.latest("hurt") == make("hurt", 3)

    def test_history_shows_the_readable_steps_around_a_damaged_row(self, cp: Checkpointer) -> None:
        # regression ([edges] 11): one damaged row left `stateflow history` with nothing at all
        fill(cp, "hurt", 4)
        self.write_raw(cp, "hurt", 1, "\x07not json at all")
        lines = history("hurt", checkpointer=cp)
        assert [(s.step, s.status) for s in lines][:2] == [(0, "running"), (1, "damaged")]
        assert len(lines) == 4 and str(lines[1]).startswith("   1  damaged  cannot be read: ")
        # without deltas the later steps stand on their own; with them they need step 1
        later = {s.status for s in lines[2:]}
        assert later == ({"damaged"} if self.deltas else {"running"})

    def test_a_damaged_latest_row_is_reported_by_latest(self, cp: Checkpointer) -> None:
        fill(cp, "t", 2)
        self.write_raw(cp, "t", 1, '{"thread_id": "t", "step": 1')
        with pytest.raises(CheckpointCorrupt) as err:
            cp.latest("t")
        assert "'t'" in str(err.value) and "step 1" in str(err.value) and "truncated" in str(err.value)

    def test_a_newer_schema_version_is_refused_clearly(self, cp: Checkpointer) -> None:
        fill(cp, "t", 2)
        newer = json.loads(make("t", 1).to_json())
        newer["schema_version"] = CHECKPOINT_SCHEMA_VERSION + 1
        newer["a_future_field"] = {"x": 1}
        self.write_raw(cp, "t", 1, json.dumps(newer))
        with pytest.raises(CheckpointSchemaUnsupported) as err:
            cp.get("t", 1)
        assert (err.value.found, err.value.supported) == (CHECKPOINT_SCHEMA_VERSION + 1, CHECKPOINT_SCHEMA_VERSION)
        assert "'t'" in str(err.value) and "step 1" in str(err.value) and "upgrade" in str(err.value)
        assert cp.get("t", 0) == make("t", 0)

    def test_long_threads_read_back_exactly_at_every_step(self, cp: Checkpointer) -> None:
        # 25 steps cross several full rows when deltas are stored; a history that is rewritten
        # (not extended) at step 13 and a key dropped at step 17 must come back exactly too.
        written = []
        history: list[Any] = []
        for step in range(25):
            history = [*history, {"i": step, "text": "y" * 200}, f"reply {step}"]
            if step == 13:
                history = history[::-1]
            payload: dict[str, Any] = {"history": history, "vars": {"n": step}}
            if step < 17:
                payload["pending"] = {"question": "approve?"}
            written.append(make("long", step, payload=payload))
            cp.put(written[-1])
        assert cp.list("long") == written
        fresh = self.other(cp)  # a reader that never wrote (no cached payloads)
        try:
            assert [fresh.get("long", s) for s in range(25)] == written
            assert fresh.latest("long") == written[-1]
            fresh.put(make("long", 25, payload={"history": [*history, "z"]}))  # a writer without cache
            assert cp.get("long", 25).payload == {"history": [*history, "z"]}
        finally:
            if fresh is not cp:
                fresh.close()

    def test_payloads_read_back_share_nothing(self, cp: Checkpointer) -> None:
        # Mutating what one read returned changes no stored step, no other read, and no later write.
        fill(cp, "t", 4)
        every = cp.list("t")
        every[2].payload["history"][0] = "mutated"  # type: ignore[index]
        every[3].payload["vars"]["step"] = -1  # type: ignore[index]
        latest = cp.latest("t")
        assert latest is not None
        latest.payload["history"].clear()  # type: ignore[attr-defined]
        cp.put(make("t", 4))
        assert cp.list("t") == [make("t", s) for s in range(5)]

    def test_python_equal_but_json_different_values_are_kept_exactly(self, cp: Checkpointer) -> None:
        # 1, 1.0 and True are equal in Python, not in JSON: a delta must not merge them.
        history: list[Any] = [{"ok": 1, "text": "x" * 300}]
        cp.put(make("t", 0, payload={"history": history, "flag": 1}))
        cp.put(make("t", 1, payload={"history": [{"ok": True, "text": "x" * 300}, "y" * 300], "flag": True}))
        cp.put(make("t", 2, payload={"history": [{"ok": 1.0, "text": "x" * 300}, "y" * 300, "z"], "flag": 1.0}))
        got = [cp.get("t", s).payload for s in range(3)]
        assert [type(p["flag"]) for p in got] == [int, bool, float]
        assert [type(p["history"][0]["ok"]) for p in got] == [int, bool, float]

    def test_records_compare_by_value(self) -> None:
        assert make("t", 1) == make("t", 1) and make("t", 1) != replace(make("t", 1), state="X")

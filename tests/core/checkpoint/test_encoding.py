"""Incremental checkpoint encoding: the same payloads and rows as encoding everything at every step.

A run encodes each message once (:class:`~stateflow.run_state.PayloadEncoder`), hands the
payload's text to the store (``Checkpoint.payload_json``), and the database stores write deltas
by object identity (:func:`~stateflow.checkpoint.delta.identity_delta`). Each shortcut must give
exactly what the full encoding gives: the payload, its canonical JSON, and what a reader rebuilds.
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from stateflow import run
from stateflow.checkpoint import Checkpoint, MemoryCheckpointer, SQLiteCheckpointer, ThreadStatus
from stateflow.checkpoint.delta import apply_delta, identity_delta
from stateflow.checkpoint.record import canonical_json
from stateflow.errors import CheckpointInvalid, ConfigError
from stateflow.run_state import PayloadEncoder, RunState
from stateflow.testing.fake_openai import FakeOpenAIServer
from stateflow.threads import ThreadJournal
from tests.core.durable.flows import fake_profile, long_flow, responder


def _states_of_a_run(monkeypatch) -> list[RunState]:
    """Every RunState a real checkpointed run saves, in order."""
    seen: list[RunState] = []
    save = ThreadJournal.save

    def keep(journal: ThreadJournal, state: RunState, status: str) -> None:
        seen.append(state)
        save(journal, state, status)

    monkeypatch.setattr(ThreadJournal, "save", keep)
    with FakeOpenAIServer(responder) as srv:
        run(long_flow(srv.url), "T", models=fake_profile(srv.url), checkpointer=MemoryCheckpointer(), telemetry=False)
    return seen


def test_the_encoder_gives_the_full_encoding_of_every_state_of_a_run(monkeypatch) -> None:
    states = _states_of_a_run(monkeypatch)
    assert len(states) >= 9
    encoder = PayloadEncoder()
    for state in states:
        payload = state.to_payload(encoder)
        assert payload == state.to_payload()
        assert encoder.json(payload) == canonical_json(payload)
    # a list that does not just grow (an item replaced) is encoded again from that item on
    last = states[-1]
    swapped = replace(last, chat=[{"name": "x", "role": "user", "content": "other"}, *last.chat[1:]])
    assert swapped.to_payload(encoder) == swapped.to_payload()
    assert encoder.json(swapped.to_payload(encoder)) == canonical_json(swapped.to_payload())


def test_the_text_in_parts_gives_the_payload_and_every_delta_exactly_as_encoding_them(monkeypatch) -> None:
    # a run's journal hands its payloads' text in parts (PayloadText); the stores join it (memory)
    # or take a delta's new items from it (SQLite, PostgreSQL): both must be the full encoding's text
    states = _states_of_a_run(monkeypatch)
    encoder = PayloadEncoder()
    previous: dict[str, Any] | None = None
    appended = 0
    for state in states:
        payload = {**state.to_payload(encoder), "flow_ref": "demo:FLOW"}  # a journal's extra key too
        parts = encoder.text(payload)
        assert parts.json() == canonical_json(payload)
        if previous is not None:
            delta = identity_delta(previous, payload)
            appended += bool(delta["append"].get("history"))
            assert parts.delta_text(previous, delta) == canonical_json(delta)
        previous = payload
    assert appended >= len(states) - 2  # the new items' texts came from the parts
    plain = Checkpoint("t", 1, "f", "a" * 64, "S", ThreadStatus.RUNNING, previous, 2.5)
    in_parts = replace(plain, payload_text=parts)
    assert in_parts.to_json() == plain.to_json() and in_parts == plain and in_parts.has_text


def test_a_checkpoint_with_its_payload_text_encodes_to_the_same_record() -> None:
    payload = {"history": [{"content": "ä \u2028", "n": 1.0}], "vars": {"x": True}}
    plain = Checkpoint("t", 3, "f", "a" * 64, "S", ThreadStatus.RUNNING, payload, 2.5)
    given_text = replace(plain, payload_json=canonical_json(payload))
    assert given_text.to_json() == plain.to_json() and given_text == plain
    # a field holding the placeholder's text cannot confuse the splice
    odd = replace(given_text, state="\x00payload\x00")
    assert json.loads(odd.to_json())["payload"] == payload


scalars = st.none() | st.booleans() | st.integers(-3, 3) | st.sampled_from([0.0, 1.0, -0.0, 2.5]) | st.text(max_size=3)


@given(old=st.lists(scalars, max_size=4), new=st.lists(scalars, max_size=4), keep=st.integers(0, 4))
def test_an_identity_delta_rebuilds_the_exact_json(old: list[Any], new: list[Any], keep: int) -> None:
    # the next payload shares a prefix of the previous one's items (as a run's encoder does) and
    # may hold equal-but-different values (1 and 1.0 and True) that JSON tells apart
    shared = old[:keep]
    previous = {"history": old, "vars": {"n": 1}}
    current = {"history": [*shared, *new], "vars": {"n": 1.0}}
    stored = json.loads(canonical_json(previous))
    delta = json.loads(canonical_json(identity_delta(previous, current)))
    assert canonical_json(apply_delta(stored, delta)) == canonical_json(current)


@pytest.mark.parametrize(
    ("sync", "expected"),
    [
        # connections start NORMAL; FULL for the pause, back for the next transition
        ("pauses", ["PRAGMA synchronous=FULL", "PRAGMA synchronous=NORMAL"]),
        # and FULL again for the end
        ("status", ["PRAGMA synchronous=FULL", "PRAGMA synchronous=NORMAL", "PRAGMA synchronous=FULL"]),
        ("normal", []),
    ],
)
def test_sqlite_fsyncs_only_the_checkpoints_its_policy_names(tmp_path: Path, sync: str, expected: list[str]) -> None:
    cp = SQLiteCheckpointer(tmp_path / "runs.db", sync=sync)
    levels: list[str] = []
    conn = cp._connect()  # this thread's connection: record what it is told
    conn.set_trace_callback(lambda sql: levels.append(sql) if sql.startswith("PRAGMA synchronous") else None)
    statuses = [ThreadStatus.RUNNING, ThreadStatus.RUNNING, ThreadStatus.PAUSED, ThreadStatus.RUNNING]
    for step, status in enumerate([*statuses, ThreadStatus.FINISHED]):
        cp.put(Checkpoint("t", step, "f", "a" * 64, "S", status, {"n": step}, 0.0))
    assert levels == expected
    assert [c.status for c in cp.list("t")][-1] is ThreadStatus.FINISHED
    cp.close()
    with sqlite3.connect(tmp_path / "runs.db") as check:
        assert check.execute("PRAGMA journal_mode").fetchone() == ("wal",)


def test_sqlite_sync_policies_and_the_former_switch(tmp_path: Path) -> None:
    assert SQLiteCheckpointer(tmp_path / "a.db").sync == "pauses"
    assert SQLiteCheckpointer(tmp_path / "b.db", durable=True).sync == "full"
    assert SQLiteCheckpointer(tmp_path / "c.db", durable=False).sync == "normal"
    with pytest.raises(ValueError, match="pauses, status, full, normal"):
        SQLiteCheckpointer(tmp_path / "d.db", sync="sometimes")


def test_a_write_without_text_after_identity_deltas_rebuilds_its_base_exactly(monkeypatch, tmp_path: Path) -> None:
    # a run's journal writes identity deltas and keeps each stored payload unbuilt (rows.Rebuild);
    # a later checkpoint without its text (a failed run's last one) needs that payload as values:
    # the chain of deltas back to the last full row is rebuilt then, and every row reads back exactly
    states = _states_of_a_run(monkeypatch)
    monkeypatch.undo()  # the journal below saves for real, not into ``states``
    cp = SQLiteCheckpointer(tmp_path / "runs.db", snapshot_every=100)  # one full row, then deltas
    journal = ThreadJournal(cp, "t", long_flow("http://127.0.0.1:9"), "a" * 64, 0)
    for state in states:
        journal.save(state, "running")
    journal.fail("RuntimeError: boom")  # the payload object of the last step, without its text
    stored = cp.list("t")
    assert len(stored) == len(states) + 1
    for c, state in zip(stored, states, strict=False):
        assert canonical_json(c.payload) == canonical_json(state.to_payload())
    assert stored[-1].payload == {**stored[-2].payload, "stop_reason": "error", "error": "RuntimeError: boom"}
    with sqlite3.connect(tmp_path / "runs.db") as db:
        bodies = [json.loads(b) for (b,) in db.execute("SELECT body FROM checkpoints ORDER BY step")]
    assert all(b.get("format") == "delta" for b in bodies[1:])  # the failed row too: its base was rebuilt
    cp.close()


def test_a_run_in_memory_reads_back_what_sqlite_reads_back(monkeypatch, tmp_path: Path) -> None:
    """The memory store keeps a run's payload text with the record's fields (no record text):
    every read gives what a SQLite store gives for the same puts, and nothing a caller mutates
    (the run's state, a payload read back) reaches what is stored."""
    states = _states_of_a_run(monkeypatch)
    monkeypatch.undo()  # the journals below save as a run does, without recording
    memory, sqlite = MemoryCheckpointer(), SQLiteCheckpointer(tmp_path / "runs.db")
    flow = long_flow("http://127.0.0.1:1")
    journals = [ThreadJournal(store, "t", flow, "ab" * 32, 0) for store in (memory, sqlite)]
    for state in states:
        for journal in journals:
            journal.save(state, "running")
    assert memory._rows["t"][-1].text is None  # kept as the payload's text, not a whole record
    states[-1].vars["edits"] = "changed after the put"
    states[-1].chat[0]["content"] = "changed after the put"

    def timeless(checkpoints: list[Checkpoint]) -> list[str]:  # each store's put took its own time
        return [replace(c, created_at=0.0).to_json() for c in checkpoints]

    read = memory.list("t")
    assert timeless(read) == timeless(sqlite.list("t"))
    assert [memory.get("t", c.step) for c in read] == read
    assert memory.latest("t") == read[-1]
    assert isinstance(read[-1].created_at, float) and read[-1].parent is None
    read[-1].payload["history"].clear()
    assert timeless([memory.latest("t")]) == timeless([sqlite.latest("t")])
    sqlite.close()


def test_a_checkpoint_with_its_text_and_a_bad_field_fails_at_put_as_without_it() -> None:
    good = Checkpoint("t", 0, "demo", "ab" * 32, "Init", ThreadStatus.RUNNING, {"n": 1}, 0.0)
    bad = replace(good, state="", created_at=float("nan"))
    errors = []
    for checkpoint in (bad, replace(bad, payload_json=canonical_json(bad.payload))):
        with pytest.raises(CheckpointInvalid) as caught:
            MemoryCheckpointer().put(checkpoint)
        errors.append(str(caught.value))
    assert errors[0] == errors[1] and "state must be non-empty" in errors[0] and "created_at" in errors[0]


def test_a_failed_encoding_of_vars_leaves_the_encoder_exact(monkeypatch) -> None:
    """The encoder keeps one C encoder with circular-reference markers; a failure (a cycle, NaN)
    must not leave stale markers that make the next, good payload fail or differ."""
    state = _states_of_a_run(monkeypatch)[-1]
    encoder = PayloadEncoder()
    cycle: list[Any] = []
    cycle.append(cycle)
    for bad, message in ((cycle, "cannot be saved"), (float("nan"), "cannot be saved")):
        with pytest.raises(ConfigError, match=message):
            replace(state, vars={"bad": bad}).to_payload(encoder)
        shared = [1, 2]
        good = replace(state, vars={"a": shared, "b": shared, "c": {"d": shared}})
        payload = good.to_payload(encoder)
        assert payload == good.to_payload()
        assert encoder.json(payload) == canonical_json(good.to_payload())


def test_a_runs_next_step_in_one_sqlite_statement_still_refuses_a_step_another_writer_took(
    monkeypatch, tmp_path: Path
) -> None:
    # a run's journal writes its next step as one conditional INSERT; a step that another writer
    # put first is refused (CheckpointConflict naming the latest step) and nothing is written twice
    from stateflow.errors import CheckpointConflict

    states = _states_of_a_run(monkeypatch)
    monkeypatch.undo()
    cp = SQLiteCheckpointer(tmp_path / "runs.db")
    sql: list[str] = []
    cp._connect().set_trace_callback(sql.append)
    journal = ThreadJournal(cp, "t", long_flow("http://127.0.0.1:1"), "ab" * 32, 0)
    journal.save(states[0], "running")
    journal.save(states[1], "running")
    assert [s.split()[0] for s in sql if not s.startswith("PRAGMA")][-1] == "INSERT"  # no BEGIN/COMMIT
    other = SQLiteCheckpointer(tmp_path / "runs.db")
    other.put(replace(cp.latest("t"), step=2))
    with pytest.raises(CheckpointConflict, match=r"cannot write step 2 \(latest stored step 2"):
        journal.save(states[2], "running")
    assert [c.step for c in cp.list("t")] == [0, 1, 2]
    assert cp.list("t")[2].payload == cp.list("t")[1].payload  # the other writer's row, not the run's
    other.close()
    cp.close()

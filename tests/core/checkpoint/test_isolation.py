"""What a run's checkpoint holds cannot change afterwards, and a bad value fails the checkpoint it is in.

A run's journal hands the stores the payload its encoder built (fresh copies of the run's messages,
steps, chat and records) with its text in parts; the memory store keeps those parts
(:class:`~stateflow.checkpoint.payload_text.ItemTexts` for the growing lists) instead of one text.
The run then goes on mutating its own objects: ``vars``, a blackboard record, a tool's metadata
dict behind a message, a step's detail, AutoGen's chat dicts. None of that may reach a stored
checkpoint, and every read must equal what a SQLite store reads back for the same saves.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from types import MappingProxyType
from typing import Any

import pytest

from stateflow.blackboard import Blackboard
from stateflow.checkpoint import Checkpoint, Checkpointer, MemoryCheckpointer, SQLiteCheckpointer
from stateflow.checkpoint.delta import identity_delta
from stateflow.checkpoint.payload_text import ItemTexts
from stateflow.checkpoint.record import canonical_json
from stateflow.errors import ConfigError
from stateflow.messages import History, Kind, Message, Usage
from stateflow.run_state import PayloadEncoder, RunState
from stateflow.threads import ThreadJournal
from stateflow.trace import Step, TransitionRecord
from tests.core.durable.flows import long_flow


@dataclass
class Notes:
    """A blackboard record a run mutates in place (not frozen, a list field)."""

    seen: list[str] = field(default_factory=list)
    count: int = 0


def _timeless(checkpoints: list[Checkpoint]) -> list[str]:
    return [replace(c, created_at=0.0).to_json() for c in checkpoints]


def _stores(tmp_path: Path) -> list[Checkpointer]:
    return [MemoryCheckpointer(), SQLiteCheckpointer(tmp_path / "runs.db")]


def _journals(stores: list[Checkpointer]) -> list[ThreadJournal]:
    flow = long_flow("http://127.0.0.1:1")
    return [ThreadJournal(store, "t", flow, "ab" * 32, 0) for store in stores]


def _message(n: int, meta: dict[str, Any]) -> Message:
    usage = Usage(prompt_tokens=n, completion_tokens=1, cost=2e-05, latency_s=0.5, model="m")
    return Message("user", "tool", "S", Kind.TOOL, f"observation {n}", usage, MappingProxyType(meta))


def test_mutating_the_run_after_a_checkpoint_changes_nothing_stored(tmp_path: Path) -> None:
    stores = _stores(tmp_path)
    journals = _journals(stores)
    meta: dict[str, Any] = {"rows": [1, 2], "ok": True}  # the tool keeps this dict: the message only wraps it
    detail: dict[str, Any] = {"reply": {"text": "a"}}
    first = _message(0, meta)
    board = Blackboard()
    notes = Notes(["a"], 1)
    board.put(notes)
    chat = [{"name": "tool", "role": "user", "content": "observation 0", "tool_calls": [{"id": "c1"}]}]
    state = RunState(
        task="T",
        view="stateflow",
        state="S",
        history=History([first]),
        steps=[Step(0, "S", "tool[x]", first, None, 2e-05, detail)],
        transitions=[TransitionRecord("Init", "S", "always", 0)],
        vars={"items": [1, 2], "nested": {"k": "v"}},
        board=board,
        chat=chat,
        started_at=1.5,
    )
    for journal in journals:
        journal.save(state, "running")
    before = [_timeless(store.list("t")) for store in stores]
    assert before[0] == before[1]

    # the run goes on, mutating everything it owns in place
    state.vars["items"].append(3)
    state.vars["nested"]["k"] = "changed"
    notes.seen.append("b")
    notes.count = 2
    meta["rows"].append(3)
    meta["ok"] = False
    detail["reply"]["text"] = "changed"
    chat[0]["content"] = "changed"
    chat[0]["tool_calls"][0]["id"] = "changed"
    assert [_timeless(store.list("t")) for store in stores] == before  # step 0 unchanged in both

    # the next step shares the first step's texts in the memory store; both steps still read exactly
    second = _message(1, {"ok": True})
    state.history.append(second)
    state.steps.append(Step(1, "S", "llm", second, second.usage, 0.25, {}))
    state.chat.append({"name": "llm", "role": "assistant", "content": "observation 1"})
    for journal in journals:
        journal.save(state, "running")
    memory, sqlite = stores
    read = memory.list("t")
    assert _timeless(read) == _timeless(sqlite.list("t"))
    assert _timeless(read[:1]) == before[0]
    assert read[1].payload["vars"] == {"items": [1, 2, 3], "nested": {"k": "changed"}}
    assert read[1].payload["board"][0]["fields"] == {"seen": ["a", "b"], "count": 2}
    assert read[1].payload["history"][0]["meta"] == {"rows": [1, 2], "ok": True}  # encoded once, at step 0
    assert isinstance(memory._rows["t"][1].payload_text._parts["history"], ItemTexts)  # type: ignore[union-attr]
    read[1].payload["history"].clear()  # a reader's copy is its own
    assert _timeless([memory.latest("t")]) == _timeless([sqlite.latest("t")])  # type: ignore[list-item]
    sqlite.close()


def test_a_non_json_value_fails_the_checkpoint_it_appears_in_as_with_sqlite(tmp_path: Path) -> None:
    stores = _stores(tmp_path)
    journals = _journals(stores)
    message = _message(0, {})
    state = RunState(task="T", view="stateflow", state="S", history=History([message]))
    for journal in journals:
        journal.save(state, "running")

    # a var that is not JSON: the same ConfigError, naming it, at the same save, for both stores
    state.vars["handle"] = object()
    errors = []
    for journal in journals:
        with pytest.raises(ConfigError, match=r"vars\['handle'\] cannot be saved in a checkpoint") as caught:
            journal.save(state, "running")
        errors.append(str(caught.value))
    assert errors[0] == errors[1]
    del state.vars["handle"]

    # NaN in a new step's detail: the store's own error, the same for both, at that save
    state.steps.append(Step(0, "S", "llm", message, None, 0.5, {"score": float("nan")}))
    failures = []
    for journal in journals:
        with pytest.raises(Exception) as caught:
            journal.save(state, "running")
        failures.append((type(caught.value), str(caught.value)))
    assert failures[0] == failures[1] and "JSON" in failures[0][1]
    for store in stores:  # nothing was written past the good checkpoint
        assert [c.step for c in store.list("t")] == [0]
    assert _timeless(stores[0].list("t")) == _timeless(stores[1].list("t"))

    # the run goes on with good values: the encoder was left exact by the failures
    state.steps[-1] = Step(0, "S", "llm", message, None, 0.5, {"score": 1.0})
    for journal in journals:
        journal.next_step = 1
        journal.save(state, "running")
    assert _timeless(stores[0].list("t")) == _timeless(stores[1].list("t"))
    stores[1].close()


def test_item_texts_give_the_delta_from_a_segment_start_and_refuse_any_other_start() -> None:
    encoder = PayloadEncoder()
    payloads = []
    history: list[Message] = []
    for n in range(4):
        history.append(_message(n, {"n": n}))
        if n == 2:  # two messages added between two checkpoints: one segment of two items
            continue
        payloads.append(RunState(task="T", view="v", state="S", history=History(history)).to_payload(encoder))
        parts = encoder.text(payloads[-1])
        assert parts.json() == canonical_json(payloads[-1])
    texts = parts._parts["history"]
    assert isinstance(texts, ItemTexts) and texts.count == 4
    assert texts.after(3) is None and texts.after(2) is not None  # 3 is inside the last segment
    for previous in payloads[:-1]:  # each earlier checkpoint ended where a segment begins
        delta = identity_delta(previous, payloads[-1])
        assert parts.delta_text(previous, delta) == canonical_json(delta)
    odd = {**payloads[-1], "history": payloads[-1]["history"][:3]}  # a base inside a segment
    delta = identity_delta(odd, payloads[-1])
    assert parts.delta_text(odd, delta) == canonical_json(delta)

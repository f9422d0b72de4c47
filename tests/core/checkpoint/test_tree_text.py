"""orjson writes the run encoder's trees byte for byte as the standard encoder (stateflow.checkpoint.tree_text).

Old checkpoints were written by the standard ``json`` encoder; a new one must have the same text
for the same values (the stores compare and splice texts, and ``payload_json`` must equal
``canonical_json(payload)``), and must fail where it failed.
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import math
from typing import Any

import orjson
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from stateflow.checkpoint import Checkpoint, MemoryCheckpointer, ThreadStatus
from stateflow.checkpoint.record import canonical_json
from stateflow.checkpoint.tree_text import json_float, tree_dumper
from stateflow.messages import Kind, Message, Usage
from stateflow.run_state import PayloadEncoder, RunState
from stateflow.trace import Step

DUMP = tree_dumper(canonical_json)

# every character class that matters to escaping: controls, quotes, backslash, DEL, non-ASCII,
# the line separators JSON allows raw and JavaScript does not, astral characters
TEXT = st.text(st.characters(exclude_categories=["Cs"]), max_size=40) | st.sampled_from(
    ["", '"\\/', "\x00\x1f\x7f\b\f\n\r\t", "é ü 中文 🙂", "\u2028\u2029", "1e5 and 0.00001 in prose"]
)
NUMBER = (
    st.integers(min_value=-(2**63), max_value=2**64 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.sampled_from([1e-5, 1e-4, 9.99e-5, 1e15, 1e16, 1.5e16, 1e22, 5e-324, -0.0, 0.1 + 0.2, 1795000000.123456])
)
JSON_VALUES = st.recursive(
    st.none() | st.booleans() | NUMBER | TEXT,
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(TEXT, inner, max_size=5),
    max_leaves=30,
)


@settings(max_examples=600, deadline=None)
@given(JSON_VALUES)
@example({"cost": 2.5e-05, "latency_s": 1.2e-07, "big": 1e16, "n": 2**70})
def test_orjson_text_is_the_standard_encoders_text_for_every_json_value(value: Any) -> None:
    marked = _marked(value)  # as the run's encoder builds its trees
    assert DUMP(marked) == canonical_json(value)
    assert json.loads(DUMP(marked)) == value


def _marked(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _marked(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_marked(v) for v in value]
    return json_float(value)


@pytest.mark.parametrize("number", [1e-05, 2.5e-07, -3e-9, 1e16, 1.5e22])
def test_a_float_orjson_writes_otherwise_is_marked_and_written_by_the_standard_encoder(number: float) -> None:
    if abs(number) < 1e-4:
        assert orjson.dumps(number).decode() != canonical_json(number)  # why it is marked
    assert DUMP({"x": json_float(number)}) == canonical_json({"x": number})


def _nested(depth: int) -> Any:
    value: Any = "deep"
    for _ in range(depth):
        value = [value]
    return value


@dataclasses.dataclass
class Point:
    x: int


class Label(str):
    pass


class Count(int):
    pass


@pytest.mark.parametrize(
    "value",
    [
        {"label": Label("a")},  # subclasses: json writes their plain value
        {"n": Count(3), "t": (1, 2)},
        {"big": 2**70},  # beyond 64 bits: orjson refuses, json writes it
        {1: "int keys", 2: "b"},  # json writes them as strings, orjson refuses them
        _nested(300),  # deeper than orjson goes
    ],
)
def test_values_orjson_would_write_otherwise_get_the_standard_text(value: Any) -> None:
    assert DUMP(value) == canonical_json(value)


@pytest.mark.parametrize(
    "value",
    [
        {"when": datetime.date(2026, 11, 28)},  # orjson would write these natively; json refuses them
        {"point": Point(1)},
        {"s": "\ud800"},  # a lone surrogate: orjson refuses, json writes it (escaped or not, as before)
    ],
)
def test_values_json_refuses_or_orjson_refuses_fail_or_pass_exactly_as_before(value: Any) -> None:
    try:
        expected: Any = canonical_json(value)
    except (TypeError, ValueError) as err:
        expected = (type(err), str(err))
    try:
        got: Any = DUMP(value)
    except (TypeError, ValueError) as err:
        got = (type(err), str(err))
    assert got == expected


def _state_with(detail: dict[str, Any], usage: Usage | None = None) -> RunState:
    message = Message("assistant", "a", "S", Kind.LLM, "text", usage)
    return RunState(
        task="T",
        view="stateflow",
        state="S",
        history=[message],
        steps=[Step(0, "S", "llm", message, usage, 0.5, detail)],
    )


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_a_nan_in_a_step_or_its_usage_fails_the_checkpoint_as_the_standard_encoder_does(bad: float) -> None:
    with pytest.raises(ValueError, match="Out of range float values are not JSON compliant") as before:
        canonical_json({"x": bad})
    for state in (_state_with({"score": bad}), _state_with({}, Usage(cost=bad)), _state_with({"l": [1, bad]})):
        encoder = PayloadEncoder()
        payload = state.to_payload(encoder)
        with pytest.raises(ValueError) as got:
            encoder.text(payload)
        assert str(got.value) == str(before.value)
        with pytest.raises(ValueError):  # without the encoder too (the path a store's check takes)
            canonical_json(state.to_payload())


def test_a_run_with_small_costs_and_non_ascii_text_round_trips_through_a_store() -> None:
    usage = Usage(prompt_tokens=12, completion_tokens=3, cost=1.5e-05, latency_s=0.00003, model="m")
    state = _state_with({"note": "Grüße, 1e5 rows", "tiny": 7e-05, "ratio": 0.25}, usage)
    encoder = PayloadEncoder()
    payload = state.to_payload(encoder)
    text = encoder.text(payload).json()
    assert text == canonical_json(payload)
    store = MemoryCheckpointer()
    store.put(
        Checkpoint("t", 0, "f", "ab" * 32, "S", ThreadStatus.RUNNING, payload, 0.0, payload_text=encoder.text(payload))
    )
    assert store.latest("t").payload == json.loads(canonical_json(payload))  # type: ignore[union-attr]


def test_a_usual_message_tree_is_written_by_orjson_not_handed_back() -> None:
    handed_back: list[Any] = []
    dump = tree_dumper(lambda value: handed_back.append(value) or canonical_json(value))
    message = {"role": "assistant", "content": "Thought: ok.\nAction: execute[SELECT 1]", "usage": None, "n": 0.25}
    assert dump(message) == canonical_json(message)
    assert handed_back == []
    assert dump({"cost": json_float(1e-05)}) == canonical_json({"cost": 1e-05}) and len(handed_back) == 1


@settings(max_examples=150, deadline=None)
@given(detail=st.dictionaries(TEXT, JSON_VALUES, max_size=4), meta=st.dictionaries(TEXT, JSON_VALUES, max_size=3))
def test_a_run_states_text_from_the_encoder_is_its_canonical_json(detail: dict[str, Any], meta: dict[str, Any]) -> None:
    usage = Usage(prompt_tokens=3, completion_tokens=1, cost=3e-06, latency_s=0.25)
    message = Message("assistant", "a", "S", Kind.LLM, "é 1e5", usage, meta)  # type: ignore[arg-type]
    step = Step(0, "S", "llm", message, usage, 1e-05, detail)
    state = RunState(task="T", view="stateflow", state="S", history=[message], steps=[step])  # type: ignore[arg-type]
    state.chat = [{"name": "a", "role": "assistant", "content": "x", "extra": detail}]
    encoder = PayloadEncoder()
    payload = state.to_payload(encoder)
    assert encoder.text(payload).json() == canonical_json(state.to_payload())

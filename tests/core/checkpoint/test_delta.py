"""Payload deltas rebuild the next payload exactly (property tests over JSON values)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from stateflow.checkpoint.delta import apply_delta, payload_delta

scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text()
values = st.recursive(
    scalars, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4)
)
payloads = st.dictionaries(st.sampled_from(["history", "vars", "board", "usage", "pending"]), values, max_size=5)


@given(previous=payloads, current=payloads)
def test_a_delta_rebuilds_any_next_payload(previous: dict[str, Any], current: dict[str, Any]) -> None:
    delta = json.loads(json.dumps(payload_delta(previous, current)))  # as stored
    assert apply_delta(previous, delta) == current


@given(previous=payloads, extra=st.lists(values, max_size=5))
def test_a_growing_history_is_stored_as_its_new_items_only(previous: dict[str, Any], extra: list[Any]) -> None:
    base = dict(previous, history=[*previous["history"], 1] if isinstance(previous.get("history"), list) else [1])
    current = dict(base, history=[*base["history"], *extra])
    delta = payload_delta(base, current)
    assert delta["append"].get("history", []) == extra and "history" not in delta["set"]
    assert apply_delta(base, delta) == current


def test_applying_does_not_change_the_base() -> None:
    base = {"history": ["a"], "gone": 1}
    apply_delta(base, payload_delta(base, {"history": ["a", "b"]}))
    assert base == {"history": ["a"], "gone": 1}


@pytest.mark.parametrize(
    "delta",
    [{"append": {"vars": [1]}, "set": {}, "drop": []}, {"append": {}}, ["not", "a", "delta"]],
    ids=["append-to-a-non-list", "missing-keys", "not-an-object"],
)
def test_a_delta_that_does_not_fit_is_refused(delta: Any) -> None:
    with pytest.raises(ValueError):
        apply_delta({"vars": {"n": 1}}, delta)

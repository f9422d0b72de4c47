"""The checkpoint record's JSON form: canonical text, and one clear error per damaged field."""

from __future__ import annotations

import json

import pytest

from stateflow.checkpoint import (
    CHECKPOINT_SCHEMA_VERSION,
    Checkpoint,
    CheckpointCorrupt,
    CheckpointInvalid,
    CheckpointSchemaUnsupported,
    ThreadStatus,
)
from tests.core.checkpoint.contract import make

WHERE = "sqlite runs.db, thread 't' step 4"


def raw(**changes: object) -> str:
    record = json.loads(make("t", 4, parent=("base", 2)).to_json())
    for key, value in changes.items():
        if value is KeyError:
            del record[key]
        else:
            record[key] = value
    return json.dumps(record)


def test_to_json_is_canonical_and_round_trips() -> None:
    cp = make("t", 4, parent=("base", 2), payload={"b": 1, "a": "é"})
    text = cp.to_json()
    assert text == json.dumps(json.loads(text), sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    assert '"a":"é"' in text and Checkpoint.from_json(text, where=WHERE) == cp
    assert Checkpoint.from_json(text, where=WHERE).parent == ("base", 2)
    assert Checkpoint.from_json(text, where=WHERE).status is ThreadStatus.RUNNING


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        ({"thread_id": KeyError}, "missing field(s) thread_id"),
        ({"extra": 1}, "unknown field(s) extra"),
        ({"step": -1}, "step must be an integer >= 0"),
        ({"step": True}, "step must be an integer >= 0"),
        ({"state": ""}, "state must be non-empty text"),
        ({"status": "done"}, "status 'done' is not one of"),
        ({"payload": [1]}, "payload must be a JSON object"),
        ({"created_at": "now"}, "created_at must be a finite number"),
        ({"parent": ["base"]}, "parent must be null or [thread_id, step]"),
        ({"schema_version": 0}, "schema_version must be an integer >= 1"),
    ],
)
def test_each_damaged_field_is_named_with_the_location(changes: dict[str, object], expected: str) -> None:
    with pytest.raises(CheckpointCorrupt) as err:
        Checkpoint.from_json(raw(**changes), where=WHERE)
    assert str(err.value).startswith(WHERE + ": ") and expected in str(err.value)
    assert err.value.where == WHERE


def test_every_problem_is_reported_at_once() -> None:
    with pytest.raises(CheckpointCorrupt) as err:
        Checkpoint.from_json(raw(step="x", status="y", flow_name=KeyError), where=WHERE)
    assert all(p in err.value.problem for p in ("flow_name", "step", "status"))


def test_truncated_and_garbage_text_are_told_apart() -> None:
    good = make("t", 4).to_json()
    with pytest.raises(CheckpointCorrupt, match="truncated"):
        Checkpoint.from_json(good[:-10], where=WHERE)
    with pytest.raises(CheckpointCorrupt, match="not JSON"):
        Checkpoint.from_json("garbage", where=WHERE)
    with pytest.raises(CheckpointCorrupt, match="not JSON text"):
        Checkpoint.from_json(b"{}", where=WHERE)  # type: ignore[arg-type]


def test_a_newer_schema_is_refused_before_its_unknown_fields_are_judged() -> None:
    with pytest.raises(CheckpointSchemaUnsupported) as err:
        Checkpoint.from_json(raw(schema_version=CHECKPOINT_SCHEMA_VERSION + 3, novel=1), where=WHERE)
    assert err.value.found == CHECKPOINT_SCHEMA_VERSION + 3 and "upgrade StateFlow" in str(err.value)


def test_an_unserializable_record_is_invalid_not_stored() -> None:
    with pytest.raises(CheckpointInvalid, match="payload is not JSON"):
        make("t", 0, payload={"x": object()}).to_json()
    with pytest.raises(CheckpointInvalid, match="status"):
        make("t", 0, status="bogus").to_json()  # type: ignore[arg-type]

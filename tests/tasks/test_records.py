"""The results file survives crashes and never silently drops a finished episode."""

from __future__ import annotations

import json

import pytest
from stateflow.tasks.records import ResultsFile, latest_records, record_key

from stateflow import StateFlowError


def _rec(i):
    return {"benchmark": "b", "method": "m", "models": "x", "task": i, "payload": "é" * 10}


def test_append_and_load(tmp_path):
    f = ResultsFile(tmp_path / "r.jsonl")
    f.extend(_rec(i) for i in range(3))
    loaded = f.load()
    assert [r["task"] for r in loaded.records] == [0, 1, 2] and not loaded.torn_tail


def test_torn_last_line_is_cut_off_and_appending_resumes_cleanly(tmp_path):
    path = tmp_path / "r.jsonl"
    f = ResultsFile(path)
    f.extend(_rec(i) for i in range(2))
    with path.open("ab") as fh:  # what a kill -9 in the middle of a write could leave
        fh.write(json.dumps(_rec(2)).encode()[:17])
    loaded = f.load(repair=True)
    assert [r["task"] for r in loaded.records] == [0, 1] and loaded.torn_tail
    f.append(_rec(2))
    assert [r["task"] for r in f.load().records] == [0, 1, 2]
    assert path.read_bytes().count(b"\n") == 3


def test_corrupt_line_in_the_middle_is_an_error_naming_the_line(tmp_path):
    path = tmp_path / "r.jsonl"
    path.write_text(json.dumps(_rec(0)) + "\n{broken\n" + json.dumps(_rec(2)) + "\n")
    with pytest.raises(StateFlowError, match=r"r.jsonl:2: corrupt result record"):
        ResultsFile(path).load()


def test_latest_records_keeps_the_newest_per_identity_and_task():
    a0 = {"identity_digest": "a", "task": 0, "v": 1}
    b0 = {"identity_digest": "b", "task": 0, "v": 2}
    a1 = {"identity_digest": "a", "task": 1, "v": 3}
    a0_again = {"identity_digest": "a", "task": 0, "v": 4}
    assert [r["v"] for r in latest_records([a0, b0, a1, a0_again])] == [2, 3, 4]
    assert record_key(a0) == ("a", 0)


def test_records_without_identity_are_keyed_by_their_old_fields():
    old = _rec(3)
    assert record_key(old) == ("legacy:b/m/x", 3)
    assert latest_records([old, _rec(3) | {"payload": "new"}])[0]["payload"] == "new"
    with pytest.raises(StateFlowError, match="without a valid task index"):
        record_key({"benchmark": "b"})

"""The results file survives crashes and never silently drops a finished episode."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from stateflow.tasks.harness.records import ResultsFile, latest_records, record_key
from stateflow.tasks.kit.episode_record import SCHEMA_VERSION, EpisodeRecord, InvalidRecordError
from stateflow.tasks.reports.metrics import summarize

from stateflow import StateFlowError


def _fields(i: int, **kw) -> dict:
    return {
        "schema_version": SCHEMA_VERSION,
        "benchmark": "b",
        "method": "m",
        "models": "x",
        "task": i,
        "status": "ok",
        "success": False,
        "reward_raw": 0.0,
        "turns": 1,
        "failed_actions": 0,
        "payload": "é" * 10,  # a key this version does not know: kept, never dropped
    } | kw


def _rec(i: int, **kw) -> EpisodeRecord:
    return EpisodeRecord.from_dict(_fields(i, **kw))


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
        fh.write(json.dumps(_fields(2)).encode()[:17])
    loaded = f.load(repair=True)
    assert [r["task"] for r in loaded.records] == [0, 1] and loaded.torn_tail
    f.append(_rec(2))
    assert [r["task"] for r in f.load().records] == [0, 1, 2]
    assert path.read_bytes().count(b"\n") == 3


def test_corrupt_line_in_the_middle_is_an_error_naming_the_line(tmp_path):
    path = tmp_path / "r.jsonl"
    path.write_text(json.dumps(_fields(0)) + "\n{broken\n" + json.dumps(_fields(2)) + "\n")
    with pytest.raises(StateFlowError, match=r"r.jsonl:2: corrupt result record"):
        ResultsFile(path).load()


def test_latest_records_keeps_the_newest_per_identity_and_task():
    a0 = _rec(0, identity_digest="a", v=1)
    b0 = _rec(0, identity_digest="b", v=2)
    a1 = _rec(1, identity_digest="a", v=3)
    a0_again = _rec(0, identity_digest="a", v=4)
    assert [r.get("v") for r in latest_records([a0, b0, a1, a0_again])] == [2, 3, 4]
    assert record_key(a0) == ("a", 0)


def test_records_without_identity_are_keyed_by_their_old_fields():
    old = _rec(3)
    assert record_key(old) == ("legacy:b/m/x", 3)
    assert latest_records([old, _rec(3, payload="new")])[0].get("payload") == "new"


# -- typed records: versions, validation, records written before schema_version ------------------

_BEFORE = Path(__file__).parent / "snapshots" / "results_before_schema_version.jsonl"


def test_records_written_before_schema_version_load_with_every_field(tmp_path):
    raw = [json.loads(line) for line in _BEFORE.read_text(encoding="utf-8").splitlines()]
    loaded = ResultsFile(_BEFORE).load().records
    assert [r.schema_version for r in loaded] == [0, 0, 0]
    for r, d in zip(loaded, raw, strict=True):
        assert "schema_version" not in d
        # nothing lost or changed; fields added later (last_action, sample, calls) get their defaults
        assert r.to_dict() == d | {"schema_version": 0, "last_action": None, "sample": None, "calls": []}
    assert [(r.benchmark, r.method, r.success, r.turns) for r in loaded] == [
        ("intercode-sql", "stateflow", True, 2),
        ("intercode-sql", "try_again", True, 1),
        ("intercode-bash", "stateflow", True, 1),
    ]
    rows = summarize(loaded)
    assert [(row.group[:2], row.n, row.sr, row.turns) for row in rows] == [
        (("intercode-bash", "stateflow"), 1, 100.0, 1.0),
        (("intercode-sql", "stateflow"), 1, 100.0, 2.0),
        (("intercode-sql", "try_again"), 1, 100.0, 1.0),
    ]
    # a new record appended after them is written with the current version, and both load
    copy = tmp_path / "results.jsonl"
    shutil.copy(_BEFORE, copy)
    ResultsFile(copy).append(_rec(9))
    assert [r.schema_version for r in ResultsFile(copy).load().records] == [0, 0, 0, SCHEMA_VERSION]


def test_an_invalid_record_names_file_line_and_field_and_the_file_is_untouched(tmp_path):
    path = tmp_path / "results.jsonl"
    lines = [_fields(0), _fields(1, turns="three", status="done"), _fields(2)]
    path.write_text("".join(json.dumps(d) + "\n" for d in lines), encoding="utf-8")
    before = path.read_bytes()
    with pytest.raises(InvalidRecordError, match=r"results.jsonl:2: invalid result record: status: .*turns: ") as err:
        ResultsFile(path).load(repair=True)
    assert err.value.where.endswith("results.jsonl:2") and len(err.value.problems) == 2
    assert path.read_bytes() == before


def test_a_record_from_a_newer_version_is_refused_not_misread():
    with pytest.raises(InvalidRecordError, match="schema_version 99 is newer"):
        EpisodeRecord.from_dict(_fields(0, schema_version=99))
    with pytest.raises(InvalidRecordError, match="expected a JSON object"):
        EpisodeRecord.from_dict([1, 2])


def test_unknown_keys_survive_a_round_trip_through_the_file(tmp_path):
    f = ResultsFile(tmp_path / "r.jsonl")
    f.append(_rec(0, note={"from": "a newer tool"}))
    (back,) = f.load().records
    assert back.get("note") == {"from": "a newer tool"} and back.to_dict()["payload"] == "é" * 10


def test_the_episode_record_docstring_example_runs():
    import doctest

    from stateflow.tasks.kit import episode_record

    result = doctest.testmod(episode_record)
    assert result.attempted > 0 and result.failed == 0


# -- the file format under odd input (regressions found by mutation testing) ---------------------


def test_blank_lines_are_skipped_and_the_records_after_them_kept(tmp_path):
    path = tmp_path / "r.jsonl"
    path.write_text(json.dumps(_fields(0)) + "\n\n  \n" + json.dumps(_fields(1)) + "\n\n", encoding="utf-8")
    loaded = ResultsFile(path).load()
    assert [r.task for r in loaded.records] == [0, 1] and loaded.torn_tail is False


def test_loading_without_repair_never_changes_a_torn_file(tmp_path):
    """A reader (``stateflow report`` during a run) must not cut a line a writer is finishing."""
    path = tmp_path / "r.jsonl"
    f = ResultsFile(path)
    f.append(_rec(0))
    with path.open("ab") as fh:
        fh.write(json.dumps(_fields(1)).encode()[:25])
    before = path.read_bytes()
    loaded = f.load()
    assert [r.task for r in loaded.records] == [0] and loaded.torn_tail is True
    assert path.read_bytes() == before


def test_a_missing_file_loads_as_empty_and_not_torn(tmp_path):
    loaded = ResultsFile(tmp_path / "absent.jsonl").load(repair=True)
    assert loaded.records == [] and loaded.torn_tail is False
    assert not (tmp_path / "absent.jsonl").exists()


def test_append_creates_missing_parent_folders_and_a_non_executable_file(tmp_path):
    import os
    import stat

    path = tmp_path / "a" / "b" / "results.jsonl"
    old = os.umask(0o022)
    try:
        ResultsFile(path).append(_rec(0))
    finally:
        os.umask(old)
    assert [r.task for r in ResultsFile(path).load().records] == [0]
    assert stat.S_IMODE(path.stat().st_mode) == 0o644


def test_values_json_cannot_encode_are_stored_as_text(tmp_path):
    """Free-form fields (verdict, identity, trace) may hold paths or dates; the record is kept."""
    import datetime

    f = ResultsFile(tmp_path / "r.jsonl")
    when = datetime.datetime(2026, 11, 24, 2, 0, tzinfo=datetime.UTC)
    f.append(_rec(0, verdict={"file": tmp_path / "x.sql", "at": when}))
    (back,) = f.load().records
    assert back.verdict == {"file": str(tmp_path / "x.sql"), "at": str(when)}


def test_a_lone_surrogate_from_a_model_reply_is_recorded_and_read_back_unchanged(tmp_path):
    """Regression: a reply decoded from JSON may hold half a UTF-16 pair (``"\\ud83d"``); writing
    it as UTF-8 raised ``UnicodeEncodeError`` and the finished episode's record was lost."""
    reply = json.loads('"bad \\ud83d half, good \\ud83d\\ude00 and é"')
    f = ResultsFile(tmp_path / "r.jsonl")
    f.append(_rec(0, history=[{"reply": reply}]))
    f.append(_rec(1))
    back = f.load().records
    assert [r.task for r in back] == [0, 1] and back[0].history == [{"reply": reply}]
    (tmp_path / "r.jsonl").read_bytes().decode("utf-8")  # the file stays valid UTF-8


def test_a_short_write_is_an_error_naming_the_file_and_resume_drops_the_torn_part(tmp_path, monkeypatch):
    """E.g. a full disk: the error says so, and the half record is a torn tail that resume repairs."""
    import os

    path = tmp_path / "r.jsonl"
    f = ResultsFile(path)
    f.append(_rec(0))
    real_write = os.write
    monkeypatch.setattr(os, "write", lambda fd, data: real_write(fd, data[: len(data) // 2]))
    with pytest.raises(OSError, match=r"short write to .*r\.jsonl \(\d+ of \d+ bytes\)"):
        f.append(_rec(1))
    monkeypatch.undo()
    loaded = f.load(repair=True)
    assert [r.task for r in loaded.records] == [0] and loaded.torn_tail
    f.append(_rec(2))
    assert [r.task for r in f.load().records] == [0, 2]


def test_the_html_report_of_a_record_with_a_lone_surrogate_is_written(tmp_path):
    """The same half UTF-16 pair must not fail ``stateflow report`` (the page keeps its escape)."""
    from stateflow.tasks.ui.static_report import write_html

    reply = json.loads('"bad \\ud83d half"')
    message = {"role": "assistant", "name": "solve", "state": "Solve", "kind": "llm", "content": reply}
    page = write_html([_rec(0, history=[message])], tmp_path)
    text = page.read_bytes().decode("utf-8")
    assert "bad \\ud83d half" in text


def test_a_cassette_records_and_replays_a_reply_with_a_lone_surrogate(tmp_path):
    from openai.types.chat import ChatCompletion

    from stateflow.backends.cassette import Cassette

    reply = json.loads('"half \\ud83d pair"')
    response = ChatCompletion.model_validate(
        {
            "id": "x",
            "object": "chat.completion",
            "created": 0,
            "model": "m",
            "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": reply}}],
        }
    )
    params = {"model": "m", "messages": [{"role": "user", "content": reply}]}
    Cassette(tmp_path / "c.jsonl", "record").store(params, response)
    (tmp_path / "c.jsonl").read_bytes().decode("utf-8")  # valid UTF-8 on disk
    replayed = Cassette(tmp_path / "c.jsonl", "replay").lookup(params)
    assert replayed.choices[0].message.content == reply

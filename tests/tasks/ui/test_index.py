"""The UI's data layer: offsets per record, traces on demand, live files, bad lines shown not fatal."""

from __future__ import annotations

import json
import os

import pytest
from stateflow.tasks.ui.index import RunIndex

from stateflow.errors import ConfigError
from tests.tasks.ui.conftest import make_record, raw_line, write_records


def test_index_keeps_no_trace_and_loads_it_by_offset(tmp_path):
    write_records(tmp_path, [make_record(i) for i in range(5)])
    index = RunIndex([tmp_path])
    eps = list(index.episodes())
    assert [e.record.task for e in eps] == [0, 1, 2, 3, 4]
    assert all(e.record.history == [] and e.record.eval == {} for e in eps)  # the index holds no trace
    full = index.load(eps[3])
    assert full.history[1]["content"] == "Action: execute[SELECT 3]" and full.eval["eval_obs"] == "[(3,)]"


def test_newest_record_per_key_wins_in_write_order(tmp_path):
    write_records(tmp_path, [make_record(0, success=False), make_record(1), make_record(0, success=True)])
    eps = list(RunIndex([tmp_path]).episodes())
    assert [(e.record.task, e.record.success) for e in eps] == [(1, True), (0, True)]


def test_growing_file_is_read_incrementally_and_a_torn_tail_waits(tmp_path):
    path = write_records(tmp_path, [make_record(0)])
    index = RunIndex([tmp_path])
    line = raw_line(make_record(1).to_dict())
    with path.open("ab") as fh:
        fh.write(line[:50])  # a record being written
    assert index.refresh()
    src = index.sources[0]
    assert len(src.episodes) == 1 and src.torn_tail == 50 and src.problems == []
    with path.open("ab") as fh:
        fh.write(line[50:])
    assert index.refresh()
    assert [e.record.task for e in index.episodes()] == [0, 1] and src.torn_tail == 0
    assert not index.refresh()  # nothing new: nothing re-read
    assert index.load(index.find(0, "digest-stateflow", 1)).history[2]["content"] == "[(1,)]"


def test_a_replaced_file_is_indexed_again(tmp_path):
    path = write_records(tmp_path / "a.jsonl", [make_record(0), make_record(1)])
    index = RunIndex([path])
    tmp = tmp_path / "b.jsonl"
    write_records(tmp, [make_record(7)])
    os.replace(tmp, path)  # how an archive is rewritten
    index.refresh()
    assert [e.record.task for e in index.episodes()] == [7]


def test_bad_lines_become_problems_naming_file_and_line(tmp_path):
    path = write_records(tmp_path, [make_record(0)])
    newer = make_record(1).to_dict() | {"schema_version": 99}
    invalid = make_record(2).to_dict() | {"turns": "many"}
    with path.open("ab") as fh:
        fh.write(b"{not json\n" + raw_line(newer) + raw_line(invalid) + b"[1, 2]\n")
    write_records(tmp_path, [make_record(3)])
    index = RunIndex([tmp_path])
    assert [e.record.task for e in index.episodes()] == [0, 3]  # good records on both sides are kept
    problems = [(p.line, p.kind) for p in index.problems()]
    assert problems == [(2, "corrupt"), (3, "newer-schema"), (4, "invalid"), (5, "invalid")]
    newer_problem = index.problems()[1]
    assert "schema_version 99" in newer_problem.message and newer_problem.summary == "stateflow / task 1"
    assert str(path) == newer_problem.source


def test_empty_directory_and_missing_paths(tmp_path):
    index = RunIndex([tmp_path])  # a run that has not written yet
    assert list(index.episodes()) == [] and index.problems() == []
    write_records(tmp_path, [make_record(0)])
    assert index.refresh() and len(list(index.episodes())) == 1
    with pytest.raises(ConfigError, match="no such directory"):
        RunIndex([tmp_path / "nope"])
    with pytest.raises(ConfigError, match="at least one"):
        RunIndex([])


def test_a_line_changed_under_the_index_is_an_error_not_a_wrong_episode(tmp_path):
    path = write_records(tmp_path, [make_record(0), make_record(1)])
    index = RunIndex([tmp_path])
    ep = index.find(0, "digest-stateflow", 1)
    data = path.read_bytes().replace(b'"task": 1', b'"task": 9')  # same length, other episode
    path.write_bytes(data)
    with pytest.raises(ConfigError, match="changed since it was indexed"):  # its key is not the one indexed
        index.load(ep)


def test_index_reads_an_oracle_run(oracle_run):
    index = RunIndex([oracle_run])
    lines = (oracle_run / "results.jsonl").read_bytes().count(b"\n")
    assert len(list(index.episodes())) == lines == 18
    votes = [e for e in index.episodes() if e.has_vote]
    assert votes and {e.record.method for e in votes} == {"stateflow_error_vote"}
    assert json.loads(json.dumps(index.load(votes[0]).history))  # the trace reads back whole


def test_the_fast_cut_reads_what_a_whole_parse_reads(oracle_run):
    from stateflow.tasks.ui.lines import TRACE_FIELDS, _without_trace

    for line in (oracle_run / "results.jsonl").read_bytes().splitlines():
        data = json.loads(line)
        small, has_vote = _without_trace(line)
        assert small == {k: v for k, v in data.items() if k not in TRACE_FIELDS}
        assert has_vote == any("vote" in m.get("meta", {}) for m in data["history"])


def test_records_run_together_by_a_torn_write_are_not_read_as_one(tmp_path):
    path = tmp_path / "results.jsonl"
    first = raw_line(make_record(0).to_dict())
    second = raw_line(make_record(1, method="other").to_dict())
    path.write_bytes(first[: len(first) // 2] + second)  # a write torn half-way, then the next record
    index = RunIndex([tmp_path])
    assert list(index.episodes()) == []
    assert [p.kind for p in index.problems()] == ["corrupt"]


def test_a_nested_key_named_like_a_trace_field_falls_back_to_a_whole_parse(tmp_path):
    rec = make_record(0)
    history = [*rec.history, {"kind": "tool", "state": "S", "content": "x", "meta": {"verdict": {"ok": 1}}}]
    write_records(tmp_path, [rec.model_copy(update={"history": history, "verdict": {"top": True}})])
    index = RunIndex([tmp_path])
    (ep,) = index.episodes()
    assert ep.record.verdict == {"top": True} and ep.record.history == []
    assert index.load(ep).history[-1]["meta"] == {"verdict": {"ok": 1}}


def _hostile_variants(line: bytes) -> list[bytes]:
    """Lines a results file may hold besides good records (each one changed in one way)."""
    data = json.loads(line)
    return [
        line,
        json.dumps(data | {"task": -1}).encode(),  # invalid value
        json.dumps(data | {"turns": 1.5}).encode(),  # wrong type (strict)
        json.dumps(data | {"status": "maybe"}).encode(),
        json.dumps(data | {"schema_version": 99}).encode(),  # newer schema
        json.dumps({k: v for k, v in data.items() if k != "method"}).encode(),  # missing field
        json.dumps({k: v for k, v in data.items() if k != "schema_version"}).encode(),  # version 0
        json.dumps(data | {"unknown_key": [1, 2]}).encode(),  # kept, not refused
        line.replace(b', "verdict": ', b', "history": [{"x": 1}], "verdict": '),  # a second trace key
        line[: len(line) // 2],  # torn
    ]


def test_the_one_step_read_accepts_and_refuses_exactly_what_the_careful_read_does(oracle_run, tmp_path):
    """Current records are validated in one step from their bytes; that must accept, refuse and
    report exactly what the careful read does, whatever the line holds."""
    from stateflow.tasks.ui.lines import Problem, _parse_carefully, _validated_cut, parse_line

    lines = (oracle_run / "results.jsonl").read_bytes().splitlines()
    assert all(_validated_cut(line) is not None for line in lines)  # the one-step path is the one taken
    checked = 0
    for i, line in enumerate(lines):
        for variant in _hostile_variants(line) if i < 3 else [line]:
            careful = _parse_carefully(variant, tmp_path, 1, {})
            for quick in (parse_line(variant, tmp_path, 1, {}), parse_line(variant, tmp_path, 1, {}, light=True)):
                if isinstance(careful, Problem):
                    assert quick == careful
                else:
                    assert not isinstance(quick, Problem) and quick is not None
                    assert quick[1] == careful[1] and quick[0].to_dict() == careful[0].to_dict()
            checked += 1
    assert checked == len(lines) + 3 * 9


def test_records_of_one_setting_share_one_identity_in_the_index(oracle_run):
    index = RunIndex([oracle_run])
    by_digest: dict[str, list] = {}
    for ep in index.episodes():
        by_digest.setdefault(ep.record.identity_digest, []).append(ep.record.identity)
    assert by_digest and all(len(ids) > 1 for ids in by_digest.values())
    assert all(all(i is ids[0] for i in ids) for ids in by_digest.values())  # one object: memory stays bounded

"""The typed episode record: the errors a bad record gives, and the dict-style access old readers use.

Loading from the results file is tested in ``test_records.py``; these are the record's own contracts.
"""

from __future__ import annotations

import json
import re

import pytest
from stateflow.tasks.kit.episode_record import SCHEMA_VERSION, EpisodeRecord, InvalidRecordError


def _fields(**kw) -> dict:
    return {
        "benchmark": "b",
        "method": "m",
        "models": "x",
        "task": 0,
        "status": "ok",
        "success": False,
        "reward_raw": 0.0,
        "turns": 1,
        "failed_actions": 0,
    } | kw


def test_a_record_built_by_hand_has_no_location_and_lists_every_problem_once():
    with pytest.raises(InvalidRecordError) as err:
        EpisodeRecord.from_dict(_fields(turns="three", status="done"))
    assert err.value.where == ""
    assert [p.split(":")[0] for p in err.value.problems] == ["status", "turns"]
    assert re.fullmatch(
        r"invalid result record: status: [^;]+; turns: [^;]+ \(fix or remove that line; nothing was written\)",
        str(err.value),
    )


def test_a_problem_deep_inside_a_field_names_its_whole_path():
    with pytest.raises(InvalidRecordError) as err:
        EpisodeRecord.from_dict(_fields(usage_by_state={"Solve": [1]}), where="r.jsonl:4")
    assert err.value.where == "r.jsonl:4"
    assert [p.split(":")[0] for p in err.value.problems] == ["usage_by_state.Solve"]
    assert str(err.value).startswith("r.jsonl:4: invalid result record: usage_by_state.Solve: ")


@pytest.mark.parametrize("data, kind", [([1, 2], "list"), ("text", "str"), (None, "NoneType")])
def test_a_line_that_is_not_an_object_names_what_it_is(data, kind):
    with pytest.raises(InvalidRecordError) as err:
        EpisodeRecord.from_dict(data)
    assert err.value.where == "" and err.value.problems == [f"expected a JSON object, got {kind}"]


def test_a_newer_version_is_refused_with_its_location():
    with pytest.raises(InvalidRecordError) as err:
        EpisodeRecord.from_dict(_fields(schema_version=SCHEMA_VERSION + 1), where="r.jsonl:1")
    assert err.value.where == "r.jsonl:1"
    assert str(err.value).startswith(f"r.jsonl:1: invalid result record: schema_version {SCHEMA_VERSION + 1} is newer")


def test_dict_style_access_reads_fields_and_kept_keys_and_names_a_missing_key():
    r = EpisodeRecord.from_dict(_fields(task=5, note="kept"))
    assert (r["task"], r["note"], r.get("note"), r.get("reward")) == (5, "kept", "kept", 0.0)
    assert r.get("absent") is None and r.get("absent", 7) == 7
    with pytest.raises(KeyError) as err:
        r["absent"]
    assert err.value.args == ("absent",)


def test_stamped_adds_the_identity_and_changes_nothing_else():
    r = EpisodeRecord.from_dict(_fields())
    s = r.stamped({"dataset": "demo"}, "abcd")
    assert (s.identity, s.identity_digest) == ({"dataset": "demo"}, "abcd")
    assert s.to_dict() == r.to_dict() | {"identity": {"dataset": "demo"}, "identity_digest": "abcd"}
    assert r.identity is None  # records are immutable values


def test_a_bash_record_keeps_what_its_reward_compared_through_its_json_line():
    from stateflow.envs.bash.comparison import BashComparison

    c = BashComparison.of(
        agent=[("demo/a", "??")], gold=[("demo/a", "??")], same={("demo/a", "??"): False},
        diff_score=0.33, content_score=0.0, answer_score=0.33, similarity=1.0, corrupt_gold=False,
    )  # fmt: skip
    fields = dict(benchmark="intercode-bash", method="m", models="x", task=0, status="ok", turns=1, failed_actions=0)
    record = EpisodeRecord.from_dict(fields | {"success": False, "reward_raw": 0.67, "bash_comparison": c.model_dump()})
    back = EpisodeRecord.from_dict(json.loads(json.dumps(record.to_dict())))
    assert back.bash_comparison == c and back.bash_comparison.content[0].same is False
    # a record without one is written without the key, so older lines are written back unchanged
    plain = EpisodeRecord.from_dict(fields | {"success": True, "reward_raw": 1.0})
    assert "bash_comparison" not in plain.to_dict()
    with pytest.raises(InvalidRecordError, match=r"bash_comparison\.missing"):
        EpisodeRecord.from_dict(fields | {"success": True, "reward_raw": 1.0, "bash_comparison": {"missing": 3}})

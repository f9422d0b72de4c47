"""The vote-ceiling script: who wins a simulated vote, how combinations are ranked, and which
recorded methods it keeps."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.scripts import load_script


@pytest.fixture(scope="module")
def vc():
    return load_script("vote_ceiling")


def test_majority_wins_and_failed_statements_have_no_vote(vc):
    assert vc.vote_wins([vc.GOLD, "[(1,)]", vc.GOLD])
    assert not vc.vote_wins(["[(1,)]", vc.GOLD, "[(1,)]"])
    # two failures do not outvote one answer
    assert vc.vote_wins([None, None, vc.GOLD])
    assert not vc.vote_wins([None, None, None])


def test_a_tie_goes_to_the_first_answer(vc):
    assert vc.vote_wins([vc.GOLD, "[(1,)]"])
    assert not vc.vote_wins(["[(1,)]", vc.GOLD])


def test_simulate_ranks_combinations_and_orders_ties_by_own_success(vc):
    g, w = vc.GOLD, "[(0,)]"
    answers = {
        "strong": {1: g, 2: g, 3: w},  # 2 of 3 on its own
        "weak": {1: w, 2: w, 3: w},  # 0 of 3
        "other": {1: "[(9,)]", 2: w, 3: g},  # 1 of 3
    }
    scored = vc.simulate(answers, 2, [1, 2, 3])
    # every pair ties 1:1 where they differ, so the stronger method's answer stands
    assert scored[0] == (2, ("strong", "other"))
    assert dict((c, s) for s, c in scored)[("strong", "weak")] == 2
    assert dict((c, s) for s, c in scored)[("other", "weak")] == 1
    assert vc.simulate(answers, 3, [1, 2, 3]) == [(1, ("strong", "other", "weak"))]


def _write(path: Path, records: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def test_load_keeps_complete_methods_above_the_floor_without_a_database(vc, tmp_path, capsys):
    rec = lambda m, t, ok, last=None: {"method": m, "task": t, "success": ok, "last_action": last}  # noqa: E731
    path = _write(
        tmp_path / "a.jsonl",
        [rec("a", 1, True), rec("a", 2, False), rec("b", 1, False), rec("b", 2, False), rec("partial", 1, True)],
    )
    answers = vc.load_answers([path], min_success=10, dataset="spider")
    assert set(answers) == {"a"}  # b is below the floor, partial lacks task 2
    assert answers["a"][1] == vc.GOLD
    assert answers["a"][2] == "<unknown answer of a>"  # no final statement kept: shares no vote
    assert "left out: partial (1 of 2 tasks recorded)" in capsys.readouterr().out


def test_a_bad_record_line_is_named(vc, tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text('{"method": "a", "task": 1, "success": true}\n{oops\n')
    with pytest.raises(SystemExit, match=r"bad.jsonl:2: not a JSON record"):
        vc.load_answers([path], min_success=0, dataset="spider")
    path.write_text('{"method": "a", "task": 1, "success": true}\n{"task": 2}\n')
    with pytest.raises(SystemExit, match=r"bad.jsonl:2: not an episode record \(no 'method' field\)"):
        vc.load_answers([path], min_success=0, dataset="spider")


def test_failed_answers_are_rerun_on_the_tasks_database(vc, tmp_path, sql_available, shared_data):
    """A failed record's final statement runs read-only on its task's database: its rows become
    its answer; a statement that fails to run has no vote."""
    rec = lambda m, t, ok, last=None: {"method": m, "task": t, "success": ok, "last_action": last}  # noqa: E731
    path = _write(
        tmp_path / "r.jsonl",
        [
            rec("rows", 8, False, "SELECT COUNT(*) FROM Paragraphs"),  # task 8: cre_Doc_Template_Mgt
            rec("broken", 8, False, "execute[SELECT nothing FROM nowhere]"),
        ],
    )
    answers = vc.load_answers([path], min_success=0, dataset="spider")
    assert answers["rows"][8] == "[(15,)]"
    assert answers["broken"][8] is None
    assert not vc.vote_wins([answers["broken"][8], answers["rows"][8]])  # a wrong answer, not the gold

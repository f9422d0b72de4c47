"""The paper's metrics on hand-made records, against hand-computed values.

The records carry only ``reward_raw`` (what an environment paid): the clipped mean ``reward`` is
the metrics module's own job, so the expected numbers below are written out by hand rather than
derived with the same clipping.
"""

from __future__ import annotations

import pytest
from stateflow.tasks.kit.episode_record import EpisodeRecord
from stateflow.tasks.reports.metrics import setting_labels, summarize, tokens_by_state


def _r(
    method, success, reward, turns, failed, cost=0.0, p=100, c=10, status="ok", hardness="easy", states=None, task=None
):
    _r.counter += 1
    return EpisodeRecord.from_dict(
        {
            "benchmark": "intercode-sql",
            "method": method,
            "models": "default=x",
            "task": _r.counter if task is None else task,
            "success": success,
            "reward_raw": reward,
            "turns": turns,
            "failed_actions": failed,
            "cost": cost,
            "prompt_tokens": p,
            "completion_tokens": c,
            "status": status,
            "hardness": hardness,
            "usage_by_state": states or {},
        }
    )


_r.counter = 0


def test_summary_matches_hand_computation():
    rows = summarize(
        [
            _r("a", True, 1.0, 4, 1, cost=0.5, p=100, c=10),
            _r("a", False, -0.4, 6, 2, cost=0.25, p=300, c=30, status="error"),
            _r("b", False, 0.5, 2, 0),
        ]
    )
    a = rows[0]
    assert a.group == ("intercode-sql", "a", "default=x") and a.n == 2
    assert a.sr == 50.0
    assert a.reward == pytest.approx(0.5)  # clipped: (1 + 0) / 2, not (1 - 0.4) / 2
    assert a.reward_raw == pytest.approx(0.3)
    assert a.turns == 5.0 and a.error_rate == pytest.approx(100 * 3 / 10)
    assert a.cost == 0.75 and a.p_tokens == 200 and a.c_tokens == 20 and a.errored == 1
    assert rows[1].sr == 0.0 and rows[1].error_rate == 0.0


def test_group_by_hardness_and_tokens_by_state():
    recs = [
        _r("a", True, 1, 1, 0, hardness="easy", states={"Solve": {"prompt_tokens": 10, "completion_tokens": 2}}),
        _r(
            "a",
            False,
            0,
            1,
            0,
            hardness="hard",
            states={
                "Solve": {"prompt_tokens": 30, "completion_tokens": 4},
                "Error": {"prompt_tokens": 8, "completion_tokens": 0},
            },
        ),
    ]
    rows = summarize(recs, ("method", "hardness"))
    assert [(r.group, r.sr) for r in rows] == [(("a", "easy"), 100.0), (("a", "hard"), 0.0)]
    t = tokens_by_state(recs, ("method",))[("a",)]
    assert t["Solve"] == {"prompt": 20.0, "completion": 3.0} and t["Error"] == {"prompt": 4.0, "completion": 0.0}


def test_negative_rewards_are_clipped_at_zero_in_the_mean():
    """Regression: the clip belongs to the metrics, whatever a record's own ``reward`` says."""
    recs = [_r("a", False, -1.0, 1, 0), _r("a", False, -0.25, 1, 0), _r("a", False, 0.75, 1, 0)]
    # a record written without clipping must not leak through
    recs = [r.model_copy(update={"reward": r.reward_raw}) for r in recs]
    (row,) = summarize(recs)
    assert row.reward == pytest.approx(0.25)  # (0 + 0 + 0.75) / 3
    assert row.reward_raw == pytest.approx(-1 / 6)  # (-1 - 0.25 + 0.75) / 3


def test_each_episode_counts_once_the_newest_record_wins():
    first = _r("a", False, 0.0, 3, 1, status="error", task=7)
    rerun = _r("a", True, 1.0, 2, 0, task=7)
    other = _r("a", False, 0.5, 4, 0, task=8)
    first, rerun, other = (r.model_copy(update={"identity_digest": "d1"}) for r in (first, rerun, other))
    (row,) = summarize([first, rerun, other])
    assert (row.n, row.sr, row.errored) == (2, 50.0, 0)
    assert row.reward == pytest.approx(0.75) and row.turns == 3.0


def test_setting_labels_name_only_the_differing_fields():
    a = {"dataset": "demo", "max_turns": 10, "flow_sha256": "abcdef0123456789"}
    b = {"dataset": "demo", "max_turns": 3, "flow_sha256": "99999999aaaaaaaa"}
    assert setting_labels([a]) == [""]
    assert setting_labels([a, b]) == ["flow_sha256=abcdef01, max_turns=10", "flow_sha256=99999999, max_turns=3"]
    assert setting_labels([{}, a]) == ["no identity", "with identity"]
    assert setting_labels([{}, a, b]) == [
        "no identity",
        "flow_sha256=abcdef01, max_turns=10",
        "flow_sha256=99999999, max_turns=3",
    ]


# -- edges found by mutation testing -----------------------------------------------------------


def _with_identity(r: EpisodeRecord, digest: str, **identity) -> EpisodeRecord:
    return r.model_copy(update={"identity_digest": digest, "identity": identity})


def test_a_group_without_any_action_has_an_error_rate_of_zero():
    (row,) = summarize([_r("z", False, 0.0, 0, 0, status="error"), _r("z", False, 0.0, 0, 0, status="timeout")])
    assert (row.n, row.turns, row.error_rate, row.errored) == (2, 0.0, 0.0, 2)


def test_row_as_dict_is_the_group_keys_then_every_metric():
    (row,) = summarize([_r("a", True, 1.0, 4, 1, cost=0.5, p=100, c=10), _r("a", False, -0.5, 2, 0, p=300, c=30)])
    d = row.as_dict(("benchmark", "method", "models"))
    assert list(d) == [
        "benchmark", "method", "models", "setting", "n", "sr", "sr_low", "sr_high", "reward", "reward_raw",
        "turns", "error_rate", "cost", "p_tokens", "c_tokens", "errored", "eval_share",
    ]  # fmt: skip
    assert d == {
        "benchmark": "intercode-sql",
        "method": "a",
        "models": "default=x",
        "setting": "",
        "n": 2,
        "sr": 50.0,
        "sr_low": pytest.approx(9.45, abs=0.01),  # Wilson, 1 of 2
        "sr_high": pytest.approx(90.55, abs=0.01),
        "reward": 0.5,
        "reward_raw": 0.25,
        "turns": 3.0,
        "error_rate": pytest.approx(100 / 6),
        "cost": 0.5,
        "p_tokens": 200.0,
        "c_tokens": 20.0,
        "errored": 0,
        "eval_share": 1.0,  # no cached tokens reported: every sent token was evaluated
    }
    with pytest.raises(ValueError):  # a key list that does not match the group is a bug, not a silent cut
        row.as_dict(("method",))


def test_grouping_by_a_field_some_records_lack_groups_them_as_none():
    plain = _r("a", True, 1.0, 1, 0)
    tagged = EpisodeRecord.from_dict(plain.to_dict() | {"task": 999, "split": "dev"})
    rows = summarize([plain, tagged], ("method", "split"))
    assert [(r.group, r.n) for r in rows] == [(("a", "None"), 1), (("a", "dev"), 1)]


def test_setting_labels_shorten_only_hashes():
    a = {"dataset": "intercode-sql-dev", "prompts_sha256": "0123456789abcdef"}
    b = {"dataset": "intercode-sql-test", "prompts_sha256": "fedcba9876543210"}
    assert setting_labels([a, b]) == [
        "dataset=intercode-sql-dev, prompts_sha256=01234567",
        "dataset=intercode-sql-test, prompts_sha256=fedcba98",
    ]


def test_one_group_with_two_settings_gives_two_rows_sorted_by_label_and_tokens_per_setting():
    solve = {"Solve": {"prompt_tokens": 10, "completion_tokens": 1}}
    long_ = _with_identity(_r("a", True, 1.0, 2, 0, states=solve, task=1), "d9", max_turns=10)
    short = _with_identity(_r("a", False, 0.0, 3, 3, states=solve, task=1), "d1", max_turns=3)
    rows = summarize([long_, short])
    assert [(r.setting, r.n, r.sr, r.error_rate) for r in rows] == [
        ("max_turns=10", 1, 100.0, 0.0),
        ("max_turns=3", 1, 0.0, 100.0),
    ]
    t = tokens_by_state([long_, short], ("method",))
    assert set(t) == {("a", "max_turns=10"), ("a", "max_turns=3")}
    assert t[("a", "max_turns=3")]["Solve"] == {"prompt": 10.0, "completion": 1.0}


def test_load_results_takes_folders_or_files_and_names_a_missing_one(tmp_path):
    from stateflow.tasks.harness.records import ResultsFile
    from stateflow.tasks.reports.metrics import load_results

    (tmp_path / "run").mkdir()
    ResultsFile(tmp_path / "run" / "results.jsonl").extend([_r("a", True, 1.0, 1, 0, task=1)])
    ResultsFile(tmp_path / "other.jsonl").extend([_r("b", False, 0.0, 1, 0, task=2)])
    loaded = load_results([str(tmp_path / "run"), str(tmp_path / "other.jsonl")])
    assert [(r.method, r.task) for r in loaded] == [("a", 1), ("b", 2)]
    with pytest.raises(FileNotFoundError, match=r"empty/results\.jsonl: no results here .*--out .*empty"):
        load_results([str(tmp_path / "empty")])


def test_eval_share_is_evaluated_over_sent_prompt_tokens_summed_over_the_group():
    cached = [_r("a", True, 1.0, 1, 0, p=1000), _r("a", False, 0.0, 1, 0, p=200), _r("b", True, 1.0, 1, 0, p=0)]
    cached = [
        EpisodeRecord.from_dict(r.to_dict() | {"cached_tokens": k}) for r, k in zip(cached, (900, 0, 0), strict=True)
    ]
    a, b = summarize(cached, ("method",))
    assert a.eval_share == pytest.approx((100 + 200) / 1200)  # token-weighted, not a mean of ratios
    assert b.eval_share is None  # nothing sent: no share (shown as "-")
    hostile = EpisodeRecord.from_dict(_r("c", True, 1.0, 1, 0, p=10).to_dict() | {"cached_tokens": 50})
    (c,) = summarize([hostile], ("method",))
    assert c.eval_share == 0.0  # a server claiming more cached than sent cannot go below zero

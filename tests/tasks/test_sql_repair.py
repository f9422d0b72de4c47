"""Answer-then-repair: the one-shot answer, repaired when it fails, on the real SQL environment."""

from __future__ import annotations

import pytest
from stateflow.tasks.agents.methods import build_method
from stateflow.tasks.harness.registry import default_registry
from stateflow.tasks.kit.blackboard import episode_vars
from stateflow.tasks.sql.repair import build_answer_repair

from stateflow import ModelProfile, run
from stateflow.testing.fake_openai import FakeOpenAIServer

pytest.importorskip("sqlglot", reason="sqlglot absent: pip install -e '.[sql]'")


def _run(method, env, replies):
    flow, view = build_method(method, default_registry().get("intercode-sql"), grammar=True)
    it = iter(replies)
    with FakeOpenAIServer(lambda *a: next(it)) as srv:
        env.reset(0)  # "How many books does the library have?"
        profile = ModelProfile(name="lc", model="m", provider="llamacpp", base_url=srv.url, api_key_env=None)
        r = run(flow, env.task(0).query, models=profile, env=env, vars={"max_turns": 10}, view=view)
    return r, srv.requests


def test_the_first_call_is_the_one_shot_call_and_a_statement_that_runs_is_submitted(sql_env):
    gold = f"Action: execute[{sql_env.task(0).gold}]"
    r, requests = _run("answer_repair", sql_env, [gold])
    _, oneshot_requests = _run("oneshot_direct", sql_env, [gold])
    assert requests == oneshot_requests  # same messages, grammar and settings: same first answers
    assert r.path == ["Setup", "Answer", "Submit", "End"] and episode_vars(r).reward == 1.0


def test_a_failed_statement_is_repaired_with_the_column_hint_and_a_desc_in_between(sql_env):
    replies = ["Action: execute[SELECT count(title) FROM author]", "Action: execute[DESC book]"]
    replies.append(f"Action: execute[{sql_env.task(0).gold}]")
    r, requests = _run("answer_repair", sql_env, replies)
    assert r.path == ["Setup", "Answer", "Repair", "Repair", "Submit", "End"]
    first_repair = requests[1]["messages"]
    assert first_repair[-2]["content"].endswith("(Note: title is a column of: book.)")
    assert first_repair[-1]["content"].startswith("Your statement failed")
    episode = episode_vars(r)
    assert episode.reward == 1.0 and (episode.turns, episode.failed) == (4, 1)


def test_repairs_are_bounded_then_the_last_result_is_submitted(sql_env):
    bad = [f"Action: execute[SELECT nope{i} FROM book]" for i in range(5)]
    r, requests = _run("answer_repair", sql_env, bad)
    assert r.path == ["Setup", "Answer", "Repair", "Repair", "Repair", "Submit", "End"]
    assert len(requests) == 4  # the answer and three repairs
    assert episode_vars(r).reward == 0.0


def test_attempts_must_be_positive():
    with pytest.raises(ValueError, match="attempts"):
        build_answer_repair(attempts=0)
    assert "Repair" in build_answer_repair(attempts=1).states


def test_a_statement_repeated_past_the_guard_is_submitted_instead_of_run_a_third_time(sql_env):
    bad = "Action: execute[SELECT nope FROM book]"
    r, requests = _run("answer_repair", sql_env, [bad] * 6)
    # the answer, one repair and the guard's two re-asks: then Submit, not another run
    assert r.path == ["Setup", "Answer", "Repair", "Submit", "End"]
    assert len(requests) == 4
    episode = episode_vars(r)
    assert (episode.turns, episode.failed) == (3, 2)  # set-up, the answer, the repair's one run

"""Re-binding columns read through the wrong alias: the rule on hand-written statements, and the
execute tool running the re-bound statement in the real SQL environment."""

from __future__ import annotations

import pytest
from stateflow.tasks.agents.methods import build_method
from stateflow.tasks.harness.registry import default_registry
from stateflow.tasks.kit.blackboard import episode_vars
from stateflow.tasks.sql.rebind import rebind_columns

from stateflow import ModelProfile, StateFlowView, run
from stateflow.testing.fake_openai import FakeOpenAIServer

pytest.importorskip("sqlglot", reason="sqlglot absent: pip install -e '.[sql]'")

AIRLINES = {
    "airlines": ["uid", "Airline", "Abbreviation", "Country"],
    "flights": ["Airline", "FlightNo", "SourceAirport"],
    "airports": ["City", "AirportCode", "Country"],
}


def test_a_column_read_through_the_wrong_alias_moves_to_the_table_that_has_it():
    sql = (
        "SELECT T1.Abbreviation, T2.Country FROM airlines AS T1 JOIN flights AS T2 ON T1.uid = T2.Airline "
        "GROUP BY T2.Country"
    )
    out = rebind_columns(sql, AIRLINES)
    assert out.changes == ("T2.Country -> T1.Country", "T2.Country -> T1.Country")
    assert out.statement == (
        "SELECT T1.Abbreviation, T1.Country FROM airlines AS T1 JOIN flights AS T2 ON T1.uid = T2.Airline "
        "GROUP BY T1.Country"
    )


def test_table_names_used_as_qualifiers_and_names_in_another_case_are_rebound():
    out = rebind_columns(
        "SELECT flights.country FROM airlines JOIN flights ON airlines.uid = flights.Airline", AIRLINES
    )
    assert out.changes == ("flights.country -> airlines.country",)
    assert out.statement.startswith("SELECT airlines.country FROM")


@pytest.mark.parametrize(
    ("sql", "why"),
    [
        ("SELECT T1.Country FROM airlines AS T1", "already right"),
        ("SELECT T2.Nope FROM airlines AS T1 JOIN flights AS T2 ON T1.uid = T2.Airline", "no table has it"),
        (
            "SELECT T3.Country FROM airlines AS T1 JOIN airports AS T2 ON T1.Country = T2.Country "
            "JOIN flights AS T3 ON T1.uid = T3.Airline",
            "two tables have it",
        ),
        (
            "SELECT T1.Airline FROM airlines AS T1 WHERE T1.uid IN (SELECT T1.City FROM flights AS T1)",
            "its own scope lacks it",
        ),
        (
            "SELECT T1.uid FROM airlines AS T1 JOIN flights AS T2 ON T1.uid = T2.uid",
            "the join would compare uid with itself",
        ),
        ("SELEC T1.x FROM", "does not parse"),
        ("DESC airlines", "not a query"),
    ],
)
def test_statements_left_as_written(sql, why):
    out = rebind_columns(sql, AIRLINES)
    assert out == rebind_columns(sql, AIRLINES)  # deterministic
    assert (out.statement, out.changed) == (sql, False), why


def test_a_subquery_is_rebound_within_its_own_scope():
    sql = "SELECT T1.Country FROM airlines AS T1 WHERE T1.uid IN (SELECT T1.FlightNo FROM airports AS T2 JOIN flights AS T1 ON T2.City = T1.SourceAirport WHERE T1.City = 'Paris')"  # noqa: E501
    out = rebind_columns(sql, AIRLINES)
    assert out.changes == ("T1.City -> T2.City",)
    assert "WHERE T2.City = 'Paris'" in out.statement and out.statement.startswith(
        "SELECT T1.Country FROM airlines AS T1"
    )


def _episode(method: str, env, reply: str):
    flow, view = build_method(method, default_registry().get("intercode-sql"))
    with FakeOpenAIServer(lambda *a: reply) as srv:
        env.reset(0)  # "How many books does the library have?"
        profile = ModelProfile(name="lc", model="m", provider="llamacpp", base_url=srv.url, api_key_env=None)
        return run(flow, env.task(0).query, models=profile, env=env, vars={"max_turns": 10}, view=view or StateFlowView)


# book_id belongs to book (T2), not author (T1): the count runs only once it is re-bound
MISBOUND = (
    "Thought: t\nAction: execute[SELECT COUNT(T1.book_id) FROM author AS T1 JOIN book AS T2 "
    "ON T1.author_id = T2.author_id]"
)


def test_oneshot_rebind_runs_the_rebound_statement_and_says_what_moved(sql_env):
    r = _episode("oneshot_rebind", sql_env, MISBOUND)
    observation = next(m for m in r.history if m.name == "execute_rebound")
    assert "T1.book_id -> T2.book_id" in observation.content
    assert observation.meta["action"].startswith("SELECT COUNT(T2.book_id) FROM author AS T1")
    assert episode_vars(r).reward == 1.0


def test_without_rebind_the_same_reply_fails_as_before(sql_env):
    r = _episode("oneshot", sql_env, MISBOUND)
    observation = next(m for m in r.history if m.name == "execute")
    assert "Unknown column 'T1.book_id'" in observation.content
    assert episode_vars(r).reward == 0.0


def test_rebind_is_part_of_the_flow_identity():
    from stateflow.tasks.harness.identity import flow_fingerprint

    bench = default_registry().get("intercode-sql")
    plain, _ = build_method("oneshot", bench)
    rebound, _ = build_method("oneshot_rebind", bench)
    assert flow_fingerprint(plain) != flow_fingerprint(rebound)
    assert "execute_rebound" in [
        o.name for o in build_method("sf_agent_rebind", bench)[0].states["Solve"].outputs if hasattr(o, "name")
    ]


def _run_flow(flow, env, replies):
    it = iter(replies)
    with FakeOpenAIServer(lambda *a: next(it)) as srv:
        env.reset(0)
        profile = ModelProfile(name="lc", model="m", provider="llamacpp", base_url=srv.url, api_key_env=None)
        return run(flow, env.task(0).query, models=profile, env=env, vars={"max_turns": 10})


def test_voting_with_rebind_counts_a_misbound_candidate_by_what_it_will_run(sql_env):
    from stateflow.tasks.sql.levers import build_sql_flow

    gold = sql_env.task(0).gold  # SELECT count(*) FROM book -> 10
    candidates = [MISBOUND, "Thought: t\nAction: execute[SELECT 7]", MISBOUND, f"Thought: t\nAction: execute[{gold}]"]
    candidates.append("Thought: t\nAction: execute[SELECT 7]")
    results = {}
    for rebind in (False, True):
        flow = build_sql_flow(schema=True, vote=5, rebind=rebind, verify_then_submit=False)
        r = _run_flow(flow, sql_env, candidates)
        won = next(s for s in r.steps if s.detail.get("won"))
        results[rebind] = (won.output, won.detail["votes"], episode_vars(r).reward)
    # as written, the misbound count fails: SELECT 7 (two votes) beats the gold (one)
    assert results[False] == ("llm[candidate 1]", 2, 0.0)
    # re-bound, the two misbound counts agree with the gold: three votes, and the winner runs re-bound
    assert results[True] == ("llm[candidate 0]", 3, 1.0)


def test_oneshot_vote_keeps_the_greedy_reply_first_and_votes_on_rebound_results(sql_env):
    flow, view = build_method("oneshot_vote", default_registry().get("intercode-sql"))
    gold = sql_env.task(0).gold
    # greedy: an unrelated count; two samples agree with the gold once re-bound
    replies = ["Thought: t\nAction: execute[SELECT 7]", MISBOUND, "Thought: t\nAction: execute[SELECT 8]"]
    replies += [f"Thought: t\nAction: execute[{gold}]", "Thought: t\nAction: execute[SELECT nope FROM book]"]
    it = iter(replies)
    with FakeOpenAIServer(lambda *a: next(it)) as srv:
        sql_env.reset(0)
        profile = ModelProfile(name="lc", model="m", provider="llamacpp", base_url=srv.url, api_key_env=None)
        r = run(flow, sql_env.task(0).query, models=profile, env=sql_env, vars={"max_turns": 10}, view=view)
    assert [q.get("temperature") for q in srv.requests] == [srv.requests[0].get("temperature")] + [0.7] * 4
    assert srv.requests[0].get("temperature") != 0.7
    won = next(s for s in r.steps if s.detail.get("won"))
    assert (won.output, won.detail["votes"]) == ("llm[candidate 1]", 2)
    assert episode_vars(r).reward == 1.0 and r.path[-2:] == ["Submit", "End"]


def test_unknown_column_hints_name_the_tables_that_have_it_or_similar_names():
    from stateflow.tasks.sql.hints import unknown_column_hint

    assert unknown_column_hint("Unknown column 'T2.Country' in 'field list'", AIRLINES) == (
        "Country is a column of: airlines, airports."
    )
    assert unknown_column_hint("Unknown column 'Countri' in 'where clause'", AIRLINES) == (
        "No table has a column Countri; similar: airlines.Country, airports.Country."
    )
    assert unknown_column_hint("Unknown column 'zzz' in 'where clause'", AIRLINES) == "No table has a column zzz."
    assert unknown_column_hint("Table 'x.y' doesn't exist", AIRLINES) is None
    assert unknown_column_hint("Unknown column 'a' in 'on clause'", {}) is None


def test_the_hint_variant_says_where_the_column_is_after_a_failure(sql_env):
    flow, view = build_method("sf_agent_hint", default_registry().get("intercode-sql"))
    gold = sql_env.task(0).gold
    it = iter(["Action: execute[SELECT title FROM author]", f"Action: execute[{gold}]"])
    with FakeOpenAIServer(lambda *a: next(it)) as srv:
        sql_env.reset(0)
        profile = ModelProfile(name="lc", model="m", provider="llamacpp", base_url=srv.url, api_key_env=None)
        r = run(flow, sql_env.task(0).query, models=profile, env=sql_env, vars={"max_turns": 10}, view=view)
    failed = next(m for m in r.history if m.name == "execute_rebound_hinted")
    assert failed.content.endswith("(Note: title is a column of: book.)")
    assert r.path == ["Init", "Solve", "Error", "Submit", "End"] and episode_vars(r).reward == 1.0
    # the repair request showed the hint to the model
    assert "title is a column of: book." in "\n".join(m["content"] for m in srv.requests[1]["messages"])

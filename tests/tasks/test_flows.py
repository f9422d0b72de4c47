"""The paper's flows over real HTTP (a llama.cpp-like fake server) and the real SQL environment."""

from __future__ import annotations

import pytest
from stateflow.tasks.agents.methods import build_method
from stateflow.tasks.harness.registry import default_registry
from stateflow.tasks.kit.blackboard import episode_vars
from stateflow.tasks.sql.levers import build_sql_flow

from stateflow import ModelProfile, run
from stateflow.testing.fake_openai import FakeOpenAIServer


def test_observe_grammar_names_only_listed_tables_and_repeats_are_resampled(sql_env):
    replies = iter(
        [
            "Thought: look\nAction: execute[DESC book]",  # Observe
            "Thought: guess\nAction: execute[SELECT nope FROM book]",  # Solve -> error
            "Thought: again\nAction: execute[SELECT nope FROM book]",  # Error: repeats -> discarded
            "Thought: fix\nAction: execute[SELECT count(*) FROM book]",  # resampled at 0.8
            "Thought: ok\nAction: submit",  # Verify
        ]
    )
    with FakeOpenAIServer(lambda *a: next(replies)) as srv:
        prof = ModelProfile(name="lc", model="m", provider="llamacpp", base_url=srv.url, api_key_env=None)
        sql_env.reset(0)
        task = sql_env.task(0)
        r = run(build_sql_flow(grammar=True), task.query, models=prof, env=sql_env, vars={"max_turns": 10})
    observe_req = srv.requests[0]
    assert 'table ::= "author" | "book" | "loan" | "member"' in observe_req["grammar"]
    assert "submit" not in observe_req["grammar"]
    assert 'action ::= "submit" | "execute["' in srv.requests[1]["grammar"]
    assert [q["temperature"] for q in srv.requests] == [0.0, 0.0, 0.0, 0.8, 0.0]
    assert r.path == ["Init", "Observe", "Solve", "Error", "Verify", "End"]
    episode = episode_vars(r)
    assert episode.reward == 1.0 and episode.done and episode.tables == ["author", "book", "loan", "member"]
    assert (episode.turns, episode.failed) == (4, 1)  # SHOW TABLES, DESC, the failed SELECT, the fix
    assert r.vars == {"max_turns": 10}  # the tools keep their facts on the blackboard, not in the user's vars


@pytest.mark.parametrize(
    ("bench", "name"), [(b, m) for b in default_registry() for m in b.methods], ids=lambda x: getattr(x, "name", x)
)
def test_every_method_builds_for_its_benchmark_with_and_without_grammar(bench, name):
    for grammar in (False, True):
        flow, view = build_method(name, bench, grammar=grammar)
        assert flow.states and view.name in ("stateflow", "sf_agent")


def test_ablations_are_switches_of_one_definition():
    full, nv, ne, no = (
        build_sql_flow(),
        build_sql_flow(verify=False),
        build_sql_flow(error=False),
        build_sql_flow(observe=False),
    )
    assert set(full.states) - set(nv.states) == {"Verify"}
    assert set(full.states) - set(ne.states) == {"Error"}
    assert set(full.states) - set(no.states) == {"Observe"}
    assert "submit instead" in nv.states["Solve"].instruction
    assert "If the last statement failed" in ne.states["Verify"].instruction
    assert [r.target for r in no.rules_from("Init")][-1] == "Solve"
    with pytest.raises(ValueError, match="levers 'no_error' and 'no_verify' conflict"):
        build_sql_flow(verify=False, error=False)

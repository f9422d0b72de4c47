"""The one-shot baseline and the tuned SQL flow's levers, over real HTTP and the real SQL environment."""

from __future__ import annotations

import pytest
from stateflow.tasks.agents.methods import build_method
from stateflow.tasks.harness.registry import default_registry
from stateflow.tasks.kit.blackboard import episode_vars
from stateflow.tasks.sql.flow import executed_statement
from stateflow.tasks.sql.levers import build_sql_flow
from stateflow.tasks.sql.transforms import with_levers

from stateflow import LLM, ModelProfile, StateFlowView, run
from stateflow.testing.fake_openai import FakeOpenAIServer


def _profile(srv: FakeOpenAIServer) -> ModelProfile:
    return ModelProfile(name="lc", model="m", provider="llamacpp", base_url=srv.url, api_key_env=None)


def _run(flow, env, replies, view=None):
    it = iter(replies)
    with FakeOpenAIServer(lambda *a: next(it)) as srv:
        env.reset(0)
        r = run(flow, env.task(0).query, models=_profile(srv), env=env, vars={"max_turns": 10}, view=view)
    return r, srv


def test_oneshot_shows_the_schema_runs_one_statement_and_submits_it(sql_env):
    flow, view = build_method("oneshot", default_registry().get("intercode-sql"))
    gold = sql_env.task(0).gold
    r, srv = _run(flow, sql_env, [f"Thought: t\nAction: execute[{gold}]"], view)
    assert r.path == ["Setup", "Answer", "Submit", "End"]
    assert len(srv.requests) == 1  # one LLM call, nothing else
    prompt = "\n".join(m["content"] for m in srv.requests[0]["messages"])
    assert "Tables and their columns:" in prompt and "book(" in prompt
    episode = episode_vars(r)
    assert episode.done and episode.reward == 1.0 and episode.turns == 2  # schema + the statement


def test_oneshot_submits_a_wrong_answer_without_a_second_try(sql_env):
    flow, view = build_method("oneshot", default_registry().get("intercode-sql"))
    r, srv = _run(flow, sql_env, ["Thought: t\nAction: execute[SELECT 12345]"], view)
    assert len(srv.requests) == 1 and r.path[-2:] == ["Submit", "End"]
    assert episode_vars(r).reward == 0.0


def test_oneshot_for_bash_has_no_setup_state():
    flow, _ = build_method("oneshot", default_registry().get("intercode-bash"))
    assert flow.initial == "Answer" and "Setup" not in flow.states


def test_executed_statement_normalises_whitespace_and_ignores_submit():
    assert executed_statement("Thought: a\nAction: execute[SELECT  1\tFROM t]") == "SELECT 1 FROM t"
    assert executed_statement("Thought: a\nAction: submit") is None
    assert executed_statement("no action here") is None


def test_levers_arm_every_llm_call_and_leave_the_paper_flow_untouched():
    paper = build_sql_flow(schema=True)
    tuned = with_levers(paper, guard=True, cut=True)
    for name, state in tuned.states.items():
        for out in state.outputs:
            if isinstance(out, LLM):
                assert out.guard is not None and out.cut is not None, name
    assert all(o.guard is None for s in paper.states.values() for o in s.outputs if isinstance(o, LLM))
    assert "Submit" in tuned.states and "Submit" not in paper.states
    assert with_levers(paper) is paper


def test_a_statement_repeated_after_the_guard_is_submitted_instead_of_burning_turns(sql_env):
    flow = build_sql_flow(schema=True, guard=True, resample_repeats=False)
    bad = "Thought: t\nAction: execute[SELECT nope FROM book]"
    # Solve fails; Error repeats it; both re-asks (0.7, 1.0) repeat it too; it runs once more, then Submit.
    r, srv = _run(flow, sql_env, [bad] * 5, StateFlowView())
    assert r.path == ["Init", "Solve", "Error", "Submit", "End"]
    temps = [q["temperature"] for q in srv.requests]
    assert temps == [0.0, 0.0, 0.7, 1.0]
    reask = srv.requests[2]["messages"][-1]["content"]
    assert "You already ran" in reask and "SELECT nope FROM book" in reask
    episode = episode_vars(r)
    assert episode.done and episode.turns == 3  # schema, the failed SELECT, its one repeat


def test_the_guard_re_ask_that_changes_the_statement_continues_the_flow(sql_env):
    flow = build_sql_flow(schema=True, guard=True, resample_repeats=False)
    bad = "Thought: t\nAction: execute[SELECT nope FROM book]"
    fixed = "Thought: t\nAction: execute[SELECT count(*) FROM book]"
    r, srv = _run(flow, sql_env, [bad, bad, fixed, "Thought: ok\nAction: submit"], StateFlowView())
    assert r.path == ["Init", "Solve", "Error", "Verify", "End"]
    assert [q["temperature"] for q in srv.requests] == [0.0, 0.0, 0.7, 0.0]
    assert episode_vars(r).turns == 3


def test_the_column_order_rule_reaches_solve_only_in_the_tuned_variant():
    bench = default_registry().get("intercode-sql")
    tuned, _ = build_method("sf_agent_tuned", bench)
    plain, _ = build_method("sf_agent_schema", bench)
    assert "order the question names them" in tuned.states["Solve"].instruction
    assert "order the question names them" not in plain.states["Solve"].instruction


def test_the_lean_variant_drops_every_worked_example_and_keeps_the_rules():
    bench = default_registry().get("intercode-sql")
    lean, _ = build_method("sf_agent_lean", bench)
    tuned, _ = build_method("sf_agent_tuned", bench)
    for name in ("Solve", "Verify", "Error"):
        with_example, without = tuned.states[name].instruction, lean.states[name].instruction
        assert "of this step" in with_example and "Question:" in with_example
        assert "of this step" not in without and "Question:" not in without and "Thought:" not in without
        assert without.strip() == with_example[with_example.index("Now your step") :].strip()
    assert lean.states.keys() == tuned.states.keys()


@pytest.mark.parametrize("view", ["stateflow", "sf_agent"])
def test_the_paper_flow_without_examples_differs_from_it_only_by_the_examples(view):
    bench = default_registry().get("intercode-sql")
    paper, paper_view = build_method(view, bench)
    plain, plain_view = build_method(f"{view}_no_examples", bench)
    assert type(plain_view) is type(paper_view) and plain.states.keys() == paper.states.keys()
    assert [(r.sources, r.target) for r in plain.transitions] == [(r.sources, r.target) for r in paper.transitions]
    dropped = 0
    for name, state in paper.states.items():
        with_example, without = state.instruction, plain.states[name].instruction
        assert "of this step" not in without and "telescope" not in without
        if "of this step" in with_example:
            dropped += 1
            assert without.strip() == with_example[with_example.index("Now your step") :].strip()
        else:
            assert without == with_example
    assert dropped >= 3  # Observe, Solve, Verify and Error carry one in the paper's flow


def test_the_vote_variant_runs_candidates_read_only_and_executes_the_majority(sql_env):
    flow, view = build_method("sf_agent_vote", default_registry().get("intercode-sql"))
    gold = sql_env.task(0).gold
    candidates = [
        "Thought: t\nAction: execute[SELECT nope FROM book]",  # an error: no vote
        f"Thought: t\nAction: execute[{gold}]",
        "Thought: t\nAction: execute[SELECT 7]",
        f"Thought: t\nAction: execute[{gold} ]",  # the same result as the gold: two votes
        "Thought: t\nAction: execute[USE mysql]",  # read-only session of its own: harmless
    ]
    r, srv = _run(flow, sql_env, [*candidates, "Thought: ok\nAction: submit"], view)
    assert r.path == ["Init", "Solve", "Verify", "End"]
    assert [q["temperature"] for q in srv.requests[:5]] == [0.7] * 5 and len(srv.requests) == 6
    episode = episode_vars(r)
    assert episode.reward == 1.0 and episode.turns == 2  # the schema and the winner; candidates are free
    won = [s for s in r.steps if s.detail.get("won")]
    assert [(s.output, s.detail["votes"]) for s in won] == [("llm[candidate 1]", 2)]


def test_the_repair_variant_submits_the_first_select_that_runs_and_repairs_failures(sql_env):
    flow, view = build_method("sf_agent_repair", default_registry().get("intercode-sql"))
    assert "Verify" not in flow.states
    gold = sql_env.task(0).gold
    replies = ["Thought: t\nAction: execute[SELECT nope FROM book]", f"Thought: fix\nAction: execute[{gold}]"]
    r, srv = _run(flow, sql_env, replies, view)
    assert r.path == ["Init", "Solve", "Error", "Submit", "End"]
    assert len(srv.requests) == 2  # nobody is asked whether to submit
    episode = episode_vars(r)
    assert episode.reward == 1.0 and (episode.turns, episode.failed) == (3, 1)


def test_the_episode_reader_refuses_a_run_without_a_reset_sql_environment(sql_env):
    from types import SimpleNamespace

    from stateflow.envs.sql.readonly import EpisodeReader

    reader = EpisodeReader()
    with pytest.raises(TypeError, match="SQL environment after reset"):
        reader(SimpleNamespace(env=None), "SELECT 1")
    with pytest.raises(TypeError, match="SQL environment after reset"):
        reader(SimpleNamespace(env=sql_env), "SELECT 1")  # not reset yet
    sql_env.reset(0)
    assert reader(SimpleNamespace(env=sql_env), "SELECT count(*) FROM book") == ((10,),)


def test_oneshot_keys_lists_the_foreign_keys_under_the_schema(sql_env):
    flow, view = build_method("oneshot_keys", default_registry().get("intercode-sql"))
    r, srv = _run(flow, sql_env, [f"Thought: t\nAction: execute[{sql_env.task(0).gold}]"], view)
    prompt = "\n".join(m["content"] for m in srv.requests[0]["messages"])
    joins = prompt.split("Foreign keys (how the tables join):\n", 1)[1].splitlines()[:3]
    assert joins == [
        "book.author_id = author.author_id",
        "loan.book_id = book.book_id",
        "loan.member_id = member.member_id",
    ]
    episode = episode_vars(r)
    assert episode.reward == 1.0 and episode.turns == 2  # the key lookup is part of the set-up turn


def test_oneshot_direct_asks_for_the_statement_only_and_constrains_it(sql_env):
    from stateflow.tasks.kit.grammar import ACTION_ONLY_GBNF

    flow, view = build_method("oneshot_direct", default_registry().get("intercode-sql"), grammar=True)
    r, srv = _run(flow, sql_env, [f"Action: execute[{sql_env.task(0).gold}]"], view)
    request = srv.requests[0]
    assert request["grammar"] == ACTION_ONLY_GBNF
    instruction = request["messages"][-1]["content"]
    assert instruction.endswith("Reply with one line and nothing else: Action: execute[<the statement>].")
    assert "Thought" not in instruction
    assert episode_vars(r).reward == 1.0


def test_the_direct_variant_asks_for_actions_only_and_repairs_a_failure(sql_env):
    from stateflow.tasks.kit.grammar import ACTION_GBNF

    flow, view = build_method("sf_agent_direct", default_registry().get("intercode-sql"), grammar=True)
    assert "Thought" not in flow.system_message and "exactly one line" in flow.system_message
    gold = sql_env.task(0).gold
    r, srv = _run(flow, sql_env, ["Action: execute[SELECT nope FROM book]", f"Action: execute[{gold}]"], view)
    assert r.path == ["Init", "Solve", "Error", "Submit", "End"]
    assert [q["grammar"] for q in srv.requests] == [ACTION_GBNF, ACTION_GBNF]
    assert not any("Thought:" in m["content"] for q in srv.requests for m in q["messages"])
    assert episode_vars(r).reward == 1.0


def test_the_fix_variant_error_never_submits_a_failed_statement(sql_env):
    """Error's grammar admits only execute, and a submit reply is sampled again, warmer."""
    from stateflow.tasks.kit.grammar import ACTION_GBNF, ACTION_ONLY_GBNF

    flow, view = build_method("sf_agent_fix", default_registry().get("intercode-sql"), grammar=True)
    gold = sql_env.task(0).gold
    replies = ["Action: execute[SELECT nope FROM book]", "Action: submit", f"Action: execute[{gold}]"]
    r, srv = _run(flow, sql_env, replies, view)
    assert r.path == ["Init", "Solve", "Error", "Submit", "End"]
    assert [q["grammar"] for q in srv.requests] == [ACTION_GBNF, ACTION_ONLY_GBNF, ACTION_ONLY_GBNF]
    assert srv.requests[2]["temperature"] > srv.requests[1]["temperature"]  # the submit was resampled
    assert any("Do not submit now" in m["content"] for m in srv.requests[1]["messages"])  # Error's instruction
    assert episode_vars(r).reward == 1.0


def test_the_hint_variant_error_may_still_submit(sql_env):
    """The switch is what changes the outcome: without it, Error's submit ends the episode at 0."""
    flow, view = build_method("sf_agent_hint", default_registry().get("intercode-sql"))
    r, srv = _run(flow, sql_env, ["Action: execute[SELECT nope FROM book]", "Action: submit"], view)
    assert len(srv.requests) == 2 and episode_vars(r).reward == 0.0


def test_error_executes_only_needs_an_error_state():
    from stateflow.tasks.sql.levers import build_sql_flow
    from stateflow.tasks.sql.transforms import error_executes_only

    with pytest.raises(ValueError, match="no Error state"):
        error_executes_only(build_sql_flow(error=False))
    flow = build_sql_flow(schema=True, error_submits=False)
    retry = [o.retry_when for o in flow.states["Error"].outputs if isinstance(o, LLM)]
    assert [f.__name__ for f in retry] == ["submits_or_repeats_last_action"]


def test_oneshot_direct_values_shows_frequent_values_of_text_columns_only(sql_env):
    flow, view = build_method("oneshot_direct_values", default_registry().get("intercode-sql"))
    r, srv = _run(flow, sql_env, [f"Action: execute[{sql_env.task(0).gold}]"], view)
    prompt = "\n".join(m["content"] for m in srv.requests[0]["messages"])
    book = next(line for line in prompt.splitlines() if line.startswith("book("))
    assert book.startswith("book(book_id int, title varchar: '")  # ints get no values
    assert book.endswith("genre varchar: 'novel'/'history'/'poetry')")  # most frequent first, ties by value
    author = next(line for line in prompt.splitlines() if line.startswith("author("))
    assert "country varchar: 'Italy'/'Nigeria'/'Russia'" in author  # NULL is not a value
    assert episode_vars(r).reward == 1.0 and episode_vars(r).turns == 2  # still one set-up turn


def test_describe_schema_leaves_out_long_values_and_quotes_the_rest():
    from stateflow.tasks.kit.tools import MAX_VALUE_CHARS, describe_schema

    from stateflow.context import Context
    from stateflow.messages import History

    class Db:  # the three statements describe_schema sends, answered from a table with one text column
        def step(self, sql):
            if sql == "SHOW TABLES":
                return [("t",)], 0, False, {"action_executed": True}
            if sql.startswith("DESC"):
                return [("id", "int(11)"), ("note", "varchar(200)")], 0, False, {"action_executed": True}
            return [("x" * (MAX_VALUE_CHARS + 1),), ("O'Hara",)], 0, False, {"action_executed": True}

    ctx = Context(task="q", history=History(), env=Db())
    text = describe_schema(values=2).fn(ctx).content
    assert text.splitlines()[1] == "t(id int, note varchar: 'O''Hara')"
    with pytest.raises(ValueError, match="values"):
        describe_schema(values=-1)


def test_without_thoughts_refuses_a_system_message_it_cannot_rewrite():
    from stateflow.tasks.sql.levers import build_sql_flow
    from stateflow.tasks.sql.transforms import without_thoughts

    from stateflow import Flow

    flow = build_sql_flow(schema=True)
    edited = Flow(
        flow.name,
        initial=flow.states[flow.initial],
        states=list(flow.states.values()),
        transitions=flow.transitions,
        system_message="Answer in JSON.",
    )
    with pytest.raises(ValueError, match="two lines"):
        without_thoughts(edited)
    with pytest.raises(ValueError, match="schema"):
        build_sql_flow(thoughts=False)


def test_oneshot_direct_ddl_shows_each_table_as_a_create_table_line(sql_env):
    flow, view = build_method("oneshot_direct_ddl", default_registry().get("intercode-sql"))
    r, srv = _run(flow, sql_env, [f"Action: execute[{sql_env.task(0).gold}]"], view)
    prompt = "\n".join(m["content"] for m in srv.requests[0]["messages"])
    schema = prompt.split("The database:\n", 1)[1].splitlines()[:4]
    book = "CREATE TABLE book (book_id int, title varchar, author_id int, year int, pages int, genre varchar);"
    assert schema[1] == book
    assert all(line.startswith("CREATE TABLE ") and line.endswith(");") for line in schema)
    assert "Tables and their columns" not in prompt
    assert episode_vars(r).reward == 1.0


def test_prompt_vote_asks_three_differently_prompted_answers_and_the_majority_result_is_submitted(sql_env):
    from stateflow.tasks.kit.grammar import ACTION_GBNF, THOUGHT_ACTION_GBNF

    flow, view = build_method("sf_agent_prompt_vote", default_registry().get("intercode-sql"), grammar=True)
    gold = sql_env.task(0).gold
    replies = [
        "Action: execute[SELECT 12345]",  # own: a wrong answer alone
        f"Action: execute[{gold.replace('SELECT ', 'SELECT  ', 1)}]",  # without values: the gold result
        f"Thought: t\nAction: execute[{gold}]",  # with a Thought line: the same result, written differently
    ]
    r, srv = _run(flow, sql_env, replies, view)
    assert len(srv.requests) == 3 and r.path[-2:] == ["Submit", "End"]
    texts = ["\n".join(m["content"] for m in q["messages"]) for q in srv.requests]
    assert "genre varchar: 'novel'" in texts[0] and "Every reply is exactly one line" in texts[0]
    assert "genre varchar:" not in texts[1] and "Every reply is exactly one line" in texts[1]
    assert "genre varchar:" not in texts[2] and "Every reply has exactly two lines" in texts[2]
    assert "genre varchar)" in texts[1] and "genre varchar)" not in texts[0]  # the values went, the column stayed
    grammars = [q.get("grammar") for q in srv.requests]
    assert grammars == [ACTION_GBNF, ACTION_GBNF, THOUGHT_ACTION_GBNF]
    winner = r.history.last("llm")
    assert winner.meta["vote"]["winner"] == 1 and winner.meta["vote"]["per_candidate"] == [1, 2, 2]
    assert episode_vars(r).reward == 1.0 and episode_vars(r).turns == 2  # schema + winner (candidates are read-only)


def test_prompt_vote_does_not_ask_the_thought_answer_when_the_first_two_agree(sql_env):
    flow, view = build_method("sf_agent_prompt_vote", default_registry().get("intercode-sql"), grammar=True)
    gold = sql_env.task(0).gold
    replies = [f"Action: execute[{gold}]", f"Action: execute[{gold.replace('SELECT ', 'SELECT  ', 1)}]"]
    r, srv = _run(flow, sql_env, replies, view)
    assert len(srv.requests) == 2  # a third request would fail: the scripted server has no reply left
    assert all("Every reply is exactly one line" in q["messages"][0]["content"] for q in srv.requests)
    tally_ = r.history.last("llm").meta["vote"]
    assert tally_["asked"] == 2 and tally_["k"] == 3 and tally_["winner"] == 0
    assert episode_vars(r).reward == 1.0 and r.path[-2:] == ["Submit", "End"]


def test_wide_vote_asks_up_to_five_variants_until_two_results_agree(sql_env):
    from stateflow.tasks.kit.grammar import ACTION_GBNF, THOUGHT_ACTION_GBNF

    flow, view = build_method("sf_agent_wide_vote", default_registry().get("intercode-sql"), grammar=True)
    gold = sql_env.task(0).gold
    replies = [
        "Action: execute[SELECT 12345]",  # own: a wrong answer alone
        "Action: execute[SELECT nope FROM book]",  # without values: fails to run, never counts
        "Thought: t\nAction: execute[SELECT 678]",  # Thought, no values: another lone answer
        f"Thought: t\nAction: execute[{gold}]",  # Thought with values: the gold result
        f"Action: execute[{gold.replace('SELECT ', 'SELECT  ', 1)}]",  # own, sampled: agrees with it
    ]
    r, srv = _run(flow, sql_env, replies, view)
    assert len(srv.requests) == 5 and r.path[-2:] == ["Submit", "End"]
    texts = ["\n".join(m["content"] for m in q["messages"]) for q in srv.requests]
    assert "genre varchar: 'novel'" in texts[3] and "Every reply has exactly two lines" in texts[3]
    assert "genre varchar: 'novel'" in texts[4] and "Every reply is exactly one line" in texts[4]
    assert [q.get("grammar") for q in srv.requests][2:] == [THOUGHT_ACTION_GBNF, THOUGHT_ACTION_GBNF, ACTION_GBNF]
    assert srv.requests[4].get("temperature") == 0.7 and srv.requests[0].get("temperature") != 0.7
    tally_ = r.history.last("llm").meta["vote"]
    assert tally_["winner"] == 3 and tally_["per_candidate"] == [1, 0, 1, 2, 2] and tally_["asked"] == 5
    assert episode_vars(r).reward == 1.0

    # the usual case costs what the three-way vote costs: two agreeing answers end the vote
    r, srv = _run(flow, sql_env, [f"Action: execute[{gold}]", f"Action: execute[{gold}]"], view)
    assert len(srv.requests) == 2 and r.history.last("llm").meta["vote"]["asked"] == 2
    with pytest.raises(ValueError, match="lever 'wide_vote' needs 'answer_vote'"):
        build_sql_flow(schema=True, thoughts=False, values=3, wide_vote=True)


def test_error_vote_votes_the_repair_after_every_solve_candidate_failed(sql_env):
    flow, view = build_method("sf_agent_error_vote", default_registry().get("intercode-sql"), grammar=True)
    gold = sql_env.task(0).gold
    fail = "Action: execute[SELECT nope FROM book]"
    replies = [
        *[fail] * 3,  # Solve: all three variants fail to run, so the first (failed) one is executed
        "Action: execute[SELECT 12345]",  # Error, own: a lone answer
        f"Action: execute[{gold}]",  # no values: the gold result
        f"Thought: t\nAction: execute[{gold.replace('SELECT ', 'SELECT  ', 1)}]",  # Thought: agrees
    ]
    r, srv = _run(flow, sql_env, replies, view)
    assert len(srv.requests) == 6
    assert r.path[:3] == ["Init", "Solve", "Error"] and r.path[-2:] == ["Submit", "End"]
    votes = [m.meta["vote"] for m in r.history if m.kind == "llm" and "vote" in m.meta]
    assert [(v["asked"], v["errors"]) for v in votes] == [(3, 3), (3, 0)]
    assert votes[1]["winner"] == 1 and votes[1]["per_candidate"] == [1, 2, 2]
    assert episode_vars(r).reward == 1.0
    with pytest.raises(ValueError, match="levers 'error_vote' and 'no_error' conflict"):
        build_sql_flow(schema=True, thoughts=False, values=3, answer_vote=True, error_vote=True, error=False)


def test_strip_values_gives_the_listing_without_values_and_leaves_other_text_alone(sql_env):
    from stateflow.tasks.kit.tools import describe_schema, strip_values

    from stateflow.context import Context
    from stateflow.messages import History

    sql_env.reset(0)
    ctx = Context(task="q", history=History(), env=sql_env)
    with_values, plain = describe_schema(values=3).fn(ctx).content, describe_schema().fn(ctx).content
    assert with_values != plain and strip_values(with_values) == plain
    question = "Question: which books are tagged 'novel'/'poetry'? Answer: 'x'"
    assert strip_values(question) == question
    with pytest.raises(ValueError, match="lever 'answer_vote' needs 'values'"):
        build_sql_flow(schema=True, thoughts=False, answer_vote=True)
    from stateflow.tasks.sql.votes import with_answer_vote

    with pytest.raises(ValueError, match="already have Thought lines"):
        with_answer_vote(build_sql_flow(schema=True, values=3))
    with pytest.raises(ValueError, match="no state 'Verify'"):
        with_answer_vote(
            build_sql_flow(schema=True, values=3, thoughts=False, verify_then_submit=False), state="Verify"
        )


_DESC, _FAIL1, _FAIL2 = (
    "Thought: t\nAction: execute[DESC book]",
    "Thought: t\nAction: execute[SELECT nope FROM book]",
    "Thought: t\nAction: execute[SELECT nada FROM book]",
)


@pytest.mark.parametrize("method", ["stateflow_no_examples_budget", "sf_agent_budget"])
def test_the_error_budget_ends_the_episode_when_a_statement_fails_after_error_answered_once(sql_env, method):
    flow, view = build_method(method, default_registry().get("intercode-sql"))
    r, srv = _run(flow, sql_env, [_DESC, _FAIL1, _FAIL2], view)
    assert r.path == ["Init", "Observe", "Solve", "Error", "End"]
    assert len(srv.requests) == 3  # Error was asked once
    episode = episode_vars(r)  # nothing submitted: the runner scores the last observation, as upstream
    assert (episode.done, episode.failed, episode.last_action) == (False, 2, "SELECT nada FROM book")


def test_without_the_budget_the_same_replies_enter_error_again(sql_env):
    gold = sql_env.task(0).gold
    flow, view = build_method("stateflow_no_examples", default_registry().get("intercode-sql"))
    replies = [_DESC, _FAIL1, _FAIL2, f"Thought: t\nAction: execute[{gold}]", "Action: submit"]
    r, _ = _run(flow, sql_env, replies, view)
    assert r.path == ["Init", "Observe", "Solve", "Error", "Error", "Verify", "End"]
    assert episode_vars(r).reward == 1.0


def test_the_error_budget_lets_a_repair_that_runs_continue(sql_env):
    gold = sql_env.task(0).gold
    flow, view = build_method("stateflow_no_examples_budget", default_registry().get("intercode-sql"))
    r, _ = _run(flow, sql_env, [_DESC, _FAIL1, f"Thought: t\nAction: execute[{gold}]", "Action: submit"], view)
    assert r.path == ["Init", "Observe", "Solve", "Error", "Verify", "End"]
    assert episode_vars(r).reward == 1.0


def test_the_error_budget_is_a_rule_ahead_of_the_rule_into_error_and_refuses_bad_input():
    from stateflow.tasks.sql.transforms import with_error_budget

    rules = [str(r) for r in build_sql_flow(error_replies=2).transitions]
    into_error = next(i for i, r in enumerate(rules) if r.startswith("ANY -> Error"))
    assert rules[into_error - 1].startswith("ANY -> End [(") and "2+ replies in Error" in rules[into_error - 1]
    with pytest.raises(ValueError, match="replies must be >= 1"):
        with_error_budget(build_sql_flow(), replies=0)
    with pytest.raises(ValueError, match="no Error state"):
        with_error_budget(build_sql_flow(error=False))
    with pytest.raises(ValueError, match="levers 'error_budget' and 'no_error' conflict"):
        build_sql_flow(error=False, error_replies=1)


def test_vote_shots_shows_the_worked_answers_to_every_candidate_before_the_rules(sql_env):
    flow, view = build_method("sf_agent_vote_shots", default_registry().get("intercode-sql"), grammar=True)
    gold = sql_env.task(0).gold
    replies = [f"Action: execute[{gold}]", f"Action: execute[{gold}]"]  # the first two agree
    r, srv = _run(flow, sql_env, replies, view)
    assert len(srv.requests) == 2 and episode_vars(r).reward == 1.0
    for q in srv.requests:
        text = "\n".join(m["content"] for m in q["messages"])
        shots, rules = text.index("Examples of this step"), text.index("Now your step")
        assert shots < rules and text.count("Question: ") == 4  # the four worked answers
        assert "NOT IN (SELECT author_id FROM book)" in text


def test_solve_examples_needs_one_line_replies_without_the_papers_examples():
    with pytest.raises(ValueError, match="needs 'no_examples'; lever 'solve_examples' needs 'no_thoughts'"):
        build_sql_flow(schema=True, solve_examples=True)
    with pytest.raises(ValueError, match="lever 'solve_examples' needs 'no_thoughts'"):
        build_sql_flow(schema=True, examples=False, solve_examples=True)  # Thought lines still on
    flow = build_sql_flow(schema=True, examples=False, thoughts=False, solve_examples=True)
    assert flow.states["Solve"].instruction.startswith("Examples of this step, on a different database")


def test_vote_fewest_tells_every_candidate_to_join_only_when_a_column_is_missing(sql_env):
    flow, view = build_method("sf_agent_vote_fewest", default_registry().get("intercode-sql"), grammar=True)
    rule = "when one table holds every column you need, do not join another"
    assert rule in flow.states["Solve"].instruction and rule not in flow.states["Error"].instruction
    gold = sql_env.task(0).gold
    replies = [f"Action: execute[{gold}]", "Action: execute[SELECT 1]", f"Action: execute[{gold}]"]  # 2 of 3 agree
    r, srv = _run(flow, sql_env, replies, view)
    assert len(srv.requests) == 3 and episode_vars(r).reward == 1.0
    for q in srv.requests:  # the own answer, the one without values, the one with a Thought line
        assert rule in "\n".join(m["content"] for m in q["messages"])
    assert rule not in build_sql_flow(schema=True).states["Solve"].instruction

"""Runtime behaviour: judges, bounds, failures, real HTTP through AutoGen, record/replay."""

from __future__ import annotations

import warnings

import pytest

from stateflow import (
    LLM,
    Flow,
    Judge,
    LLMError,
    ModelAssignment,
    ModelProfile,
    NoTransitionError,
    Prompt,
    State,
    Transition,
    last_contains,
    run,
)
from stateflow.backends.autogen_clients import ConstraintWarning
from stateflow.backends.cassette import Cassette, CassetteMiss
from stateflow.backends.scripted import ScriptedLLM
from stateflow.testing.fake_openai import FakeOpenAIServer
from tests.core.helpers import plan_act_flow, scripted


def _judge_flow(judge: Judge) -> Flow:
    solve = State("Solve", Prompt("solve it"), LLM())
    done = State("Done", final=True)
    retry = State("Retry", Prompt("try again"), LLM())
    return Flow(
        "judged",
        initial=solve,
        transitions=[
            Transition(solve, done, when=judge.answer_is("yes")),
            Transition(solve, retry, when=judge.answer_is("no")),
            Transition(solve, retry),
            Transition(retry, done),
        ],
    )


def test_llm_judge_picks_the_branch_with_one_call_per_decision():
    judge = Judge("Is the task solved?", profile="judge")
    solver = ScriptedLLM(["answer 42"])
    verdicts = ScriptedLLM(["Yes, it is."])
    r = run(
        _judge_flow(judge),
        "T",
        models=ModelAssignment.of(scripted("main"), profiles=[scripted("judge")]),
        scripts={"main": solver, "judge": verdicts},
    )
    assert r.path == ["Solve", "Done"]
    assert len(verdicts.requests) == 1  # shared by both rules
    judge_steps = [s for s in r.steps if s.output.startswith("judge")]
    assert judge_steps[0].detail["answer"] == "yes" and judge_steps[0].message is None
    assert "Is the task solved?" in verdicts.requests[0].messages[-1]["content"]
    assert "answer 42" in verdicts.requests[0].messages[-1]["content"]
    assert all("Is the task solved" not in m.content for m in r.history)  # not part of the history


def test_llm_judge_no_branch_and_unparseable_answer():
    judge = Judge("Is the task solved?", profile="judge")
    r = run(
        _judge_flow(judge),
        "T",
        models=ModelAssignment.of(scripted("main"), profiles=[scripted("judge")]),
        scripts={"main": ScriptedLLM(["a", "b"]), "judge": ScriptedLLM(["no"])},
    )
    assert r.path == ["Solve", "Retry", "Done"]
    r = run(
        _judge_flow(judge),
        "T",
        models=ModelAssignment.of(scripted("main"), profiles=[scripted("judge")]),
        scripts={"main": ScriptedLLM(["a", "b"]), "judge": ScriptedLLM(["perhaps"])},
    )
    assert r.path == ["Solve", "Retry", "Done"]  # fell through to the unconditional rule
    assert [s.detail.get("answer") for s in r.steps if s.detail] == [None]


def test_transition_bound_ends_the_run():
    r = run(
        plan_act_flow(max_transitions=2),
        "T",
        models=scripted(),
        scripts={"fake": ScriptedLLM(["x"], cycle=True)},
        vars={"limit": 99},
    )
    assert r.stop_reason == "max_transitions" and len(r.transitions) == 2 and r.exit_state == "Act"


def test_no_matching_rule_raises_with_context_and_keeps_the_partial_result():
    ask = State("Ask", Prompt("p"), LLM())
    end = State("End", final=True)
    f = Flow("strict", initial=ask, transitions=[Transition(ask, end, when=last_contains("DONE"))])
    with pytest.raises(NoTransitionError) as exc:
        run(f, "T", models=scripted(), scripts={"fake": ScriptedLLM(["not yet"])})
    err = exc.value
    assert err.state == "Ask" and err.last_message == "not yet"
    assert "last message contains 'DONE'" in str(err)
    assert err.result.history[-1].content == "not yet"  # nothing recorded is lost
    r = run(f, "T", models=scripted(), scripts={"fake": ScriptedLLM(["not yet"])}, raise_errors=False)
    assert r.stop_reason == "error" and "NoTransitionError" in r.error


def test_real_http_through_autogen_with_retries_on_429_and_503():
    with FakeOpenAIServer(lambda model, msgs, body: f"{model} says hi", failures=[429, 503]) as srv:
        prof = ModelProfile(name="srv", model="m1", base_url=srv.url, api_key_env=None, price_per_1k=(1, 1))
        ask = State("Ask", Prompt("p"), LLM())
        f = Flow("http", initial=ask, transitions=[Transition(ask, State("End", final=True))])
        r = run(f, "hello", models=prof)
    assert r.history[-1].content == "m1 says hi"
    assert len(srv.requests) == 3  # two injected failures, then success
    body = srv.requests[-1]
    assert body["model"] == "m1" and body["temperature"] == 0.0
    assert [m["content"] for m in body["messages"]] == ["hello", "p"]
    u = r.steps[-1].usage
    assert u.prompt_tokens == 2 and u.completion_tokens == 3 and u.cost == pytest.approx(5 / 1000)


def test_persistent_http_failure_becomes_llm_error():
    with FakeOpenAIServer(lambda *a: "never", failures=[500] * 10) as srv:
        prof = ModelProfile(name="srv", model="m", base_url=srv.url, api_key_env=None, timeout=5, max_retries=1)
        ask = State("Ask", Prompt("p"), LLM())
        f = Flow("http", initial=ask, transitions=[Transition(ask, State("End", final=True))])
        with pytest.raises(LLMError) as exc:
            run(f, "hello", models=prof)
    assert exc.value.profile == "srv" and exc.value.state == "Ask"


def test_refused_connection_becomes_llm_error():
    prof = ModelProfile(
        name="dead", model="m", base_url="http://127.0.0.1:9/v1", api_key_env=None, timeout=2, max_retries=1
    )
    ask = State("Ask", Prompt("p"), LLM())
    f = Flow("http", initial=ask, transitions=[Transition(ask, State("End", final=True))])
    r = run(f, "hello", models=prof, raise_errors=False)
    assert r.stop_reason == "error" and "dead" in r.error


def _grammar_flow() -> Flow:
    ask = State("Ask", Prompt("p"), LLM(grammar='root ::= "Thought: " [a-z ]{1,20}'))
    return Flow("g", initial=ask, transitions=[Transition(ask, State("End", final=True))])


def test_grammar_is_sent_to_llamacpp_servers_and_warned_about_for_openai():
    with FakeOpenAIServer(lambda *a: "Thought: ok") as srv:
        llamacpp = ModelProfile(name="lc", model="m", provider="llamacpp", base_url=srv.url, api_key_env=None)
        run(_grammar_flow(), "T", models=llamacpp)
        assert srv.requests[-1]["grammar"].startswith("root ::=")
        vllm = ModelProfile(name="vl", model="m", provider="vllm", base_url=srv.url, api_key_env=None)
        run(_grammar_flow(), "T", models=vllm)
        assert srv.requests[-1]["structured_outputs"]["grammar"].startswith("root ::=")
        oai = ModelProfile(name="oa", model="m", provider="openai", base_url=srv.url, api_key_env=None)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            run(_grammar_flow(), "T", models=oai)
        assert "grammar" not in srv.requests[-1]
        assert sum(issubclass(w.category, ConstraintWarning) for w in caught) == 1


def test_cassette_records_then_replays_offline_and_exactly(tmp_path):
    path = tmp_path / "c.jsonl"
    replies = iter(["plan A", "act 1", "act 2", "act 3"])
    with FakeOpenAIServer(lambda *a: next(replies)) as srv:
        prof = ModelProfile(name="srv", model="m", base_url=srv.url, api_key_env=None)
        recorded = run(plan_act_flow(), "T", models=prof, cassette=Cassette(path, "record"))
    # The server is gone: replay must not touch the network.
    replayed = run(plan_act_flow(), "T", models=prof, cassette=Cassette(path, "replay"))
    assert [m.content for m in replayed.history] == [m.content for m in recorded.history]
    assert replayed.usage().prompt_tokens == recorded.usage().prompt_tokens
    with pytest.raises(CassetteMiss, match="no recorded response"):
        run(plan_act_flow(), "A DIFFERENT TASK", models=prof, cassette=Cassette(path, "replay"))


def test_cassette_missing_file_is_a_clear_error(tmp_path):
    with pytest.raises(CassetteMiss, match="not found"):
        Cassette(tmp_path / "none.jsonl", "replay")


def test_two_tools_with_the_same_name_stay_distinct():
    # Regression: the function map was keyed by tool name, so the second tool replaced the first.
    from stateflow import Tool

    first = State("First", Tool(lambda ctx: "from first", "run"))
    second = State("Second", Tool(lambda ctx: "from second", "run"))
    end = State("End", final=True)
    f = Flow("tools", initial=first, transitions=[Transition(first, second), Transition(second, end)])
    r = run(f, "T", models=scripted(), scripts={"fake": ScriptedLLM([])})
    assert [m.content for m in r.history][1:] == ["from first", "from second"]


def test_sampling_fields_are_sent_per_call_and_can_change_between_calls():
    # Regression: AutoGen lets config-entry fields win over call arguments, so a per-call
    # temperature (retry) or grammar was silently dropped when the profile also set one.
    from stateflow import Tool

    calls = iter(["Action: execute[X]", "Action: execute[Y]"])
    with FakeOpenAIServer(lambda *a: next(calls)) as srv:
        prof = ModelProfile(
            name="lc",
            model="m",
            provider="llamacpp",
            base_url=srv.url,
            api_key_env=None,
            temperature=0.0,
            max_tokens=50,
            stop=("Observation:",),
            extra_body={"top_k": 5},
        )
        ask = State(
            "Ask",
            Prompt("p"),
            LLM(
                grammar=lambda ctx: f'root ::= "{ctx.state}"',
                stop=("END",),
                retry_when=lambda ctx, text: "X" in text,
                retry_temperature=0.9,
            ),
            Tool(lambda ctx: "ok", "noop"),
        )
        f = Flow("per-call", initial=ask, transitions=[Transition(ask, State("End", final=True))])
        r = run(f, "T", models=prof)
    first, second = srv.requests
    assert (first["temperature"], second["temperature"]) == (0.0, 0.9)
    assert first["max_tokens"] == 50 and first["stop"] == ["Observation:", "END"]
    assert first["grammar"] == 'root ::= "Ask"' and first["top_k"] == 5
    assert r.history[2].content == "Action: execute[Y]"  # the discarded reply is not in the history
    discarded = [s for s in r.steps if s.output.endswith("[discarded]")]
    assert len(discarded) == 1 and discarded[0].usage is not None and discarded[0].detail["reply"].endswith("[X]")
    assert r.usage().calls == 2  # both calls are paid for and traced

"""Parallel branches with a declared merge (issue 45, part 2)."""

from __future__ import annotations

import json
import threading
import time

import pytest
from pydantic import BaseModel

from stateflow import (
    LLM,
    BranchResult,
    Flow,
    Kind,
    ModelProfile,
    Parallel,
    ParallelBranchError,
    Prompt,
    State,
    Tool,
    ToolResult,
    Transition,
    run,
)
from stateflow.backends.scripted import ScriptedLLM
from stateflow.fingerprint import flow_fingerprint
from stateflow.profiles import ModelAssignment
from stateflow.testing.fake_openai import FakeOpenAIServer
from tests.core.helpers import scripted

NAP = 0.3


def _sleeper(name: str):
    def nap(ctx) -> ToolResult:
        time.sleep(NAP)
        return ToolResult(f"{name} done", {"thread": threading.current_thread().name})

    return Tool(nap, name)


def _joined(ctx, results: list[BranchResult]) -> str:
    return " | ".join(f"{r.name}={r.content}" for r in results)


def _one_state(par: Parallel) -> Flow:
    fan, end = State("Fan", par), State("End", final=True)
    return Flow("fan", initial=fan, transitions=[Transition(fan, end)])


def test_branches_run_at_once_and_the_trace_shows_them_overlapping():
    par = Parallel(_sleeper("a"), _sleeper("b"), _sleeper("c"), merge=_joined)
    r = run(_one_state(par), "T", models=scripted(), telemetry=False)
    branches = [s for s in r.steps if s.output.startswith("parallel[")]
    assert [s.detail["branch"] for s in branches] == ["a", "b", "c"]
    merge = next(s for s in r.steps if s.output == "parallel")
    # wall time of the fan-out below the sum of the branches' times (each sleeps NAP seconds)
    assert merge.detail["branches_s"] >= 3 * NAP
    assert merge.detail["wall_s"] < merge.detail["branches_s"]
    # every pair of branch intervals overlaps
    for x in branches:
        for y in branches:
            assert x.started_at < y.started_at + y.latency_s and y.started_at < x.started_at + x.latency_s
    assert r.history.last().content == "a=a done | b=b done | c=c done"
    assert r.history.last().kind is Kind.TOOL


def test_a_failing_branch_fails_the_state_naming_the_branch_after_all_branches_finished():
    def broken(ctx):
        raise RuntimeError("index offline")

    par = Parallel(_sleeper("a"), Tool(broken, "search"), merge=_joined)
    r = run(_one_state(par), "T", models=scripted(), telemetry=False, raise_errors=False)
    assert r.stop_reason == "error" and r.exit_state == "Fan"
    assert "ParallelBranchError" in r.error and "branch 'search' failed: RuntimeError: index offline" in r.error
    recorded = {s.detail["branch"]: s.detail["ok"] for s in r.steps if s.output.startswith("parallel[")}
    assert recorded == {"a": True, "search": False}  # the sleeping branch was waited for
    with pytest.raises(ParallelBranchError) as exc:
        run(_one_state(par), "T", models=scripted(), telemetry=False)
    assert exc.value.branch == "search" and exc.value.state == "Fan"
    assert isinstance(exc.value.__cause__, RuntimeError)


def test_a_merge_that_takes_failures_decides_instead():
    def broken(ctx):
        raise RuntimeError("index offline")

    def best_effort(ctx, results):
        ok = [r for r in results if r.ok]
        failed = [f"{r.name}: {r.error}" for r in results if not r.ok]
        return ToolResult(f"{len(ok)} ok; failed: {failed}", {"done": True})

    par = Parallel(_sleeper("a"), Tool(broken, "search"), merge=best_effort, merge_failures=True)
    r = run(_one_state(par), "T", models=scripted(), telemetry=False)
    assert r.stop_reason == "final"
    assert r.history.last().content == "1 ok; failed: ['search: RuntimeError: index offline']"


class Guess(BaseModel):
    answer: int


def test_llm_branches_call_the_model_concurrently_on_the_same_history():
    # All three requests must be in flight at once to pass the barrier: sequential calls would
    # leave the first one waiting alone until the barrier's timeout breaks it (a failed branch).
    together = threading.Barrier(3, timeout=20)

    def respond(model, messages, body):
        together.wait()
        if "response_format" in body:
            return json.dumps({"answer": 4})
        return f"{model} says {messages[-1]['content']}"

    ask = State("Ask", Prompt("What is 2+2?"), Parallel(LLM(), LLM(profile="other"), LLM(schema=Guess), merge=_joined))
    end = State("End", final=True)
    flow = Flow("ask", initial=ask, transitions=[Transition(ask, end)])
    with FakeOpenAIServer(respond) as srv:
        fast = ModelProfile(name="fast", model="fast-model", base_url=srv.url, api_key_env=None)
        other = ModelProfile(name="other", model="other-model", base_url=srv.url, api_key_env=None)
        models = ModelAssignment.of(fast, profiles=[other])
        r = run(flow, "T", models=models, telemetry=False)
        asked = [b["messages"] for b in srv.requests]
    assert all(m[-1]["content"] == "What is 2+2?" for m in asked)  # each branch saw the same history
    text = r.history.last().content
    assert "llm=fast-model says What is 2+2?" in text and "llm[other]=other-model says" in text
    assert 'llm#2={"answer": 4}' in text or 'llm#2={"answer":4}' in text
    by_state = r.usage_by_state()["Ask"]
    assert by_state.calls == 3  # each branch's usage is counted once, on its branch step


def test_a_subflow_branch_runs_as_a_nested_run_with_its_own_states():
    draft = State("Draft", Prompt("DRAFT"), LLM())
    done = State("Done", final=True)
    inner = Flow("writer", initial=draft, transitions=[Transition(draft, done)])
    par = Parallel(inner, _sleeper("lookup"), merge=_joined)
    r = run(_one_state(par), "T", models=scripted(), scripts={"fake": ScriptedLLM(["drafted"])}, telemetry=False)
    assert r.stop_reason == "final"
    assert r.history.last().content == "writer=drafted | lookup=lookup done"
    nested = [(s.state, s.output) for s in r.steps if s.state.startswith("Fan.writer.")]
    assert nested == [("Fan.writer.Draft", "prompt"), ("Fan.writer.Draft", "llm")]
    assert r.usage_by_state()["Fan.writer.Draft"].calls == 1


def test_parallel_is_checked_when_defined_and_enters_the_fingerprint():
    with pytest.raises(ValueError, match="at least two branches"):
        Parallel(_sleeper("a"), merge=_joined)
    with pytest.raises(TypeError, match="not an LLM, a Tool or a Flow"):
        Parallel(_sleeper("a"), Prompt("x"), merge=_joined)
    with pytest.raises(ValueError, match="one distinct name per branch"):
        Parallel(_sleeper("a"), _sleeper("b"), merge=_joined, names=["x", "x"])
    assert Parallel(_sleeper("a"), _sleeper("a"), merge=_joined).names == ("a", "a#2")

    def other_merge(ctx, results):
        return ""

    one = flow_fingerprint(_one_state(Parallel(_sleeper("a"), _sleeper("b"), merge=_joined)))
    same = flow_fingerprint(_one_state(Parallel(_sleeper("a"), _sleeper("b"), merge=_joined)))
    other = flow_fingerprint(_one_state(Parallel(_sleeper("a"), _sleeper("b"), merge=other_merge)))
    assert one == same != other


def test_an_unknown_profile_of_a_branch_fails_before_any_call():
    from stateflow import ConfigError

    called: list[str] = []

    def tool(ctx):
        called.append("tool")
        return "x"

    par = Parallel(LLM(profile="nope"), Tool(tool, "t"), merge=_joined)
    with pytest.raises(ConfigError, match="unknown profile 'nope'"):
        run(_one_state(par), "T", models=scripted(), telemetry=False)
    assert called == []


def test_a_replayed_run_gives_each_llm_branch_its_own_recorded_reply():
    # Recording: the first branch answers last, so the log holds [other, fast]. Replay answers
    # from the log without asking: each branch must get its own reply back, not the one that
    # happens to be next in the log (a whatif through a Parallel state would swap them).
    from stateflow.backends.call_log import CallLog

    def respond(model, messages, body):
        if model == "fast-model":
            time.sleep(NAP)
        return f"{model} says hi"

    ask = State("Ask", Prompt("Hi?"), Parallel(LLM(), LLM(profile="other"), merge=_joined))
    flow = Flow("ask", initial=ask, transitions=[Transition(ask, State("End", final=True))])
    with FakeOpenAIServer(respond) as srv:
        fast = ModelProfile(name="fast", model="fast-model", base_url=srv.url, api_key_env=None)
        other = ModelProfile(name="other", model="other-model", base_url=srv.url, api_key_env=None)
        models = ModelAssignment.of(fast, profiles=[other])
        log = CallLog()
        first = run(flow, "T", models=models, telemetry=False, calls=log)
        assert [c.profile for c in log.calls] == ["other", "fast"]
        for _ in range(3):
            asked = len(srv.requests)
            again = CallLog(replay=log.calls)
            replayed = run(flow, "T", models=models, telemetry=False, calls=again)
            assert len(srv.requests) == asked and again.replayed == 2
            assert replayed.history.last().content == first.history.last().content
    assert first.history.last().content == "llm=fast-model says hi | llm[other]=other-model says hi"


def test_calls_made_at_once_are_logged_under_the_state_that_asked():
    from stateflow.backends.call_log import CallLog

    draft = State("Draft", Prompt("DRAFT"), LLM())
    inner = Flow("writer", initial=draft, transitions=[Transition(draft, State("Done", final=True))])
    flow = _one_state(Parallel(inner, LLM(), merge=_joined))
    with FakeOpenAIServer(lambda model, messages, body: "ok") as srv:
        models = ModelAssignment.of(ModelProfile(name="fast", model="m", base_url=srv.url, api_key_env=None))
        for _ in range(5):
            log = CallLog()
            run(flow, "T", models=models, telemetry=False, calls=log)
            assert sorted((c.state, c.asker) for c in log.calls) == [("Draft", "assistant"), ("Fan", "Fan__llm")]

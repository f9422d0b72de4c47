"""Streamed events, asyncio and cancellation (stateflow.live) on the fake OpenAI server over HTTP."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from stateflow import (
    LLM,
    Flow,
    Human,
    Judge,
    MemoryCheckpointer,
    ModelProfile,
    Parallel,
    Prompt,
    RunResult,
    State,
    Tool,
    ToolResult,
    Transition,
    meta_is,
    resume,
    run,
)
from stateflow.errors import LLMError, RunCancelled
from stateflow.events import (
    Interrupted,
    JudgeAnswered,
    JudgeAsked,
    RunFinished,
    StepRecorded,
    TokenDelta,
    ToolCalled,
    ToolReturned,
    TransitionTaken,
    events_of,
)
from stateflow.live import arun, astream, stream
from stateflow.testing.fake_openai import FakeOpenAIServer


def ping(host: str) -> str:
    """Ping a host."""
    return f"{host} is up"


def _profile(url: str) -> ModelProfile:
    return ModelProfile(name="p", model="m", base_url=url, api_key_env=None)


def _tool(ctx) -> ToolResult:
    return ToolResult(f"ran {ctx.history.last().content[:10]}", {"ok": True})


def _flow() -> Flow:
    """Ask (LLM with a native tool) -> Act (a tool state) -> Check (judge) -> End."""
    ask = State("Ask", Prompt("Answer."), LLM(tools=(ping,)))
    act = State("Act", Tool(_tool, "act"))
    check = State("Check", Prompt("Check."), LLM())
    end = State("End", final=True)
    done = Judge("Is it done?", name="done")
    return Flow(
        "live",
        initial=ask,
        states=[ask, act, check, end],
        transitions=[
            Transition(ask, act),
            Transition(act, check),
            Transition(check, end, when=done.answer_is("yes")),
            Transition(check, check),
        ],
    )


def _responder(model, messages, body):
    last = str(messages[-1].get("content") or "")
    if "Question: Is it done?" in last:
        return "yes"
    if last == "Answer.":
        return {"tool_calls": [{"name": "ping", "arguments": {"host": "db"}}]}
    if last.startswith("Check"):
        return "all checked and fine"
    return "the host db is up indeed"


def _comparable(events):
    out = []
    for e in events:
        d = e.to_dict()
        d.pop("at", None)
        d.pop("latency_s", None)
        out.append(d)
    return out


def test_stream_reports_every_kind_of_event_and_equals_the_archived_trace():
    with FakeOpenAIServer(_responder) as srv:
        events = list(stream(_flow(), "check the db", models=_profile(srv.url)))
        assert all(r.get("stream") for r in srv.requests)  # every model call streamed (SSE)
    result = events[-1].result
    assert isinstance(events[-1], RunFinished) and result.exit_state == "End" and result.error is None
    # tokens concatenate to each streamed reply, in the state that streamed it
    tokens = [e for e in events if isinstance(e, TokenDelta)]
    assert "".join(t.text for t in tokens if t.state == "Ask") == "the host db is up indeed"
    assert "".join(t.text for t in tokens if t.state == "Check" and t.agent != "judge_done") == "all checked and fine"
    kinds = [type(e) for e in events]
    for k in (ToolCalled, ToolReturned, JudgeAsked, JudgeAnswered, TransitionTaken, StepRecorded):
        assert k in kinds, k
    called = next(e for e in events if isinstance(e, ToolCalled) and e.tool == "ping")
    assert called.arguments == {"host": "db"} and called.call_id
    answered = next(e for e in events if isinstance(e, JudgeAnswered))
    assert answered.step.detail["answer"] == "yes"
    rules = [e.record.rule for e in events if isinstance(e, TransitionTaken)]
    assert rules == [t.rule for t in result.transitions] and "done says yes" in rules[-1]
    # one event model: the streamed steps are the result's own Step objects, and the trace
    # replays to the same events (tokens aside)
    streamed_steps = [e.step for e in events if hasattr(e, "step")]
    assert len(streamed_steps) == len(result.steps)
    assert all(a is b for a, b in zip(streamed_steps, result.steps, strict=True))
    live = [e for e in events if not isinstance(e, TokenDelta)]
    assert _comparable(live) == _comparable(events_of(result, task="check the db"))


def test_a_paused_run_streams_its_question_then_resumes():
    ask = State("Ask", Prompt("Draft."), LLM())
    approve = State("Approve", Human(prompt="Approve?", defer=True, name="editor"))
    end = State("End", final=True)
    flow = Flow("pause", initial=ask, transitions=[Transition(ask, approve), Transition(approve, end)])
    store = MemoryCheckpointer()
    with FakeOpenAIServer(lambda m, msgs, b: "a draft") as srv:
        events = list(stream(flow, "t", models=_profile(srv.url), checkpointer=store, thread_id="th"))
        interrupt = next(e for e in events if isinstance(e, Interrupted))
        assert interrupt.pending.question.endswith("Approve?") and interrupt.thread_id == "th"
        assert events[-1].result.status == "paused"
        seen = []
        result = resume("th", "yes", checkpointer=store, flow=flow, models=_profile(srv.url), on_event=seen.append)
    assert result.exit_state == "End" and isinstance(seen[-1], RunFinished)
    assert [e.to_dict()["state"] for e in seen[:2]] == ["Approve", "Approve"]  # started, entered


def _live_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("stateflow-run-")]


def test_a_consumer_that_stops_cancels_the_run_and_nothing_keeps_running():
    ask = State("Ask", Prompt("Talk."), LLM())
    end = State("End", final=True)
    flow = Flow("long", initial=ask, transitions=[Transition(ask, end)])
    words = " ".join(f"w{i}" for i in range(200))
    with FakeOpenAIServer(lambda m, msgs, b: words, chunk_delay_s=0.01) as srv:
        events = stream(flow, "t", models=_profile(srv.url))
        for e in events:
            if isinstance(e, TokenDelta):
                break
        events.close()  # the consumer goes away after its first token
        assert _live_threads() == []  # closing waited for the run's thread
        deadline = time.monotonic() + 5
        while srv.active and time.monotonic() < deadline:  # the server sees the stream closed
            time.sleep(0.02)
        assert srv.active == 0 and srv.aborted == 1
        assert len(srv.requests) == 1  # the model was not asked again


def test_arun_runs_concurrently_and_raises_like_run():
    ask = State("Ask", Prompt("Hi."), LLM())
    end = State("End", final=True)
    flow = Flow("hi", initial=ask, transitions=[Transition(ask, end)])

    async def main(url: str) -> list[RunResult]:
        return await asyncio.gather(*[arun(flow, f"task {i}", models=_profile(url)) for i in range(8)])

    with FakeOpenAIServer(lambda m, msgs, b: "hello", latency_s=0.3) as srv:
        results = asyncio.run(main(srv.url))
        assert all(not r.get("stream") for r in srv.requests)  # arun does not stream tokens
    assert [r.history[0].content for r in results] == [f"task {i}" for i in range(8)]
    assert {r.exit_state for r in results} == {"End"}
    with FakeOpenAIServer(lambda m, msgs, b: "x", failures=[400]) as srv:
        with pytest.raises(LLMError):
            asyncio.run(arun(flow, "t", models=_profile(srv.url)))
        srv._failures = [400]
        failed = asyncio.run(arun(flow, "t", models=_profile(srv.url), raise_errors=False))
    assert failed.status == "failed" and "LLMError" in (failed.error or "")
    assert _live_threads() == []


def test_cancelling_an_awaited_run_stops_it_at_its_next_step():
    calls = []

    def slow_tool(ctx) -> ToolResult:
        calls.append(1)
        time.sleep(0.2)
        return ToolResult("ok", {"ok": True})

    loop_ = State("Loop", Tool(slow_tool, "slow"))
    end = State("End", final=True)
    rules = [Transition(loop_, end, when=meta_is("done")), Transition(loop_, loop_)]
    flow = Flow("loop", initial=loop_, transitions=rules, max_transitions=50)

    async def main() -> None:
        task = asyncio.create_task(arun(flow, "t", models=ModelProfile("x", model="x", api_key_env=None)))
        await asyncio.sleep(0.5)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    n = len(calls)
    time.sleep(0.3)
    assert len(calls) == n and n < 10  # stopped, and stays stopped
    assert _live_threads() == []


def test_astream_yields_the_same_events_as_stream():
    async def collect(url: str):
        return [e async for e in astream(_flow(), "check the db", models=_profile(url))]

    with FakeOpenAIServer(_responder) as srv:
        a = asyncio.run(collect(srv.url))
        s = list(stream(_flow(), "check the db", models=_profile(srv.url)))
    assert [e.type for e in a] == [e.type for e in s]
    assert a[-1].result.exit_state == "End"


def test_an_error_in_the_consumer_cancels_the_run():
    seen = []

    def sink(event) -> None:
        seen.append(event)
        if isinstance(event, TransitionTaken):
            raise RunCancelled("enough")

    with FakeOpenAIServer(_responder) as srv:
        result = run(_flow(), "t", models=_profile(srv.url), on_event=sink, raise_errors=False)
    assert result.status == "failed" and "RunCancelled" in (result.error or "")
    assert len(result.transitions) == 1  # the transition was recorded, then the run stopped


def test_tool_calls_and_judge_questions_are_reported_before_they_run():
    seen: list = []
    at_call: list = []

    def watched(ctx) -> ToolResult:
        at_call.append(seen[-1])  # what the consumer had received when the tool started
        return ToolResult("ok", {"ok": True})

    work = State("Work", Tool(watched, "watched"))
    check = State("Check", Prompt("Check."), LLM())
    end = State("End", final=True)
    done = Judge("Is it done?", name="done")
    flow = Flow(
        "early",
        initial=work,
        states=[work, check, end],
        transitions=[
            Transition(work, check),
            Transition(check, end, when=done.answer_is("yes")),
            Transition(check, check),
        ],
    )

    def reply(model, messages, body):
        if "Question: Is it done?" in str(messages[-1].get("content")):
            assert isinstance(seen[-1], JudgeAsked)  # the question was out before the judge's model call
            return "yes"
        return "checked"

    with FakeOpenAIServer(reply) as srv:
        result = run(flow, "t", models=_profile(srv.url), on_event=seen.append)
    assert result.exit_state == "End", result.error
    assert isinstance(at_call[0], ToolCalled) and at_call[0].tool == "watched"
    assert sum(isinstance(e, ToolCalled) for e in seen) == 1  # reported once, not again with its step
    assert sum(isinstance(e, JudgeAsked) for e in seen) == 1
    assert _comparable([e for e in seen if not isinstance(e, TokenDelta)]) == _comparable(events_of(result, task="t"))


def test_cancelling_during_parallel_llm_branches_cancels_the_run_not_a_branch():
    # Both branches stream from their own threads; the consumer's cancel (raised from the sink at
    # the first token) must end the run as cancelled, even when the merge takes failures, and
    # stop every branch's stream.
    def joined(ctx, results):
        return ToolResult(" | ".join(r.content for r in results))

    words = " ".join(f"w{i}" for i in range(200))
    ask = State("Ask", Prompt("Talk."), Parallel(LLM(), LLM(), merge=joined, merge_failures=True))
    flow = Flow("fan", initial=ask, transitions=[Transition(ask, State("End", final=True))])
    seen: list[str] = []

    def sink(event) -> None:
        if isinstance(event, TokenDelta):
            seen.append(event.agent)
            raise RunCancelled("stop")

    with FakeOpenAIServer(lambda m, msgs, b: words, chunk_delay_s=0.01) as srv:
        with pytest.raises(RunCancelled):
            run(flow, "t", models=_profile(srv.url), telemetry=False, on_event=sink)
        deadline = time.monotonic() + 5
        while srv.active and time.monotonic() < deadline:
            time.sleep(0.02)
        assert srv.active == 0 and srv.aborted == 2  # neither branch streamed to its end
    assert seen and set(seen) <= {"Ask__llm", "Ask__llm_2"}

"""AG-UI events of a served flow, each parsed by the protocol's own models (``ag_ui.core.Event``,
a discriminated union: an unknown type or a missing field fails), in an order the protocol
allows (issue 59 part 4). The order rules are those the official client checks
(``@ag-ui/client``'s event verification): one run, started first and finished or errored last,
nothing after it; a text message's content only between its start and end, one message open at
a time; a tool call's args and end only after its start; steps finished only once started."""

from __future__ import annotations

import json
from typing import Any

import httpx
from ag_ui.core import Event, EventType
from pydantic import TypeAdapter

from stateflow import LLM, Flow, Human, Prompt, State, Transition
from tests.serve.served import agui_input, served

_EVENT = TypeAdapter(Event)


def ping(host: str) -> str:
    """Ping a host."""
    return f"{host} is up"


def _flow() -> Flow:
    ask = State("Ask", Prompt("Answer."), LLM(tools=(ping,)))
    check = State("Check", Prompt("Check."), LLM())
    approve = State("Approve", Human(prompt="Publish?", defer=True, name="editor"))
    done = State("Done", final=True)
    moves = [Transition(ask, check), Transition(check, approve), Transition(approve, done)]
    return Flow("ordered", initial=ask, transitions=moves)


def _responder(model: str, messages: list, body: dict) -> Any:
    last = messages[-1].get("content")
    if last == "Answer.":
        return {"content": "let me look", "tool_calls": [{"name": "ping", "arguments": {"host": "db"}}]}
    return "checked: all good" if last == "Check." else "the db host is up"


def _events(base: str, body: dict) -> list[Any]:
    """The stream's events, each validated by ``ag_ui.core``'s models."""
    out = []
    with httpx.stream("POST", f"{base}/agui", json=body, headers={"accept": "text/event-stream"}, timeout=60) as r:
        assert r.status_code == 200, r.read()
        for line in r.iter_lines():
            if line.startswith("data: "):
                out.append(_EVENT.validate_python(json.loads(line[len("data: ") :])))
    return out


def verify(events: list[Any]) -> None:
    """Fail on any order the AG-UI protocol forbids."""
    T = EventType
    assert events and events[0].type == T.RUN_STARTED, events[:1]
    assert events[-1].type in (T.RUN_FINISHED, T.RUN_ERROR)
    message: str | None = None
    calls: set[str] = set()
    ended: set[str] = set()
    steps: list[str] = []
    for i, e in enumerate(events):
        where = f"event {i} {e.type.value}"
        if e.type in (T.RUN_STARTED,):
            assert i == 0, where
        elif e.type in (T.RUN_FINISHED, T.RUN_ERROR):
            assert i == len(events) - 1, where  # nothing after the run's end
            assert message is None, f"{where}: message {message} still open"
            assert calls <= ended, f"{where}: tool calls {calls - ended} not ended"
            assert not steps, f"{where}: steps {steps} not finished"
        elif e.type == T.TEXT_MESSAGE_START:
            assert message is None, f"{where}: {message} still open"
            message = e.message_id
        elif e.type == T.TEXT_MESSAGE_CONTENT:
            assert e.message_id == message and e.delta, where
        elif e.type == T.TEXT_MESSAGE_END:
            assert e.message_id == message, where
            message = None
        elif e.type == T.TOOL_CALL_START:
            assert message is None and e.tool_call_id not in calls, where
            calls.add(e.tool_call_id)
        elif e.type in (T.TOOL_CALL_ARGS, T.TOOL_CALL_END):
            assert e.tool_call_id in calls and e.tool_call_id not in ended, where
            if e.type == T.TOOL_CALL_END:
                ended.add(e.tool_call_id)
        elif e.type == T.TOOL_CALL_RESULT:
            assert e.tool_call_id in ended, where
        elif e.type == T.STEP_STARTED:
            assert e.step_name not in steps, where
            steps.append(e.step_name)
        elif e.type == T.STEP_FINISHED:
            assert steps and steps[-1] == e.step_name, where
            steps.pop()


def test_a_run_paused_and_resumed_streams_events_in_the_protocols_order():
    with served(_flow(), _responder) as (base, _srv, _store):
        first = _events(base, agui_input("order-1"))
        verify(first)
        kinds = [e.type.value for e in first]
        assert kinds.count("TEXT_MESSAGE_START") == kinds.count("TEXT_MESSAGE_END") == 3  # 3 replies
        assert kinds.index("TOOL_CALL_START") < kinds.index("TOOL_CALL_RESULT")
        pause = first[-1].outcome.interrupts[0]
        answer = [{"interruptId": pause.id, "status": "resolved", "payload": "yes"}]
        second = _events(base, agui_input("order-1", None, resume=answer))
        verify(second)
        assert second[-1].type == EventType.RUN_FINISHED and second[-1].outcome.type == "success"


def test_a_failed_run_ends_with_run_error_in_order():
    def broken(model: str, messages: list, body: dict) -> Any:
        raise RuntimeError("the model server broke")

    ask = State("Ask", Prompt("Answer."), LLM())
    flow = Flow("failing", initial=ask, transitions=[Transition(ask, State("Done", final=True))])
    with served(flow, broken) as (base, _srv, _store):
        events = _events(base, agui_input("order-2"))
        verify(events)
        assert events[-1].type == EventType.RUN_ERROR

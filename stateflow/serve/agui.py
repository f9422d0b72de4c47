"""A run's events (:mod:`stateflow.events`) as AG-UI protocol events (``ag_ui.core``).

The AG-UI protocol is what agent front ends speak: a client posts a ``RunAgentInput`` and reads
server-sent events. AG2's ``autogen.ag_ui.AGUIStream`` serves one ``ConversableAgent`` and only
sees its messages; a flow has states, transitions and judges as well, so the served flow
translates its own events into the protocol's event types here (AG2's own adapter uses the same
types and encoder):

=========================  ==========================================================
StateFlow event            AG-UI events
=========================  ==========================================================
RunStarted                 ``RUN_STARTED``
StateEntered               ``STEP_FINISHED`` (the state left), ``STEP_STARTED`` (state)
TokenDelta                 ``TEXT_MESSAGE_START`` (first token), ``TEXT_MESSAGE_CONTENT``
StepRecorded (an LLM)      ``TEXT_MESSAGE_END`` (or START/CONTENT/END when not streamed)
ToolCalled                 ``TOOL_CALL_START``, ``TOOL_CALL_ARGS``, ``TOOL_CALL_END``
ToolReturned               ``TOOL_CALL_RESULT``
TransitionTaken, judges    ``CUSTOM`` named ``stateflow.transition`` / ``stateflow.judge``
every step                 ``CUSTOM`` named ``stateflow.step`` (the trace record)
Interrupted + RunFinished  ``RUN_FINISHED`` with an ``interrupt`` outcome (the question)
RunFinished                ``RUN_FINISHED`` (result), or ``RUN_ERROR`` for a failed run
=========================  ==========================================================

An interrupt's id is ``<thread id>@<transitions taken>``; the client answers it with a ``resume`` entry of
its next ``RunAgentInput`` on the same thread (see :mod:`stateflow.serve.app`).
"""

from __future__ import annotations

import json
import uuid
from typing import Any

from ag_ui.core import (
    BaseEvent,
    CustomEvent,
    Interrupt,
    RunErrorEvent,
    RunFinishedEvent,
    RunFinishedInterruptOutcome,
    RunFinishedSuccessOutcome,
    RunStartedEvent,
    StepFinishedEvent,
    StepStartedEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
    ToolCallArgsEvent,
    ToolCallEndEvent,
    ToolCallResultEvent,
    ToolCallStartEvent,
)

from stateflow.events import (
    Event,
    Interrupted,
    JudgeAnswered,
    JudgeAsked,
    RunFinished,
    RunStarted,
    StateEntered,
    StepRecorded,
    TokenDelta,
    ToolCalled,
    ToolReturned,
    TransitionTaken,
)

__all__ = ["AGUITranslator", "interrupt_id"]


def interrupt_id(thread_id: str, transitions: int) -> str:
    """The id of the question a thread paused on after ``transitions`` transitions."""
    return f"{thread_id}@{transitions}"


class AGUITranslator:
    """Translates one run's events, in order, into AG-UI events (it keeps the open message,
    the current state and the tool call in progress).

    Args:
        thread_id, run_id: the ids of the client's ``RunAgentInput``.
    """

    def __init__(self, thread_id: str, run_id: str):
        self.thread_id, self.run_id = thread_id, run_id
        self._state: str | None = None
        self._message: str | None = None  # the id of the assistant message being streamed
        self._call: str | None = None  # the id of the tool call whose result comes next

    def _close_message(self) -> list[BaseEvent]:
        if self._message is None:
            return []
        out = [TextMessageEndEvent(message_id=self._message)]
        self._message = None
        return out

    def translate(self, event: Event) -> list[BaseEvent]:
        """The AG-UI events for ``event`` (possibly none)."""
        if isinstance(event, TokenDelta):
            out: list[BaseEvent] = []
            if self._message is None:
                self._message = uuid.uuid4().hex
                out.append(TextMessageStartEvent(message_id=self._message, role="assistant"))
            out.append(TextMessageContentEvent(message_id=self._message, delta=event.text))
            return out
        if isinstance(event, RunStarted):
            return [RunStartedEvent(thread_id=self.thread_id, run_id=self.run_id)]
        if isinstance(event, StateEntered):
            out = self._close_message()
            if self._state is not None:
                out.append(StepFinishedEvent(step_name=self._state))
            self._state = event.state
            return [*out, StepStartedEvent(step_name=event.state)]
        if isinstance(event, ToolCalled):
            self._call = event.call_id or uuid.uuid4().hex
            args = event.arguments if isinstance(event.arguments, str) else json.dumps(event.arguments)
            return [
                *self._close_message(),
                ToolCallStartEvent(tool_call_id=self._call, tool_call_name=event.tool),
                ToolCallArgsEvent(tool_call_id=self._call, delta=args or "{}"),
                ToolCallEndEvent(tool_call_id=self._call),
            ]
        if isinstance(event, ToolReturned):
            content = event.step.message.content if event.step.message is not None else ""
            call, self._call = self._call or event.call_id or uuid.uuid4().hex, None
            result = ToolCallResultEvent(message_id=uuid.uuid4().hex, tool_call_id=call, content=content, role="tool")
            return [result, _custom("stateflow.step", event.step.to_dict())]
        if isinstance(event, StepRecorded):
            return [*self._reply(event), _custom("stateflow.step", event.step.to_dict())]
        if isinstance(event, JudgeAsked):
            return [_custom("stateflow.judge", {"judge": event.judge, "question": event.question})]
        if isinstance(event, JudgeAnswered):
            answer = {"judge": event.step.output, "answer": event.step.detail.get("answer")}
            return [*self._close_message(), _custom("stateflow.judge", answer)]
        if isinstance(event, TransitionTaken):
            return [*self._close_message(), _custom("stateflow.transition", event.record.to_dict())]
        if isinstance(event, Interrupted):
            return []  # carried by RUN_FINISHED's outcome
        if isinstance(event, RunFinished):
            return self._finished(event)
        return []

    def _reply(self, event: StepRecorded) -> list[BaseEvent]:
        """An LLM reply ends its streamed message; one from a model that does not stream (a
        scripted test double) is sent whole. A streamed reply without tokens only called tools:
        its calls are reported as tool calls, not as text."""
        msg = event.step.message
        if msg is None or msg.role != "assistant":
            return []
        if self._message is not None or event.streamed:
            return self._close_message()
        mid = uuid.uuid4().hex
        return [
            TextMessageStartEvent(message_id=mid, role="assistant"),
            *([TextMessageContentEvent(message_id=mid, delta=msg.content)] if msg.content else []),
            TextMessageEndEvent(message_id=mid),
        ]

    def _finished(self, event: RunFinished) -> list[BaseEvent]:
        r = event.result
        out = self._close_message()
        if self._state is not None:
            out.append(StepFinishedEvent(step_name=self._state))
        if r.status == "failed":
            return [*out, RunErrorEvent(message=r.error or "the run failed", code="run_failed")]
        summary = event.to_dict()
        if r.pending is not None:
            pause = Interrupt(
                id=interrupt_id(self.thread_id, len(r.transitions)),
                reason="human_input",
                message=r.pending.question,
                metadata={"state": r.pending.state, "name": r.pending.name},
            )
            outcome: Any = RunFinishedInterruptOutcome(interrupts=[pause])
        else:
            outcome = RunFinishedSuccessOutcome()
        finished = RunFinishedEvent(thread_id=self.thread_id, run_id=self.run_id, result=summary, outcome=outcome)
        return [*out, finished]


def _custom(name: str, value: Any) -> CustomEvent:
    return CustomEvent(name=name, value=value)

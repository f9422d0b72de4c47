"""What a run emits while it runs: one set of typed events.

Streaming (:func:`stateflow.live.stream`), the served protocols (:mod:`stateflow.serve`), the
trace a :class:`~stateflow.trace.RunResult` keeps and the telemetry exported from it all read the
same records: an event that reports a step or a transition *carries* the
:class:`~stateflow.trace.Step` or :class:`~stateflow.trace.TransitionRecord` object the run appends
to its trace (the very object telemetry turns into a span and the report reads), never a copy
re-derived from another consumer's output. :func:`events_of` rebuilds a finished run's event
sequence from its result: what a client streamed live equals what an archived result replays
(token deltas aside: a result keeps whole replies).

The events, in the order a run emits them:

* :class:`RunStarted`: the flow, view, task and thread;
* :class:`StateEntered`: the run entered a state (its first, and after every transition);
* :class:`TokenDelta`: a piece of an LLM reply while it streams;
* :class:`ToolCalled` then :class:`ToolReturned`: a tool call and its result;
* :class:`JudgeAsked` then :class:`JudgeAnswered`: an LLM judge consulted by a rule;
* :class:`StepRecorded`: any other output function's step (a prompt, an LLM reply, a human answer);
* :class:`TransitionTaken`: ``source -> target`` and the rule that chose it;
* :class:`Interrupted`: the run paused on a deferred question (answer it with ``resume``);
* :class:`RunFinished`: the :class:`~stateflow.trace.RunResult`.

Example:
    >>> from stateflow.trace import TransitionRecord
    >>> e = TransitionTaken(TransitionRecord("Solve", "End", "Solve -> End when submitted", 3))
    >>> e.to_dict()["type"], e.to_dict()["rule"]
    ('transition_taken', 'Solve -> End when submitted')
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from stateflow.trace import RunResult, Step, TransitionRecord

if TYPE_CHECKING:
    from stateflow.run_state import PendingQuestion

__all__ = [
    "Event",
    "EventSink",
    "Interrupted",
    "JudgeAnswered",
    "JudgeAsked",
    "RunFinished",
    "RunStarted",
    "StateEntered",
    "StepRecorded",
    "TokenDelta",
    "ToolCalled",
    "ToolReturned",
    "TransitionTaken",
    "event_for_step",
    "events_of",
]


@dataclass(frozen=True, slots=True)
class RunStarted:
    """A run began (or a saved thread was continued from its ``state``)."""

    flow: str
    view: str
    task: str
    state: str
    thread_id: str | None = None
    at: float = field(default_factory=time.time)
    type: str = "run_started"

    def to_dict(self) -> dict[str, Any]:
        return {
            "type": self.type,
            "flow": self.flow,
            "view": self.view,
            "task": self.task,
            "state": self.state,
            "thread_id": self.thread_id,
            "at": self.at,
        }


@dataclass(frozen=True, slots=True)
class StateEntered:
    """The run entered ``state``; ``visit`` counts the states entered before it (0 first)."""

    state: str
    visit: int
    at: float = field(default_factory=time.time)
    type: str = "state_entered"

    def to_dict(self) -> dict[str, Any]:
        return {"type": self.type, "state": self.state, "visit": self.visit, "at": self.at}


@dataclass(frozen=True, slots=True)
class TokenDelta:
    """A piece of the reply ``agent`` is streaming in ``state`` (the whole reply follows as a step)."""

    state: str
    agent: str
    text: str
    type: str = "token"

    def to_dict(self) -> dict[str, Any]:
        return {"type": self.type, "state": self.state, "agent": self.agent, "text": self.text}


@dataclass(frozen=True, slots=True)
class ToolCalled:
    """A tool was called with ``arguments`` (its step follows as :class:`ToolReturned`)."""

    state: str
    tool: str
    arguments: Any
    call_id: str | None = None
    type: str = "tool_called"

    def to_dict(self) -> dict[str, Any]:
        return {
            "type": self.type,
            "state": self.state,
            "tool": self.tool,
            "arguments": self.arguments,
            "call_id": self.call_id,
        }


@dataclass(frozen=True, slots=True)
class JudgeAsked:
    """An LLM judge is asked ``question`` to decide a rule."""

    state: str
    judge: str
    question: str
    type: str = "judge_asked"

    def to_dict(self) -> dict[str, Any]:
        return {"type": self.type, "state": self.state, "judge": self.judge, "question": self.question}


@dataclass(frozen=True, slots=True)
class StepRecorded:
    """A step appended to the run's trace (the same :class:`Step` object the result keeps);
    ``streamed``: its model reply arrived as :class:`TokenDelta` events first (a reply that only
    calls tools streams no text)."""

    step: Step
    streamed: bool = False
    type: str = "step"

    def to_dict(self) -> dict[str, Any]:
        return {"type": self.type, **self.step.to_dict()}


@dataclass(frozen=True, slots=True)
class ToolReturned:
    """A tool's step: its result is ``step.message.content``, success ``step.detail.get("ok")``."""

    step: Step
    type: str = "tool_returned"

    @property
    def call_id(self) -> str | None:
        meta = self.step.message.meta if self.step.message is not None else {}
        return str(meta["call_id"]) if "call_id" in meta else None

    def to_dict(self) -> dict[str, Any]:
        return {"type": self.type, **self.step.to_dict()}


@dataclass(frozen=True, slots=True)
class JudgeAnswered:
    """A judge's step: ``step.detail["answer"]`` (``None`` when its reply named no choice)."""

    step: Step
    type: str = "judge_answered"

    def to_dict(self) -> dict[str, Any]:
        return {"type": self.type, **self.step.to_dict()}


@dataclass(frozen=True, slots=True)
class TransitionTaken:
    """A transition (the same :class:`TransitionRecord` the result keeps: source, target, rule)."""

    record: TransitionRecord
    type: str = "transition_taken"

    def to_dict(self) -> dict[str, Any]:
        return {"type": self.type, **self.record.to_dict()}


@dataclass(frozen=True, slots=True)
class Interrupted:
    """The run paused on a deferred question; ``resume(thread_id, answer)`` continues it."""

    pending: PendingQuestion
    thread_id: str | None
    type: str = "interrupted"

    def to_dict(self) -> dict[str, Any]:
        p, thread = self.pending, self.thread_id
        return {"type": self.type, "state": p.state, "name": p.name, "question": p.question, "thread_id": thread}


@dataclass(frozen=True, slots=True)
class RunFinished:
    """The run ended (final state, bound, pause or error): its whole result."""

    result: RunResult
    type: str = "run_finished"

    def to_dict(self) -> dict[str, Any]:
        r = self.result
        return {
            "type": self.type,
            "status": r.status,
            "exit_state": r.exit_state,
            "stop_reason": r.stop_reason,
            "error": r.error,
            "path": r.path,
            "thread_id": r.thread_id,
            "usage": r.usage().to_dict(),
            "answer": _last_reply(r),
        }


Event = (
    RunStarted
    | StateEntered
    | TokenDelta
    | ToolCalled
    | ToolReturned
    | JudgeAsked
    | JudgeAnswered
    | StepRecorded
    | TransitionTaken
    | Interrupted
    | RunFinished
)
"""Any event a run emits."""

EventSink = Callable[[Event], None]
"""Receives every event of a run, in order, on the thread that runs it."""


def _last_reply(result: RunResult) -> str | None:
    """The last message a model or tool produced: what a caller of a served flow gets back."""
    for m in reversed(list(result.history)):
        if m.role == "assistant" or m.kind.value == "tool":
            return m.content
    return None


def _is_tool(step: Step) -> bool:
    return step.output.startswith(("tool[", "tool_call["))


def event_for_step(step: Step, *, streamed: bool = False) -> list[Event]:
    """The events that report ``step``: a tool's call and result, a judge's question and answer,
    else the step itself (``streamed``: its model call streamed)."""
    if _is_tool(step):
        tool = step.detail.get("tool") or step.output[step.output.index("[") + 1 : -1]
        returned = ToolReturned(step)
        return [ToolCalled(step.state, str(tool), step.detail.get("arguments"), returned.call_id), returned]
    if step.output.startswith("judge["):
        return [JudgeAsked(step.state, step.output[len("judge[") : -1], str(step.detail.get("question", ""))),
                JudgeAnswered(step)]  # fmt: skip
    return [StepRecorded(step, streamed)]


def events_of(result: RunResult, *, task: str = "") -> Iterator[Event]:
    """The event sequence of a finished run, rebuilt from its trace (no token deltas).

    It equals what :func:`stateflow.live.stream` emitted for that run, token deltas removed, for
    a run started from the beginning.
    """
    yield RunStarted(result.flow, result.view, task, result.path[0], result.thread_id, at=result.started_at)
    yield StateEntered(result.path[0], 0)
    first = 0
    for visit, t in enumerate(result.transitions, start=1):
        for step in result.steps[first : t.after_step + 1]:
            yield from event_for_step(step)
        first = t.after_step + 1
        yield TransitionTaken(t)
        yield StateEntered(t.target, visit)
    for step in result.steps[first:]:
        yield from event_for_step(step)
    if result.pending is not None:
        yield Interrupted(result.pending, result.thread_id)
    yield RunFinished(result)

"""The one place where a run's steps are made.

Every output-function call, discarded reply, vote candidate, tool call and judge consultation
becomes a :class:`~stateflow.trace.Step` through :meth:`StepLog.record`, so the index, the state
and the start time are computed the same way for all of them, and anything that must see every
step (checkpoints, streamed events, telemetry) has one hook to attach to.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from stateflow.context import Context
from stateflow.events import Event
from stateflow.messages import History, Message, Usage
from stateflow.trace import Step

__all__ = ["StepLog"]


class StepLog:
    """A run's steps and the history they append to.

    Args:
        ctx: the run's context; its ``state`` is the state a new step is recorded in.
        history: the run's history; a step with a message appends it.
        steps: the steps so far (a resumed run starts from its saved ones).
    """

    def __init__(self, ctx: Context, history: History, steps: list[Step]):
        self.ctx, self.history, self.steps = ctx, history, steps
        #: called with every step once it is appended, and with what a step is about to do
        #: (a tool call, a judge's question: :meth:`announce`); a streamed run's events, see
        #: :mod:`stateflow.emitter`. What they raise ends the run.
        self.on_step: Callable[[Step], None] | None = None
        self.on_call: Callable[[Event], None] | None = None

    def announce(self, event: Event) -> None:
        """Report what the next step is about to do (it is recorded when it ends)."""
        if self.on_call is not None:
            self.on_call(event)

    def __len__(self) -> int:
        return len(self.steps)

    def record(
        self,
        output: str,
        message: Message | None = None,
        usage: Usage | None = None,
        latency_s: float | None = None,
        detail: dict[str, Any] | None = None,
        *,
        started_at: float | None = None,
        state: str | None = None,
    ) -> Step:
        """Append one step (and its message to the history, when it has one).

        Args:
            output: the step's label, e.g. ``llm``, ``llm[candidate 2]``, ``tool_call[execute]``.
            message: the message it adds to the history; ``None`` for a step the history does not
                show (a judge's consultation, a discarded reply, a vote candidate).
            usage: the model call's accounting, if the step called a model.
            latency_s: the step's wall time; defaults to ``usage.latency_s`` (0 without usage).
            detail: extra facts about the step (a judge's question, a candidate's vote...).
            started_at: when the step started, for a step recorded later than it ended (a
                parallel branch); default: now minus its latency.
            state: the state it ran in, for a step of a nested run (a subflow branch of a
                parallel); default: the run's current state.

        Returns:
            The step, already appended. Its ``started_at`` is now minus its latency unless given:
            steps are recorded when they end.
        """
        if latency_s is None:
            latency_s = usage.latency_s if usage is not None else 0.0
        if message is not None:
            self.history.append(message)
        step = Step(
            len(self.steps),
            self.ctx.state if state is None else state,
            output,
            message,
            usage,
            latency_s,
            detail or {},
            started_at=time.time() - latency_s if started_at is None else started_at,
        )
        self.steps.append(step)
        if self.on_step is not None:
            self.on_step(step)
        return step

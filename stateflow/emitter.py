"""How a running episode reports its events (:mod:`stateflow.events`) to a sink.

The episode announces every step its step log records and every transition it takes (the record
itself, not a copy: ``StepLog.on_step``, ``Episode.on_transition``); the :class:`Emitter` turns
them into events. Token deltas come from
the model backend (:class:`TokenTap`, AutoGen's stream events); the run's start and end come
from :mod:`stateflow.runtime`.

The sink runs on the run's thread, between two steps of the run: what it raises ends the run
like any other failure (that is how a stream's consumer cancels a run:
:class:`~stateflow.errors.RunCancelled`). The token deltas of a
:class:`~stateflow.parallel.Parallel` state's LLM branches come from the branches' threads; the
emitter hands events to the sink one at a time, so a sink never runs twice at once.
"""

from __future__ import annotations

import threading
from typing import Any

from stateflow.events import Event, EventSink, StateEntered, TokenDelta, TransitionTaken, event_for_step
from stateflow.trace import Step, TransitionRecord

__all__ = ["Emitter", "TokenTap"]


class Emitter:
    """Turns a run's records into events for ``sink``; knows the state tokens belong to.

    Args:
        sink: receives every event.
        state: the state the run starts (or continues) in.
        visits: states entered before (a continued run's transitions).
    """

    def __init__(self, sink: EventSink, state: str, visits: int = 0):
        self._sink = sink
        self._one_at_a_time = threading.Lock()
        self.state = state
        self.visits = visits
        self._streamed = False  # a model call streamed since the last step
        self._announced = False  # the next step's call (tool, judge) was reported live

    def sink(self, event: Event) -> None:
        """Hand ``event`` to the sink (serialized: parallel branches stream from their threads)."""
        with self._one_at_a_time:
            self._sink(event)

    def streaming(self) -> None:
        """A model call is about to stream (its step, when recorded, says so)."""
        self._streamed = True

    def call(self, event: Event) -> None:
        """A tool call or a judge's question, reported when it starts (its step follows)."""
        self._announced = True
        self.sink(event)

    def step(self, step: Step) -> None:
        streamed, self._streamed = self._streamed, False
        announced, self._announced = self._announced, False
        events = event_for_step(step, streamed=streamed)
        for event in events[1:] if announced and len(events) == 2 else events:
            self.sink(event)

    def transition(self, record: TransitionRecord) -> None:
        self.sink(TransitionTaken(record))
        self.state = record.target
        self.visits += 1
        self.sink(StateEntered(record.target, self.visits))

    def token(self, agent: str, text: str) -> None:
        if text:
            self.sink(TokenDelta(self.state, agent, text))


class TokenTap:
    """An AutoGen ``IOStream`` for one streamed model call: text chunks (AutoGen's
    ``StreamEvent``) go to the emitter as token deltas; everything else goes on to the stream
    that was the default before (the run's own)."""

    def __init__(self, emitter: Emitter, agent: str, downstream: Any):
        self.emitter = emitter
        self.agent = agent
        self.downstream = downstream

    def print(self, *objects: Any, sep: str = " ", end: str = "\n", flush: bool = False) -> None:
        self.downstream.print(*objects, sep=sep, end=end, flush=flush)

    def send(self, message: Any) -> None:
        from autogen.events.client_events import StreamEvent

        # AutoGen wraps its events: the StreamEvent sits in the wrapper's ``content``
        event = getattr(message, "content", None)
        if isinstance(message, StreamEvent) and event is not None:
            text = getattr(event, "content", event)
            self.emitter.token(self.agent, str(text))
            return
        self.downstream.send(message)

    def input(self, prompt: str = "", *, password: bool = False) -> str:
        return self.downstream.input(prompt, password=password)

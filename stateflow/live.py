"""Runs you can watch and await: :func:`stream`, :func:`astream` and :func:`arun`.

All three are thin wrappers around the one run loop (:func:`stateflow.runtime.run` with an
``on_event`` sink): the run goes on its own thread and its events (:mod:`stateflow.events`)
cross to the consumer through a queue. There is no second, asynchronous copy of the loop.

Why a thread per run: AutoGen 0.14's asynchronous path does not avoid one. Its
``ConversableAgent.a_generate_oai_reply`` runs the synchronous ``generate_oai_reply`` in the
event loop's default executor, because ``OpenAIWrapper`` has no asynchronous ``create``; group
chat speaker selection and reply functions are synchronous too. So every model call in flight
holds an OS thread either way; a run's own thread costs the same and keeps the loop single.
The threads wait on sockets, not on the CPU: 50 concurrent runs against a model with 200 ms
latency finish in 1.3 to 1.6 times one run when they share pools (``http=``, which also lends
them prepared agents, :mod:`stateflow.episode.pool`, and idle threads, :mod:`stateflow.run_threads`),
in 3 to 4 times without; what remains is each run's CPU under the interpreter lock
(``scripts/bench_live.py``, docs/live.md).

Cancelling: when the consumer of :func:`stream` / :func:`astream` stops early (``break``,
``aclose``, a cancelled task, a disconnected HTTP client) or :func:`arun` is cancelled, the run
is cancelled at its next event (within one token of a streamed reply; a model call in flight that
does not stream ends first) and its thread is joined before the generator returns: nothing is
left running. A checkpointed run is then marked failed at its last checkpoint and can be resumed.

Example:
    >>> from stateflow import Flow, State, Prompt, LLM, Transition, ModelProfile
    >>> from stateflow.backends.scripted import ScriptedLLM
    >>> ask, end = State("Ask", Prompt("Say hi."), LLM()), State("End", final=True)
    >>> flow = Flow("hello", initial=ask, states=[ask, end], transitions=[Transition(ask, end)])
    >>> script = ModelProfile("s", provider="scripted", model="s", api_key_env=None)
    >>> events = list(stream(flow, "greet", models=script, scripts={"s": ScriptedLLM(["hi"])}))
    >>> [e.type for e in events]
    ['run_started', 'state_entered', 'step', 'step', 'transition_taken', 'state_entered', 'run_finished']
    >>> events[-1].result.exit_state
    'End'
"""

from __future__ import annotations

import asyncio
import functools
import queue
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

from stateflow.errors import RunCancelled
from stateflow.events import Event
from stateflow.flow import Flow
from stateflow.run_threads import RunThreads
from stateflow.trace import RunResult

__all__ = ["arun", "astream", "astream_call", "stream", "stream_call"]

_END = object()  # put on a run's queue after its last event (a sentinel, never changed)


class _Run:
    """One run on its own thread, cancellable between events.

    Args:
        call: ``call(on_event) -> RunResult``: the run, given the sink to report to.
        deliver: hands each event (then ``_END``) to the consumer; called on the run's thread.
    """

    def __init__(self, call: Callable[[Callable[[Event], None]], RunResult], deliver: Callable[[Any], None]):
        self._call = call
        self._deliver = deliver
        self.cancelled = threading.Event()
        self.result: RunResult | None = None
        self.error: BaseException | None = None
        self.thread: threading.Thread | None = None  # its own thread (None on a pooled thread)

    def _sink(self, event: Event) -> None:
        if self.cancelled.is_set():
            raise RunCancelled("the run was cancelled: its consumer stopped listening")
        self._deliver(event)

    def _main(self) -> None:
        try:
            self.result = self._call(self._sink)
        except BaseException as err:  # handed to the consumer, raised there
            self.error = err
        finally:
            self._deliver(_END)

    def start(self, threads: RunThreads | None = None) -> _Run:
        """Start on its own thread, or on an idle one of ``threads`` (see
        :mod:`stateflow.run_threads`)."""
        name = f"stateflow-run-{id(self):x}"
        if threads is not None:
            threads.submit(self._main, name=name)
            return self
        self.thread = threading.Thread(target=self._main, name=name, daemon=True)
        self.thread.start()
        return self


def stream_call(call: Callable[[Callable[[Event], None]], RunResult]) -> Iterator[Event]:
    """The events of ``call(on_event)`` (a run, resume or fork with its arguments bound), as
    they happen; stopping early cancels the run and waits for its thread.

    Raises:
        Exception: what the run raised (with ``raise_errors=False`` runs, only errors that
            prevent the run from starting, e.g. a bad configuration).
    """
    inbox: queue.SimpleQueue[Any] = queue.SimpleQueue()
    run = _Run(call, inbox.put).start()
    try:
        while (item := inbox.get()) is not _END:
            yield item
    finally:
        run.cancelled.set()
        assert run.thread is not None  # started on its own thread above
        run.thread.join()
    if run.error is not None:
        raise run.error


def stream(flow: Flow, task: str, **kwargs: Any) -> Iterator[Event]:
    """Run ``flow`` on ``task`` and yield its events as they happen, the last one
    :class:`~stateflow.events.RunFinished` with the :class:`~stateflow.trace.RunResult`.

    Model replies stream token by token (:class:`~stateflow.events.TokenDelta`) from any
    OpenAI-compatible endpoint, the embedded server included. A run that fails ends with a
    ``RunFinished`` whose result has ``status == "failed"`` (nothing is raised after it).

    Args:
        flow: the flow to run, as for :func:`~stateflow.runtime.run`.
        task: the task, as for :func:`~stateflow.runtime.run`.
        **kwargs: any other argument of :func:`~stateflow.runtime.run` (``raise_errors`` is
            False here; ``on_event`` is the stream's own).
    """
    from stateflow.runtime import run

    return stream_call(functools.partial(_bound, run, flow, task, kwargs))


def _bound(fn: Callable[..., RunResult], flow: Flow, task: str, kwargs: dict[str, Any], on_event: Any) -> RunResult:
    return fn(flow, task, **{"raise_errors": False, **kwargs, "on_event": on_event})


async def astream_call(call: Callable[[Callable[[Event], None]], RunResult]) -> AsyncIterator[Event]:
    """:func:`stream_call` for asyncio: the run's thread hands events to the loop; closing the
    generator (or cancelling the task iterating it) cancels the run and awaits its thread."""
    loop = asyncio.get_running_loop()
    inbox: asyncio.Queue[Any] = asyncio.Queue()
    ended = loop.create_future()

    def deliver(item: Any) -> None:
        loop.call_soon_threadsafe(inbox.put_nowait, item)
        if item is _END:
            loop.call_soon_threadsafe(_settle, ended)

    run = _Run(call, deliver).start()
    try:
        while (item := await inbox.get()) is not _END:
            yield item
    finally:
        await _stopped(run, ended)
    if run.error is not None:
        raise run.error


def _settle(ended: asyncio.Future[None]) -> None:
    if not ended.done():
        ended.set_result(None)


async def _stopped(run: _Run, ended: asyncio.Future[None]) -> None:
    """Cancel ``run`` (a no-op once it ended) and wait until its thread has ended."""
    run.cancelled.set()
    # The run's thread ends at its next event: wait for it even while being cancelled (anyio,
    # e.g. Starlette on a client disconnect, re-delivers the cancellation at every await).
    interrupted = False
    while not ended.done():
        try:
            await asyncio.shield(ended)
        except asyncio.CancelledError:
            interrupted = True
    if interrupted:
        raise asyncio.CancelledError


async def astream(flow: Flow, task: str, **kwargs: Any) -> AsyncIterator[Event]:
    """``async for event in astream(flow, task, ...)``: :func:`stream` for asyncio."""
    from stateflow.runtime import run

    async for event in astream_call(functools.partial(_bound, run, flow, task, kwargs)):
        yield event


async def arun(flow: Flow, task: str, **kwargs: Any) -> RunResult:
    """``await arun(flow, task, ...)``: :func:`~stateflow.runtime.run` without blocking the loop.

    Takes :func:`~stateflow.runtime.run`'s arguments and behaves like it (``raise_errors``
    included); model calls are made as by ``run`` (no token streaming). Cancelling the awaiting
    task cancels the run at its next step or transition.
    """
    from stateflow.runtime import run

    raise_errors = kwargs.pop("raise_errors", True)

    def call(on_event: Callable[[Event], None]) -> RunResult:
        return run(flow, task, **kwargs, raise_errors=raise_errors, on_event=on_event, tokens=False)

    # Only the run's end crosses to the event loop: its events stay on the run's thread, where
    # they are the points at which a cancelled run stops. One wake-up of the loop per run instead
    # of one per event (no measurable change in scripts/bench_live.py on a loaded machine; it
    # keeps 50 awaited runs from queueing hundreds of callbacks on the loop).
    loop = asyncio.get_running_loop()
    ended = loop.create_future()

    def deliver(item: Any) -> None:
        if item is _END:
            loop.call_soon_threadsafe(_settle, ended)

    # Runs that share pools share idle threads too (starting one per run was about a tenth of
    # 50 awaited runs' CPU, scripts/bench_live.py).
    http = kwargs.get("http")
    done = _Run(call, deliver).start(http.shared(RunThreads, RunThreads) if http is not None else None)
    try:
        await asyncio.shield(ended)
    finally:
        await _stopped(done, ended)
    if done.error is not None:
        raise done.error
    assert done.result is not None  # a run that returns without raising has its result
    return done.result

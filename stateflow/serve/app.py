"""``stateflow serve``: a flow over HTTP, as an AG-UI endpoint and an A2A agent, with durable threads.

Routes (all JSON bodies validated with pydantic; a bad request gets a 4xx naming the problem):

* ``POST /agui``: the AG-UI protocol. The body is an AG-UI ``RunAgentInput``; the answer is a
  server-sent event stream (:mod:`stateflow.serve.agui`). A new ``thread_id`` runs the flow on
  the last user message; a thread paused on a deferred question continues when the request's
  ``resume`` answers its interrupt; a failed thread continues from its last checkpoint; a
  finished one is refused (409).
* ``GET /threads/{thread_id}``: where a thread stands (status, state, the question it waits on).
* ``/a2a/``: the A2A protocol (agent card at ``/a2a/.well-known/agent-card.json``), AG2's
  server around the flow (:mod:`stateflow.serve.a2a`).
* ``GET /health``.

Every request first passes :class:`~stateflow.serve.guard.ServeGuard` (``Host``, ``Origin``,
token, ``application/json``, body size: :class:`~stateflow.serve.guard.ServeAccess`); the routes
then apply :class:`~stateflow.serve.guard.ServeLimits` (messages, their length, runs at once,
run time-out). Every refusal comes before anything is written to the checkpointer.

Threads are saved in the service's checkpointer (:mod:`stateflow.checkpoint`): a paused run
waits there, across server restarts, until a request answers it. Requests for one thread are
served one at a time (a per-thread lock; the checkpointer's claim guards other processes, e.g.
several servers on one PostgreSQL store: an AG-UI request is answered only once its run holds
the claim, so the loser of a race gets a 409, not a stream). A
client that disconnects from a stream cancels its run at the run's next event; the run's thread
is joined and its model stream closed.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator, Callable
from contextlib import aclosing
from dataclasses import dataclass
from typing import Any

from ag_ui.core import RunAgentInput, RunErrorEvent
from ag_ui.encoder import EventEncoder
from pydantic import ValidationError
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Mount, Route

from stateflow.backends.http import HttpClients
from stateflow.checkpoint import Checkpointer, ThreadStatus
from stateflow.errors import StateFlowError
from stateflow.events import Event
from stateflow.fingerprint import flow_fingerprint
from stateflow.flow import Flow
from stateflow.live import astream_call
from stateflow.serve.agui import AGUITranslator, interrupt_id
from stateflow.serve.guard import Refused, RunSlots, ServeAccess, ServeGuard, ServeLimits, ThreadLocks, within
from stateflow.threads import load_position
from stateflow.trace import RunResult
from stateflow.views import View

__all__ = ["FlowService", "build_app"]

_THREAD_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:@-]{0,127}$")

RunCall = Callable[[Callable[[Event], None]], RunResult]


@dataclass
class FlowService:
    """What a server runs: a flow, its models and where its threads are kept.

    Attributes:
        flow: the served flow.
        checkpointer: where threads are saved (paused runs wait there for their answer).
        models: as ``run(models=...)`` (default: the embedded ``local`` model).
        flow_ref: how to load the flow again (saved with each thread, for ``stateflow resume``).
        view: the view runs use (default StateFlow's).
        max_transitions, timeout_s: as for ``run``.
        http: connection pools shared by every run of the server.
    """

    flow: Flow
    checkpointer: Checkpointer
    models: Any = None
    flow_ref: str | None = None
    view: View | None = None
    max_transitions: int | None = None
    timeout_s: float | None = None
    http: HttpClients | None = None

    def starter(self, task: str, thread_id: str) -> RunCall:
        """A new run of ``task`` saved as ``thread_id``, given its event sink."""
        from stateflow.runtime import run

        def call(on_event: Callable[[Event], None]) -> RunResult:
            return run(
                self.flow,
                task,
                models=self.models,
                view=self.view,
                http=self.http,
                max_transitions=self.max_transitions,
                timeout_s=self.timeout_s,
                raise_errors=False,
                thread_id=thread_id,
                checkpointer=self.checkpointer,
                flow_ref=self.flow_ref,
                telemetry=False,
                on_event=on_event,
                progress=False,  # a server's runs are many and concurrent: its clients get the events
            )

        return call

    def continuer(self, thread_id: str, answer: str | None) -> RunCall:
        """Continue ``thread_id`` (answering its question, if ``answer``), given its event sink."""
        from stateflow.runtime import resume

        def call(on_event: Callable[[Event], None]) -> RunResult:
            return resume(
                thread_id,
                answer,
                checkpointer=self.checkpointer,
                flow=self.flow,
                models=self.models,
                view=self.view,
                http=self.http,
                max_transitions=self.max_transitions,
                timeout_s=self.timeout_s,
                raise_errors=False,
                telemetry=False,
                on_event=on_event,
            )

        return call


def _task_of(incoming: RunAgentInput) -> str:
    for m in reversed(incoming.messages):
        if m.role == "user":
            content = m.content
            if isinstance(content, str) and content.strip():
                return content
            raise Refused(400, "the last user message has no text content to run the flow on")
    raise Refused(400, "messages holds no user message: the flow runs on the last one")


def _chars(content: Any) -> int:
    """The length of a message's content: its text, else its JSON (multimodal parts)."""
    if content is None:
        return 0
    if isinstance(content, str):
        return len(content)
    if isinstance(content, list):
        content = [c.model_dump(mode="json") if hasattr(c, "model_dump") else c for c in content]
    return len(json.dumps(content, default=str))


def check_input(incoming: RunAgentInput, limits: ServeLimits) -> None:
    """Refuse (413) a request with more messages, or a longer message or answer, than ``limits``."""
    if len(incoming.messages) > limits.max_messages:
        raise Refused(
            413,
            f"messages holds {len(incoming.messages)} messages; this server takes at most "
            f"{limits.max_messages} per request (its --max-messages)",
        )
    for i, m in enumerate(incoming.messages):
        size = _chars(getattr(m, "content", None))
        if size > limits.max_message_chars:
            raise Refused(
                413,
                f"message {i} ({m.role}) has {size} characters; this server takes at most "
                f"{limits.max_message_chars} (its --max-message-chars)",
            )
    for entry in incoming.resume or []:
        size = _chars(entry.payload)
        if size > limits.max_message_chars:
            raise Refused(
                413,
                f"the answer to interrupt {entry.interrupt_id[:80]!r} has {size} characters; this server takes "
                f"at most {limits.max_message_chars} (its --max-message-chars)",
            )


def _plan(service: FlowService, incoming: RunAgentInput) -> RunCall:
    """What a request asks for, checked against its thread's latest checkpoint.

    Raises:
        Refused: what is wrong with the request, and its HTTP status.
    """
    thread_id = incoming.thread_id
    if not _THREAD_ID.match(thread_id):
        raise Refused(400, f"thread_id {thread_id[:40]!r}: 1-128 letters, digits and ._:@- (starting alphanumeric)")
    latest = service.checkpointer.latest(thread_id)
    if latest is None:
        if incoming.resume:
            raise Refused(404, f"thread {thread_id!r} does not exist: there is nothing to resume")
        return service.starter(_task_of(incoming), thread_id)
    if latest.flow_name != service.flow.name or latest.flow_fingerprint != flow_fingerprint(service.flow):
        raise Refused(409, f"thread {thread_id!r} was saved by another flow ({latest.flow_name!r}) or definition")
    if latest.status is ThreadStatus.FINISHED:
        raise Refused(409, f"thread {thread_id!r} has finished; start another thread_id")
    if latest.status is not ThreadStatus.PAUSED:
        if incoming.resume:
            raise Refused(409, f"thread {thread_id!r} is {latest.status.value}, not waiting for an answer")
        return service.continuer(thread_id, None)  # crashed or failed: on from its last checkpoint
    position = load_position(latest, service.flow)
    expected = interrupt_id(thread_id, len(position.transitions))
    question = position.pending.question if position.pending is not None else ""
    entries = incoming.resume or []
    if len(entries) != 1 or entries[0].interrupt_id != expected:
        raise Refused(
            409,
            f"thread {thread_id!r} waits for an answer to interrupt {expected!r} ({question[:200]!r}): "
            "send resume=[{interruptId, status: 'resolved', payload: ANSWER}]",
        )
    entry = entries[0]
    if entry.status != "resolved" or not isinstance(entry.payload, str):
        raise Refused(400, f"interrupt {expected!r}: the answer must be resolved with a text payload")
    return service.continuer(thread_id, entry.payload)


class _NotStarted(Exception):
    """A run that could not start (before its first event): answered with ``status``, not a stream."""

    def __init__(self, status: int, reason: str):
        super().__init__(reason)
        self.status, self.reason = status, reason


async def _prefixed(first: str, rest: AsyncIterator[str]) -> AsyncIterator[str]:
    """``first``, then ``rest``; closing it closes ``rest`` (the run behind it)."""
    async with aclosing(rest):  # type: ignore[type-var]
        yield first
        async for item in rest:
            yield item


class _SlotResponse(StreamingResponse):
    """A stream holding a run slot: the run is closed (its thread joined) and its slot given back
    when the response ends, however it ends (even when its stream never started)."""

    def __init__(self, content: AsyncIterator[str], slots: RunSlots, **kwargs: Any):
        super().__init__(content, **kwargs)
        self._events, self._slots = content, slots

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            try:
                await self._events.aclose()  # type: ignore[attr-defined]
            finally:
                self._slots.give()


def build_app(
    service: FlowService,
    *,
    base_url: str,
    access: ServeAccess | None = None,
    limits: ServeLimits | None = None,
) -> Starlette:
    """The HTTP application serving ``service``'s flow.

    Args:
        service: the flow, its models and its checkpointer.
        base_url: where clients reach the server (the A2A agent card names ``{base_url}/a2a/``).
        access: allowed hosts and origins, and the token (default: loopback names, the server's
            own origin only, no token).
        limits: body size, messages, runs at once, run time-out (default: :class:`ServeLimits`).
    """
    access = access or ServeAccess()
    limits = limits or ServeLimits()
    locks = ThreadLocks()
    slots = RunSlots(limits.max_runs)

    def refuse(status: int, reason: str, detail: Any = None, headers: dict[str, str] | None = None) -> JSONResponse:
        body: dict[str, Any] = {"error": reason}
        if detail is not None:
            body["detail"] = detail
        return JSONResponse(body, status_code=status, headers=headers)

    async def agui(request: Request) -> Response:
        raw = await request.body()  # at most limits.max_body_bytes: the guard read it
        try:
            incoming = RunAgentInput.model_validate_json(raw)
        except ValidationError as err:
            problems = [{"loc": list(e["loc"]), "msg": e["msg"]} for e in err.errors(include_url=False)]
            return refuse(422, "the body is not a valid AG-UI RunAgentInput", problems)
        try:
            check_input(incoming, limits)
            await asyncio.to_thread(_plan, service, incoming)  # refuse what cannot run before streaming
        except Refused as err:
            return refuse(err.status, err.reason)
        except StateFlowError as err:
            return refuse(409, f"{type(err).__name__}: {err}")
        encoder = EventEncoder(accept=request.headers.get("accept"))
        if not slots.take():  # taken last: the response below gives it back, however it ends
            busy = slots.busy(limits.retry_after_s)
            return refuse(busy.status, busy.reason, headers=busy.headers)
        # The run's first event comes once it holds its thread's claim (another process, e.g. a
        # second server on the same store, may hold it): wait for it before answering, so a
        # request that cannot run gets a 409, not a stream that only says so.
        events = _agui_events(incoming, encoder)
        try:
            first = await anext(events)
        except _NotStarted as err:
            slots.give()
            return refuse(err.status, err.reason)
        except BaseException:
            slots.give()
            raise
        return _SlotResponse(_prefixed(first, events), slots, media_type=encoder.get_content_type())

    async def _agui_events(incoming: RunAgentInput, encoder: EventEncoder) -> AsyncIterator[str]:
        async with locks.hold(incoming.thread_id):
            try:  # checked again: another request for the thread may have run meanwhile
                call = await asyncio.to_thread(_plan, service, incoming)
            except Refused as err:
                raise _NotStarted(err.status, err.reason) from None
            except StateFlowError as err:
                raise _NotStarted(409, f"{type(err).__name__}: {err}") from None
            translator = AGUITranslator(incoming.thread_id, incoming.run_id)
            started = False
            try:
                async with aclosing(astream_call(call)) as events:
                    async for event in within(events, limits.run_timeout_s):
                        started = True
                        for out in translator.translate(event):
                            yield encoder.encode(out)
            except TimeoutError:
                message = (
                    f"the run took longer than the server's time-out of {limits.run_timeout_s:g} s (its --timeout) "
                    "and was cancelled; its thread is kept at its last checkpoint"
                )
                yield encoder.encode(RunErrorEvent(message=message, code="timeout"))
            except StateFlowError as err:  # the run could not start (e.g. another process holds the thread)
                if not started:
                    raise _NotStarted(409, f"{type(err).__name__}: {err}") from None
                yield encoder.encode(RunErrorEvent(message=f"{type(err).__name__}: {err}", code="not_started"))

    async def thread(request: Request) -> Response:
        thread_id = request.path_params["thread_id"]
        if not _THREAD_ID.match(thread_id):
            return refuse(400, "malformed thread id")
        latest = await asyncio.to_thread(service.checkpointer.latest, thread_id)
        if latest is None:
            return refuse(404, f"no thread {thread_id!r}")
        body: dict[str, Any] = {
            "thread_id": thread_id,
            "flow": latest.flow_name,
            "status": latest.status.value,
            "state": latest.state,
            "step": latest.step,
        }
        if latest.status is ThreadStatus.PAUSED:
            position = load_position(latest, service.flow)
            if position.pending is not None:
                body["question"] = position.pending.question
                body["interrupt_id"] = interrupt_id(thread_id, len(position.transitions))
        return JSONResponse(body)

    async def health(request: Request) -> Response:
        return JSONResponse({"flow": service.flow.name, "states": list(service.flow.states)})

    from stateflow.serve.a2a import a2a_app

    bearer = access.token is not None
    a2a = a2a_app(service, f"{base_url.rstrip('/')}/a2a/", locks, limits=limits, slots=slots, bearer=bearer)
    routes = [
        Route("/agui", agui, methods=["POST"]),
        Route("/threads/{thread_id}", thread, methods=["GET"]),
        Route("/health", health, methods=["GET"]),
        Mount("/a2a", app=a2a),
    ]
    return Starlette(routes=routes, middleware=[Middleware(ServeGuard, access=access, limits=limits)])

"""A flow as an A2A agent: AG2's ``autogen.a2a`` server with an executor that runs the flow.

AG2's :class:`autogen.a2a.A2aAgentServer` serves an agent over the Agent2Agent protocol (agent
card, JSON-RPC, streamed artifacts, the task store). Its own executor asks a ``ConversableAgent``
for one reply and never learns the conversation's ``context_id``, so a paused flow could not be
continued. :class:`FlowExecutor` takes its place:

* an A2A conversation (its ``context_id``) is one durable thread of the server's checkpointer
  (:func:`thread_for_context`); its first message runs the flow on the message's text;
* a run that pauses on a deferred question (``Human(defer=True)``, an interrupt) puts the task
  in state ``input-required`` with the question as the status message; the client's next
  message in the same conversation (the same task, or a new one in the same context, as AG2's
  ``A2aRemoteAgent`` sends it) is the answer and resumes the thread;
* the run's token deltas are streamed as chunks of one artifact, the answer's last chunk marked
  ``lastChunk`` (:class:`_AnswerArtifact`: a reply's first chunk replaces the artifact, so it
  holds the answer once, and so does a task paused and answered in a later message), and the
  task completes; a failed run is a failed task (sending another message continues the thread
  from its last checkpoint); a message for a finished conversation is rejected;
* messages for one conversation are served one at a time (the lock AG-UI requests use too);
  ``tasks/cancel`` cancels a task and stops its run;
* the server's limits hold here too (:class:`A2AGate` before AG2's server): an A2A message with
  more parts or text than :class:`~stateflow.serve.guard.ServeLimits` allows is refused with 413,
  one beyond the server's runs at once with 503 and ``Retry-After``; a run past the time-out is
  a failed task; the server keeps at most ``ServeLimits.max_finished_tasks`` finished tasks
  for ``tasks/get`` (:class:`BoundedTaskStore`).

Another agent calls the flow with AG2's own client, ``autogen.a2a.A2aRemoteAgent(url=...)``.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
import uuid
from collections import OrderedDict
from contextlib import aclosing
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.tasks import TaskStore, TaskUpdater
from a2a.types import TaskState

from stateflow.checkpoint import ThreadStatus
from stateflow.errors import StateFlowError
from stateflow.events import RunFinished, StateEntered, StepRecorded, TokenDelta, ToolCalled
from stateflow.fingerprint import flow_fingerprint
from stateflow.live import astream_call
from stateflow.serve.guard import (
    Receive,
    Refused,
    RunSlots,
    Scope,
    Send,
    ServeLimits,
    ThreadLocks,
    read_body,
    replay,
    send_refusal,
    within,
)

if TYPE_CHECKING:
    from starlette.applications import Starlette

    from stateflow.serve.app import FlowService, RunCall

__all__ = ["A2AGate", "BoundedTaskStore", "FlowExecutor", "a2a_app", "check_message", "thread_for_context"]

#: The JSON-RPC methods that run the flow (A2A 0.3 names and the 1.x ones AG2's server takes too).
RUN_METHODS = frozenset({"message/send", "message/stream", "SendMessage", "SendStreamingMessage"})

_FINISHED_STATES = frozenset(
    {
        TaskState.TASK_STATE_COMPLETED,
        TaskState.TASK_STATE_FAILED,
        TaskState.TASK_STATE_CANCELED,
        TaskState.TASK_STATE_REJECTED,
    }
)

_SAFE_CONTEXT = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:@-]{0,118}$")


def thread_for_context(context_id: str) -> str:
    """The durable thread of an A2A conversation: ``a2a-{context_id}`` when the id is short
    and plain, else ``a2a-`` and a digest of it (a client chooses the id: it is untrusted)."""
    if _SAFE_CONTEXT.match(context_id):
        return f"a2a-{context_id}"
    return f"a2a-{hashlib.sha256(context_id.encode('utf-8', 'surrogatepass')).hexdigest()[:40]}"


def _agent_name(flow_name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_-]", "_", flow_name) or "flow"


def _text_of(messages: list[dict[str, Any]]) -> str | None:
    """The caller's last message text (A2A message parts may carry no role: they are the caller's)."""
    for m in reversed(messages):
        if m.get("role", "user") == "user" and isinstance(m.get("content"), str) and m["content"].strip():
            return str(m["content"])
    return None


def plan_message(service: FlowService, thread_id: str, text: str) -> RunCall:
    """What a conversation's message asks for, checked against its thread's latest checkpoint.

    Raises:
        Refused: the message cannot be served (the reason says why).
    """
    latest = service.checkpointer.latest(thread_id)
    if latest is None:
        return service.starter(text, thread_id)
    if latest.flow_name != service.flow.name or latest.flow_fingerprint != flow_fingerprint(service.flow):
        raise Refused(409, f"thread {thread_id!r} was saved by another flow ({latest.flow_name!r}) or definition")
    if latest.status is ThreadStatus.FINISHED:
        raise Refused(409, f"this conversation's thread {thread_id!r} has finished; start a new conversation")
    if latest.status is ThreadStatus.PAUSED:
        return service.continuer(thread_id, text)  # the message answers the question
    return service.continuer(thread_id, None)  # crashed or failed: on from its last checkpoint


def check_message(request: Any, limits: ServeLimits) -> None:
    """Refuse (413) a run request whose message has more parts, or more text, than ``limits``.

    ``request`` is the parsed JSON-RPC body; anything that is not a run request, or not shaped
    like one, is left to AG2's server (which answers malformed requests itself).
    """
    if not isinstance(request, dict) or request.get("method") not in RUN_METHODS:
        return
    params = request.get("params")
    message = params.get("message") if isinstance(params, dict) else None
    parts = message.get("parts") if isinstance(message, dict) else None
    if not isinstance(parts, list):
        return
    if len(parts) > limits.max_messages:
        raise Refused(
            413, f"the message has {len(parts)} parts; this server takes at most {limits.max_messages} (--max-messages)"
        )
    size = 0
    for part in parts:
        text = part.get("text") if isinstance(part, dict) else None
        size += len(text) if isinstance(text, str) else len(json.dumps(part))
    if size > limits.max_message_chars:
        raise Refused(
            413,
            f"the message has {size} characters; this server takes at most {limits.max_message_chars} "
            "(--max-message-chars)",
        )


class A2AGate:
    """ASGI middleware before AG2's A2A server: a run request (``message/send``, ``message/stream``)
    is checked against the limits (:func:`check_message`) and refused with 503 when the server
    runs :attr:`~stateflow.serve.guard.ServeLimits.max_runs` runs already. The body was read (and
    its size checked) by :class:`~stateflow.serve.guard.ServeGuard`."""

    def __init__(self, app: Any, *, limits: ServeLimits, slots: RunSlots):
        self.app, self.limits, self.slots = app, limits, slots

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        try:
            body = await read_body(receive, self.limits.max_body_bytes)
        except Refused as refused:
            await send_refusal(send, refused)
            return
        try:
            request = json.loads(body)
        except ValueError:
            request = None  # AG2's server answers with a JSON-RPC parse error
        try:
            check_message(request, self.limits)
            if isinstance(request, dict) and request.get("method") in RUN_METHODS and self.slots.full():
                raise self.slots.busy(self.limits.retry_after_s)
        except Refused as refused:
            await send_refusal(send, refused)
            return
        await self.app(scope, replay(body, receive), send)


class BoundedTaskStore(TaskStore):
    """AG2's in-memory task store, keeping at most ``keep_finished`` finished tasks.

    AG2's server keeps every task in memory for ``tasks/get`` and nothing removes finished ones:
    about 4 KiB per A2A task, the only growth left in a 5,000-run soak (``docs/live.md``). A
    finished task (completed, failed, canceled, rejected) counts from its last save; beyond the
    bound the oldest is deleted. A task in any other state (working, input-required) is kept.
    """

    def __init__(self, keep_finished: int):
        from a2a.server.tasks import InMemoryTaskStore

        self.keep_finished = keep_finished
        self._inner = InMemoryTaskStore()
        self._finished: OrderedDict[str, Any] = OrderedDict()  # task id -> its save's context

    async def save(self, task: Any, context: Any) -> None:
        await self._inner.save(task, context)
        if task.status.state in _FINISHED_STATES:
            self._finished[task.id] = context
            self._finished.move_to_end(task.id)
        else:
            self._finished.pop(task.id, None)
        while len(self._finished) > self.keep_finished:
            old, old_context = self._finished.popitem(last=False)
            await self._inner.delete(old, old_context)

    async def get(self, task_id: str, context: Any) -> Any:
        return await self._inner.get(task_id, context)

    async def list(self, params: Any, context: Any) -> Any:
        return await self._inner.list(params, context)

    async def delete(self, task_id: str, context: Any) -> None:
        self._finished.pop(task_id, None)
        await self._inner.delete(task_id, context)


class _AnswerArtifact:
    """A task's answer as one A2A artifact, streamed as the protocol describes it.

    The artifact's id is the task's (``{task_id}-answer``), so a task that pauses and is answered
    in a later message keeps one artifact. A reply's first token replaces the artifact's content
    (``append`` false: an earlier state's reply was not the answer), its next tokens are appended
    (``append`` true). The latest token is held back until the next one comes, so that the last
    one can carry ``lastChunk`` when the run completes: the chunks then spell the answer once.
    When the answer is not what was streamed (a tool's result, a task answered in a later
    message, a model that did not stream), it is sent whole as the artifact's only and last chunk.
    """

    def __init__(self, updater: TaskUpdater):
        self.updater = updater
        self.artifact_id = f"{updater.task_id}-answer"
        self.text = ""  # the current reply's text so far, held chunk included
        self._held: tuple[str, bool] | None = None  # (text, append) of the chunk not yet sent
        self._fresh = True  # the next token starts a reply

    async def _send(self, text: str, *, append: bool, last: bool) -> None:
        from a2a.types import Part

        await self.updater.add_artifact(
            parts=[Part(text=text)], artifact_id=self.artifact_id, name="result", append=append, last_chunk=last
        )

    async def flush(self) -> None:
        """Send the held chunk (not the last one: the task is not complete)."""
        if self._held is not None:
            (text, append), self._held = self._held, None
            await self._send(text, append=append, last=False)

    def reply_ended(self) -> None:
        self._fresh = True

    async def token(self, text: str) -> None:
        if not text:
            return
        await self.flush()
        if self._fresh:
            self._held, self.text, self._fresh = (text, False), text, False
        else:
            self._held, self.text = (text, True), self.text + text

    async def finish(self, answer: str) -> None:
        """The artifact's last chunk: the held token when the reply streamed is the answer,
        else the whole answer (which replaces what was streamed)."""
        if self._held is not None and self.text == answer:
            (text, append), self._held = self._held, None
            await self._send(text, append=append, last=True)
            return
        self._held = None
        await self._send(answer, append=False, last=True)


class FlowExecutor(AgentExecutor):
    """Runs the served flow for each A2A message; one durable thread per conversation.

    Args:
        service: the flow, its models and the checkpointer.
        locks: the per-thread locks shared with the server's other routes.
        limits: the server's limits (the run time-out is applied here).
        slots: the server's runs in flight, shared with its other routes.
    """

    def __init__(
        self,
        service: FlowService,
        locks: ThreadLocks,
        limits: ServeLimits | None = None,
        slots: RunSlots | None = None,
    ):
        self.service = service
        self.locks = locks
        self.limits = limits or ServeLimits()
        self.slots = slots or RunSlots(self.limits.max_runs)

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        """Serve one message: start, answer or continue the conversation's thread."""
        from a2a.compat.v0_3 import conversions
        from a2a.compat.v0_3.types import Task, TaskState, TaskStatus
        from autogen.a2a.utils import request_message_from_a2a

        assert context.message is not None
        request = conversions.to_compat_message(context.message)
        task_id = context.task_id or request.task_id or str(uuid.uuid4())
        context_id = context.context_id or request.context_id or str(uuid.uuid4())
        if context.current_task is None:
            submitted = Task(
                id=task_id,
                context_id=context_id,
                status=TaskStatus(state=TaskState.submitted, timestamp=datetime.now(UTC).isoformat()),
                history=[request],
            )
            await event_queue.enqueue_event(conversions.to_core_task(submitted))
        updater = TaskUpdater(event_queue, task_id, context_id)
        await updater.start_work()
        text = _text_of(request_message_from_a2a(request).messages)
        if text is None:
            await updater.reject(self._message(updater, "the message carries no text to run the flow on"))
            return
        if not self.slots.take():  # the gate saw a free slot, but others took them meanwhile
            await updater.reject(self._message(updater, self.slots.busy(self.limits.retry_after_s).reason))
            return
        try:
            thread_id = thread_for_context(context_id)
            async with self.locks.hold(thread_id):
                try:
                    call = await asyncio.to_thread(plan_message, self.service, thread_id, text)
                except (Refused, StateFlowError) as err:
                    await updater.reject(self._message(updater, str(err)))
                    return
                await self._run(call, thread_id, updater)
        finally:
            self.slots.give()

    async def _run(self, call: RunCall, thread_id: str, updater: TaskUpdater) -> None:
        answer = _AnswerArtifact(updater)
        result = None
        try:
            async with aclosing(astream_call(call)) as events:
                async for event in within(events, self.limits.run_timeout_s):
                    if isinstance(event, TokenDelta):
                        await answer.token(event.text)
                    elif isinstance(event, RunFinished):
                        result = event.result
                    elif isinstance(event, StepRecorded | ToolCalled | StateEntered):
                        answer.reply_ended()  # the next token starts another reply
        except TimeoutError:
            await answer.flush()
            message = (
                f"the run took longer than the server's time-out of {self.limits.run_timeout_s:g} s (its --timeout) "
                "and was cancelled; send another message to continue the conversation from its last checkpoint"
            )
            await updater.failed(self._message(updater, message))
            return
        except StateFlowError as err:  # the run could not start (e.g. another process holds the thread)
            await answer.flush()
            await updater.failed(self._message(updater, f"{type(err).__name__}: {err}"))
            return
        assert result is not None  # a run that returns has announced its end
        if result.status == "failed":
            await answer.flush()
            await updater.failed(self._message(updater, f"the flow failed: {result.error}"))
            return
        if result.pending is not None:
            await answer.flush()  # the task goes on: its artifact gets its last chunk when it completes
            await updater.requires_input(self._message(updater, result.pending.question))
            return
        await answer.finish(RunFinished(result).to_dict()["answer"] or "")
        await updater.complete()

    @staticmethod
    def _message(updater: TaskUpdater, text: str) -> Any:
        """An agent message on the updater's task (a status update's text)."""
        from autogen.a2a.utils import new_agent_text_message, to_core_message

        return to_core_message(new_agent_text_message(text, context_id=updater.context_id, task_id=updater.task_id))

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        """``tasks/cancel``: mark the task canceled. A running task's run stops too: the request
        handler then cancels :meth:`execute`, which closes the run's event stream (the run is
        cancelled at its next event and its thread is joined; the thread is failed at its last
        checkpoint and the conversation's next message continues it)."""
        assert context.task_id is not None and context.context_id is not None
        await TaskUpdater(event_queue, context.task_id, context.context_id).cancel()


def a2a_app(
    service: FlowService,
    url: str,
    locks: ThreadLocks | None = None,
    *,
    limits: ServeLimits | None = None,
    slots: RunSlots | None = None,
    bearer: bool = False,
) -> Starlette:
    """The A2A Starlette application serving ``service``'s flow; ``url`` is where it is mounted
    (written into the agent card: callers post their JSON-RPC requests there). ``limits`` and
    ``slots`` are the server's (default: :class:`~stateflow.serve.guard.ServeLimits`, own slots);
    ``bearer``: the server needs a bearer token, which the card declares as its security scheme."""
    from a2a.compat.v0_3.types import AgentSkill, HTTPAuthSecurityScheme, SecurityScheme
    from autogen import ConversableAgent
    from autogen.a2a import A2aAgentServer, CardSettings

    flow = service.flow
    limits = limits or ServeLimits()
    slots = slots or RunSlots(limits.max_runs)
    executor = FlowExecutor(service, locks or ThreadLocks(), limits, slots)
    description = flow.description or f"StateFlow flow {flow.name!r} (states: {', '.join(flow.states)})"
    name = _agent_name(flow.name)

    class FlowServer(A2aAgentServer):
        """AG2's server with the flow's executor in place of its one-reply agent executor."""

        @property
        def executor(self) -> Any:  # type: ignore[override]
            return executor

    # The card is drawn from an agent's name and description; the agent itself is never asked.
    card_agent = ConversableAgent(
        name, llm_config=False, human_input_mode="NEVER", code_execution_config=False, description=description
    )
    skill = AgentSkill(id=name, name=flow.name, description=description, tags=["stateflow", "flow"])
    security: dict[str, Any] = {}
    if bearer:
        scheme = HTTPAuthSecurityScheme(scheme="bearer", description="the server's token (stateflow serve --token)")
        security = {"security_schemes": {"bearer": SecurityScheme(root=scheme)}, "security": [{"bearer": []}]}
    server = FlowServer(card_agent, url=url, agent_card=CardSettings(skills=[skill], **security))
    handler = server.build_request_handler(task_store=BoundedTaskStore(limits.max_finished_tasks))
    app = server.build_starlette_app(request_handler=handler)
    app.add_middleware(A2AGate, limits=limits, slots=slots)
    return app

"""A flow as an A2A agent: AG2's ``autogen.a2a`` server around a ``ConversableAgent`` that runs it.

AG2's :class:`autogen.a2a.A2aAgentServer` serves any ``ConversableAgent`` over the Agent2Agent
protocol (agent card, JSON-RPC, streamed artifacts). Its executor asks the agent for a reply
through ``a_generate_oai_reply``; :class:`FlowAgent` answers that by running the flow on the
caller's last message (a new thread per request, saved in the server's checkpointer) and streams
the run's token deltas back as AutoGen ``StreamEvent`` s, which the server turns into artifact
updates. The reply is the run's last model (or tool) message; a run that pauses on a deferred
question replies with the question and its thread id (answer it over AG-UI or ``stateflow
resume``); a failed run is a failed A2A task.

Another agent calls the flow with AG2's own client, ``autogen.a2a.A2aRemoteAgent(url=...)``.
"""

from __future__ import annotations

import re
import uuid
from contextlib import aclosing
from typing import TYPE_CHECKING, Any

from autogen import ConversableAgent
from autogen.events.client_events import StreamEvent
from autogen.io.base import IOStream

from stateflow.events import RunFinished, TokenDelta
from stateflow.live import astream_call

if TYPE_CHECKING:
    from starlette.applications import Starlette

    from stateflow.serve.app import FlowService

__all__ = ["FlowAgent", "a2a_app"]


def _agent_name(flow_name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_-]", "_", flow_name) or "flow"


def _task_text(messages: list[dict[str, Any]] | None) -> str | None:
    """The caller's last message text (A2A messages may carry no role: they are the caller's)."""
    for m in reversed(messages or []):
        if m.get("role", "user") == "user" and isinstance(m.get("content"), str) and m["content"].strip():
            return str(m["content"])
    return None


class FlowAgent(ConversableAgent):
    """A ``ConversableAgent`` whose reply is a run of the served flow.

    Args:
        service: the flow, its models and the checkpointer (:class:`~stateflow.serve.app.FlowService`).
    """

    def __init__(self, service: FlowService):
        flow = service.flow
        super().__init__(
            _agent_name(flow.name),
            llm_config=False,
            human_input_mode="NEVER",
            code_execution_config=False,
            description=flow.description or f"StateFlow flow {flow.name!r} (states: {', '.join(flow.states)})",
        )
        self.service = service

    async def a_generate_oai_reply(  # type: ignore[override]
        self,
        messages: list[dict[str, Any]] | None = None,
        sender: Any = None,
        config: Any = None,
        **kwargs: Any,
    ) -> tuple[bool, str | dict[str, Any] | None]:
        task = _task_text(messages)
        if task is None:
            return True, "error: the request carried no text message to run the flow on"
        iostream = IOStream.get_default()  # AG2's executor collects the streamed text here
        thread_id = f"a2a-{uuid.uuid4().hex[:12]}"
        result = None
        async with aclosing(astream_call(self.service.starter(task, thread_id))) as events:
            async for event in events:
                if isinstance(event, TokenDelta):
                    iostream.send(StreamEvent(content=event.text))
                elif isinstance(event, RunFinished):
                    result = event.result
        assert result is not None
        if result.status == "failed":
            raise RuntimeError(f"the flow failed: {result.error}")
        if result.pending is not None:
            return True, f"{result.pending.question}\n(thread {thread_id} waits for this answer)"
        return True, RunFinished(result).to_dict()["answer"] or ""


def a2a_app(service: FlowService, url: str) -> Starlette:
    """The A2A Starlette application serving ``service``'s flow; ``url`` is where it is mounted
    (written into the agent card: callers post their JSON-RPC requests there)."""
    from a2a.compat.v0_3.types import AgentSkill
    from autogen.a2a import A2aAgentServer, CardSettings

    agent = FlowAgent(service)
    flow = service.flow
    skill = AgentSkill(id=agent.name, name=flow.name, description=agent.description, tags=["stateflow", "flow"])
    return A2aAgentServer(agent, url=url, agent_card=CardSettings(skills=[skill])).build()

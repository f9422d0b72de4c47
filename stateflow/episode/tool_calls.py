"""Tools that a model calls: ``LLM(tools=...)`` and a user's own AutoGen agent's tool calls.

A model requests a tool either through OpenAI function calling (profiles with
``native_tools``) or through the text protocol of :mod:`stateflow.tool_protocol`. Either way the
tool runs through an AutoGen function map (``ConversableAgent.execute_function``), each model
call and each execution is a step, and each result is a history message.
"""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING, Any

from autogen import Agent, ConversableAgent

from stateflow.errors import LLMError, StateFlowError
from stateflow.events import ToolCalled
from stateflow.messages import Kind, Message
from stateflow.outputs import LLM
from stateflow.profiles import ModelProfile
from stateflow.state_agent import StateAgent, render_calls, reply_text
from stateflow.tool_protocol import parse_text_action, with_text_protocol, with_text_protocol_stop

if TYPE_CHECKING:
    from stateflow.episode.loop import Episode

__all__ = ["llm_with_tools", "run_tool"]


def llm_with_tools(
    ep: Episode,
    out: LLM,
    agent: StateAgent,
    profile: ModelProfile,
    messages: list[dict[str, Any]],
    sender: Agent | None,
    fields: dict[str, Any],
) -> str:
    """Model calls and tool executions until a reply calls no tool (at most max_tool_rounds).

    Each model call and each tool execution is a step; tool results are history messages.
    Returns the whole exchange as one text for the group chat, so later states see it too.
    """
    toolset = ep.agents.toolsets[id(out)]
    native = profile.native_tools
    if native:
        fields = {**fields, "tools": toolset.schemas()}
    else:
        messages, fields = with_text_protocol(messages, toolset), with_text_protocol_stop(fields)
    transcript: list[str] = []
    for round_ in range(out.max_tool_rounds + 1):
        try:
            reply, usage = ep.backends.call_raw(agent, profile, messages, sender, fields)
        except LLMError as err:
            err.state = ep.ctx.state
            raise
        text = reply_text(reply)
        calls = reply.get("tool_calls") if isinstance(reply, dict) and native else None
        action = None if native else parse_text_action(text, toolset)
        shown = text if not calls else "\n".join(p for p in (text, render_calls(calls)) if p)
        ep.log.record(out.label, Message("assistant", agent.name, ep.ctx.state, Kind.LLM, shown, usage=usage), usage)
        transcript.append(shown)
        if not calls and action is None:
            return "\n".join(transcript) or "(empty reply)"
        if round_ == out.max_tool_rounds:
            raise StateFlowError(
                f"state {ep.ctx.state!r}: the model still requested tools after {out.max_tool_rounds} rounds "
                f"(last: {shown[:200]!r}); raise LLM(max_tool_rounds=...) or check the tools' results"
            )
        if calls:
            messages.append({"role": "assistant", "content": reply.get("content"), "tool_calls": calls})
            for call in calls:
                fn = call["function"]
                name, arguments = fn.get("name", ""), fn.get("arguments")
                # bad arguments get one short line back, not pydantic's multi-line report with URLs
                problem = toolset.native_call_problem(name, arguments)
                if problem is None:
                    result = run_tool(ep, name, arguments, call.get("id"))
                else:
                    result = _refused(ep, name, arguments, problem, call.get("id"))
                messages.append({"role": "tool", "tool_call_id": call.get("id"), "content": result})
                transcript.append(f"Observation: {result}")
        else:
            assert action is not None
            if action.error is not None:
                result = _refused(ep, action.name, action.arguments, action.error, None)
            else:
                result = run_tool(ep, action.name, action.arguments, None)
            messages += [
                {"role": "assistant", "content": text},
                {"role": "user", "content": f"Observation: {result}"},
            ]
            transcript.append(f"Observation: {result}")
    raise AssertionError("unreachable")


def _refused(ep: Episode, name: str, arguments: str | None, problem: str, call_id: str | None) -> str:
    """Record a tool call that was not run because its arguments were wrong; returns the error
    text the model gets back."""
    result = f"error: {problem}"
    meta: dict[str, Any] = {"ok": False, **({"call_id": call_id} if call_id else {})}
    ep.log.record(
        f"tool_call[{name}]",
        Message("user", name, ep.ctx.state, Kind.TOOL, result, meta=meta),
        None,
        0.0,
        {"tool": name, "arguments": arguments, "ok": False},
    )
    return result


def run_tool(
    ep: Episode,
    name: str,
    arguments: str | None,
    call_id: str | None,
    *,
    executor: ConversableAgent | None = None,
    agent: str | None = None,
) -> str:
    """Execute one requested tool through an AutoGen function map and record it as a step.

    A failing tool, unknown name or malformed arguments come back as an error text (AutoGen's
    ``execute_function`` contract) with ``meta["ok"] = False``.

    Args:
        executor: the agent whose function map runs it (default: the run's ``tools`` agent).
        agent: the user's agent that asked for it, if one did (kept in the step's detail).
    """
    runner = executor or ep.agents.tool_runner
    try:
        args: Any = json.loads(arguments or "{}")
    except json.JSONDecodeError:
        args = arguments
    ep.log.announce(ToolCalled(ep.ctx.state, name, args, call_id))
    t0 = time.perf_counter()
    ok, result = runner.execute_function({"name": name, "arguments": arguments or "{}"}, call_id=call_id)
    latency = time.perf_counter() - t0
    content = str(result.get("content", ""))
    meta = {"ok": ok, "tool": name, "arguments": args, **({"call_id": call_id} if call_id else {})}
    msg = Message("user", name, ep.ctx.state, Kind.TOOL, content, meta=meta)
    detail = {"tool": name, "arguments": args, "ok": ok, **({"agent": agent} if agent else {})}
    ep.log.record(f"tool_call[{name}]", msg, None, latency, detail)
    return content

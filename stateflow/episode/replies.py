"""The reply of each kind of output function, as AutoGen agents give it.

The speaker selector (:meth:`stateflow.episode.loop.Episode._next_speaker`) picks the agent for
the state's next output function and sets it as ``ep.current``; the agent's reply function is one
of the handlers below. Each records its step(s) through ``ep.log`` and returns the text the
group chat shows. AutoGen's ``GroupChat`` ends the chat on an empty reply, so an empty result is
sent as a visible marker instead; the history keeps the real (empty) text.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from autogen import Agent, ConversableAgent

from stateflow.episode.fanout import parallel_reply
from stateflow.episode.levers import cut, guarded, retried, structured, voted
from stateflow.episode.tool_calls import llm_with_tools, run_tool
from stateflow.errors import LLMError, StateFlowError, ToolError
from stateflow.events import ToolCalled
from stateflow.messages import Kind, Message, Usage
from stateflow.outputs import LLM, AutoGenAgent, Human, Prompt, Tool, ToolResult
from stateflow.parallel import Parallel
from stateflow.state_agent import StateAgent, render_calls, reply_text, usage_totals
from stateflow.views import PROMPTER

if TYPE_CHECKING:
    from stateflow.episode.loop import Episode

__all__ = ["agent_reply", "human_reply", "llm_reply", "prompter_reply", "tool_reply"]


def prompter_reply(ep: Episode, recipient: Agent, messages: Any, sender: Agent | None) -> str:
    """A :class:`Prompt`: its fixed text, said by the ``instructions`` agent."""
    out = ep.current
    assert isinstance(out, Prompt)
    ep.log.record(out.label, Message("user", PROMPTER, ep.ctx.state, Kind.PROMPT, out.text), None, 0.0)
    return out.text


def tool_reply(ep: Episode, recipient: Agent, messages: Any, sender: Agent | None) -> str:
    """A :class:`Tool` output function, run through the ``environment`` agent's function map.

    Raises:
        ToolError: the tool's own code raised (it names the tool, the state and the step).
    """
    out = ep.current
    if isinstance(out, Parallel):  # the environment agent also runs parallel branches
        return parallel_reply(ep, recipient, messages, sender)
    assert isinstance(out, Tool)
    ep.log.announce(ToolCalled(ep.ctx.state, out.name, None))
    t0 = time.perf_counter()
    try:
        result = ep.agents.executor.function_map[ep.agents.tool_keys[id(out)]](ep.ctx)
    except StateFlowError:
        raise
    except Exception as err:  # the tool's own code failed: name it, the state and the step
        raise ToolError(out.name, ep.ctx.state, len(ep.log), err) from err
    latency = time.perf_counter() - t0
    if isinstance(result, str):
        result = ToolResult(result)
    if not isinstance(result, ToolResult):
        raise StateFlowError(f"tool {out.name!r} returned {type(result).__name__}; expected ToolResult or str")
    msg = Message("user", out.name, ep.ctx.state, Kind.TOOL, result.content, meta=result.meta)
    ep.log.record(out.label, msg, result.usage, latency)
    return result.content if result.content != "" else "(no output)"


def llm_reply(ep: Episode, recipient: Agent, messages: Any, sender: Agent | None) -> str:
    """An :class:`LLM` output function: one model call on the state's profile, through its levers
    (:mod:`stateflow.episode.levers`) or its tools (:mod:`stateflow.episode.tool_calls`)."""
    out = ep.current
    assert isinstance(out, LLM)
    assert isinstance(recipient, StateAgent)
    profile = ep.backends.profile(ep.ctx.state, out.profile)
    fields = ep.backends.request_fields(profile, out, ep.ctx)
    if id(out) in ep.agents.toolsets:
        return llm_with_tools(ep, out, recipient, profile, list(messages or []), sender, fields)
    if out.vote is not None:
        return _or_marker(voted(ep, out, recipient, profile, messages, sender, fields), "(empty reply)")
    try:
        text, usage = ep.backends.call(recipient, profile, messages, sender, fields)
        text, usage = retried(ep, out, recipient, profile, messages, sender, fields, text, usage)
        detail: dict[str, Any] = {}
        if out.guard is not None:
            text, usage, found = guarded(ep, out, recipient, profile, list(messages or []), sender, fields, text, usage)
            detail.update(found)
        text, trimmed = cut(out, text)
        detail.update(trimmed)
        meta: dict[str, Any] = {}
        if out.schema is not None:
            text, usage, meta = structured(
                ep, out, recipient, profile, list(messages or []), sender, fields, text, usage
            )
    except LLMError as err:
        err.state = ep.ctx.state
        raise
    msg = Message("assistant", recipient.name, ep.ctx.state, Kind.LLM, text, usage=usage, meta=meta)
    ep.log.record(out.label, msg, usage, usage.latency_s, detail)
    return _or_marker(text, "(empty reply)")


def agent_reply(ep: Episode, recipient: Agent, messages: Any, sender: Agent | None) -> str:
    """An :class:`AutoGenAgent`: the user's agent answers the history (its own system message,
    model, tools, nested chats); its usage is what its clients counted during the reply."""
    out = ep.current
    assert isinstance(out, AutoGenAgent)
    agent, executor = out.agent, out.executor or out.agent
    counted: list[Agent] = [agent, *out.usage_agents]
    before = usage_totals(counted)
    msgs = [dict(m) for m in messages or []]
    t0 = time.perf_counter()
    transcript: list[str] = []
    for round_ in range(out.max_tool_rounds + 1):
        try:
            reply = agent.generate_reply(messages=msgs, sender=recipient)
        except StateFlowError:
            raise
        except Exception as err:
            raise LLMError(f"agent {out.name!r} failed: {type(err).__name__}: {err}", state=ep.ctx.state) from err
        calls = reply.get("tool_calls") if isinstance(reply, dict) else None
        if not calls:
            transcript.append(reply_text(reply))
            break
        if round_ == out.max_tool_rounds:
            raise StateFlowError(f"agent {out.name!r} still requested tools after {out.max_tool_rounds} rounds")
        msgs.append({"role": "assistant", "content": reply.get("content"), "tool_calls": calls, "name": out.name})
        transcript.append("\n".join(p for p in (reply_text(reply), render_calls(calls)) if p))
        for call in calls:
            fn = call.get("function", {})
            content = run_tool(
                ep, str(fn.get("name", "")), fn.get("arguments"), call.get("id"), executor=executor, agent=out.name
            )
            msgs.append({"role": "tool", "tool_call_id": call.get("id"), "content": content})
            transcript.append(f"Observation: {content}")
    latency = time.perf_counter() - t0
    usage = _usage_between(before, usage_totals(counted), latency, out.name)
    text = "\n".join(t for t in transcript if t)
    ep.log.record(out.label, Message("assistant", out.name, ep.ctx.state, Kind.LLM, text, usage=usage), usage, latency)
    return _or_marker(text, "(empty reply)")


def human_reply(ep: Episode, recipient: Agent, messages: Any, sender: Agent | None) -> str:
    """A :class:`Human`: a person's answer, asked through AutoGen's human input; a deferred
    question takes the answer given to ``resume``."""
    out = ep.current
    assert isinstance(out, Human)
    assert isinstance(recipient, ConversableAgent)
    last = ep.log.history.last()
    prompt = f"{last.content}\n{out.prompt}" if out.show_last and last is not None else out.prompt
    from autogen.io.console import IOConsole

    t0 = time.perf_counter()
    # a deferred question takes the answer given to resume(..., answer=...)
    text = ep.take_answer() if out.defer else recipient.get_human_input(prompt, iostream=ep.human_input or IOConsole())
    ep.log.record(out.label, Message("user", out.name, ep.ctx.state, Kind.HUMAN, text), None, time.perf_counter() - t0)
    return _or_marker(text, "(no input)")


def _or_marker(text: str, marker: str) -> str:
    """``text``, or ``marker`` when it is empty (AutoGen's GroupChat ends a chat on an empty reply)."""
    return text if text != "" else marker


def _usage_between(
    before: dict[str, tuple[int, int, float]], after: dict[str, tuple[int, int, float]], latency: float, name: str
) -> Usage:
    """The usage a user's agent added between two readings of its clients' totals."""
    prompt = completion = 0
    cost = 0.0
    models = []
    for model, (p, c, d) in after.items():
        p0, c0, d0 = before.get(model, (0, 0, 0.0))
        if (p, c, d) != (p0, c0, d0):
            models.append(model)
        prompt, completion, cost = prompt + p - p0, completion + c - c0, cost + d - d0
    return Usage(
        prompt_tokens=prompt,
        completion_tokens=completion,
        cost=cost,
        latency_s=latency,
        model=",".join(models),
        profile=f"agent:{name}",
    )

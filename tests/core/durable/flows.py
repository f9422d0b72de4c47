"""Flows and a deterministic fake model for the durable-run tests (also run by a child process).

Every reply is a function of the request alone (the number of messages and the last one), so
an interrupted and continued run gets the same replies as an uninterrupted one, and the fake
server's request log shows any call that was sent twice.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

from autogen import AssistantAgent

from stateflow import LLM, AutoGenAgent, Flow, Human, Judge, ModelProfile, Prompt, State, Tool, ToolResult, Transition


def fake_profile(url: str, name: str = "fake", model: str = "fake-model") -> ModelProfile:
    return ModelProfile(name=name, model=model, base_url=url, api_key_env=None, max_retries=0)


def responder(model: str, messages: list[dict[str, Any]], body: dict[str, Any]) -> str:
    last = str(messages[-1].get("content") or "") if messages else ""
    if "Answer (yes, no)" in last:  # the judge: approve once the third edit is in the history
        return "yes" if "edit 3 applied" in last else "no"
    digest = hashlib.sha256(json.dumps(messages, sort_keys=True).encode()).hexdigest()[:6]
    return f"{model}:{len(messages)}:{digest}"


def request_key(body: dict[str, Any]) -> str:
    """What identifies one model call (a continued run must never send a finished one again)."""
    return hashlib.sha256(json.dumps([body.get("model"), body.get("messages")], sort_keys=True).encode()).hexdigest()


@dataclass
class Edits:
    """A blackboard record (checkpoints save and restore it)."""

    count: int = 0


def edit(ctx) -> ToolResult:
    edits = ctx.board.setdefault(Edits)
    edits.count += 1
    ctx.vars["edits"] = edits.count
    return ToolResult(f"edit {edits.count} applied", {"ok": True, "done": edits.count >= 3})


def long_flow(url: str, *, defer: bool = False, approve_first: bool = False, tool: Any = edit) -> Flow:
    """Draft -> (Edit -> Review) x3 -> [Approve] -> Polish -> [Approve] -> Done: 8 or 9 transitions and every
    output type (Prompt, LLM, Tool, an LLM Judge, a user's AutoGen agent, a deferred Human).

    Args:
        url: the fake OpenAI server the user's own agent (Polish) calls.
        defer: ask a person to approve (the run pauses there).
        approve_first: with ``defer``, ask before Polish instead of after it
            (... -> Review -> Approve -> Polish -> Done), so a model call follows the answer and
            reads it (the kill test kills runs after an answer too).
        tool: the Edit state's tool (a test may wrap it to fail once).
    """
    draft = State("Draft", Prompt("Write a draft."), LLM())
    edit_ = State("Edit", Prompt("Edit it."), LLM(), Tool(tool, "edit"))
    review = State("Review", Prompt("Review it."), LLM())
    config = {
        "config_list": [{"model": "polisher-model", "base_url": url, "api_key": "x", "price": [0, 0]}],
        "cache_seed": None,
    }
    polish = State("Polish", AutoGenAgent(AssistantAgent("polisher", system_message="Polish it.", llm_config=config)))
    done = State("Done", final=True)
    approved = Judge("Is the text approved after enough reviews?", name="approved", choices=("yes", "no"))
    after_review, extra = polish, [Transition(polish, done)]
    if defer:
        approve = State("Approve", Human(prompt="Approve the text?", defer=True, name="editor"))
        if approve_first:
            after_review, extra = approve, [Transition(approve, polish), Transition(polish, done)]
        else:
            extra = [Transition(polish, approve), Transition(approve, done)]
    return Flow(
        "durable-demo",
        initial=draft,
        max_transitions=20,
        transitions=[
            Transition(draft, edit_),
            Transition(edit_, review),
            Transition(review, after_review, when=approved.answer_is("yes")),
            Transition(review, edit_),
            *extra,
        ],
    )

"""What an :class:`~stateflow.outputs.LLM` output function may do around its model call.

Each lever is declared on the output function and applied here, in this order by
:func:`stateflow.episode.replies.llm_reply`:

* ``vote`` (:func:`voted`): sample several candidates, execute each read-only, keep the winner;
* ``retry_when`` (:func:`retried`): ask once more, warmer, when the reply fails a check;
* ``guard`` (:func:`guarded`): re-ask while the reply repeats an action already executed;
* ``cut`` (:func:`cut`): trim a degenerate tail (a reply that loops) before anyone sees it;
* ``schema`` (:func:`structured`): validate the reply into the typed object, re-ask once.

Each discarded reply and each candidate is a step carrying its usage, so a run's token count is
what it paid for.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace as dc_replace
from typing import TYPE_CHECKING, Any

from autogen import Agent, ConversableAgent

from stateflow.errors import LLMError
from stateflow.messages import Kind, Message, Usage
from stateflow.outputs import LLM
from stateflow.profiles import ModelProfile
from stateflow.state_agent import StateAgent
from stateflow.vote import Candidate, tally

if TYPE_CHECKING:
    from stateflow.episode.loop import Episode

__all__ = ["cut", "guarded", "retried", "structured", "voted"]


def _rewritten(message: dict[str, Any], rewrite: Callable[[str], str]) -> dict[str, Any]:
    """A copy of an OpenAI-style message whose text content went through ``rewrite``."""
    content = message.get("content")
    return {**message, "content": rewrite(content)} if isinstance(content, str) else dict(message)


@contextmanager
def _system_message(agent: ConversableAgent, rewrite: Callable[[str], str] | None) -> Iterator[None]:
    """The agent's system message rewritten for one call, restored afterwards (AutoGen prepends
    it to the messages itself, so a vote variant cannot rewrite it in the message list)."""
    if rewrite is None:
        yield
        return
    original = agent.system_message
    agent.update_system_message(rewrite(original))
    try:
        yield
    finally:
        agent.update_system_message(original)


def _clip(text: str, limit: int = 300) -> str:
    """``text`` cut to ``limit`` characters (a result set can be thousands of rows)."""
    return text if len(text) <= limit else text[: limit - 3] + "..."


def retried(
    ep: Episode,
    out: LLM,
    agent: StateAgent,
    profile: ModelProfile,
    messages: Any,
    sender: Agent | None,
    fields: dict[str, Any],
    text: str,
    usage: Usage,
) -> tuple[str, Usage]:
    """``out.retry_when``: when it holds for the reply, record the reply as discarded and ask
    again once at ``out.retry_temperature``. Returns the reply that stands."""
    if out.retry_when is None or not out.retry_when(ep.ctx, text):
        return text, usage
    ep.log.record(
        f"{out.label}[discarded]",
        usage=usage,
        detail={"reply": text, "why": "retry_when held; asked again at a higher temperature"},
    )
    warmer = {**fields, "temperature": out.retry_temperature}
    return ep.backends.call(agent, profile, messages, sender, warmer)


def guarded(
    ep: Episode,
    out: LLM,
    agent: StateAgent,
    profile: ModelProfile,
    messages: list[dict[str, Any]],
    sender: Agent | None,
    fields: dict[str, Any],
    text: str,
    usage: Usage,
) -> tuple[str, Usage, dict[str, Any]]:
    """Re-ask while the reply repeats an executed action (see :class:`RepeatGuard`).

    Each discarded reply is a step with its usage. Returns the reply that stands and the
    detail for its step: ``repeat_guard`` says how many re-asks it took and whether the reply
    still repeats (then :func:`~stateflow.repetition.repeated_action` holds for the flow).
    """
    guard = out.guard
    assert guard is not None
    earlier = guard.repeat_of(ep.ctx, text)
    asks = 0
    for asks, temperature in enumerate(guard.temperatures, start=1):
        if earlier is None:
            return text, usage, {"repeat_guard": {"reasks": asks - 1, "still_repeats": False}}
        ep.log.record(
            f"{out.label}[repeat]",
            usage=usage,
            detail={"reply": text, "repeats": repr(earlier.action), "why": "repeat_guard: action already executed"},
        )
        reask = [*messages, {"role": "user", "content": guard.instruction(earlier)}]
        # A distinct seed per re-ask: at the same seed a sampler can return the same text again.
        warmer = {**fields, "temperature": temperature, "seed": 1000 + asks}
        text, usage = ep.backends.call(agent, profile, reask, sender, warmer)
        earlier = guard.repeat_of(ep.ctx, text)
    return text, usage, {"repeat_guard": {"reasks": asks, "still_repeats": earlier is not None}}


def cut(out: LLM, text: str) -> tuple[str, dict[str, Any]]:
    """``out.cut``: the reply without its degenerate tail, and the detail saying what was cut
    (empty when nothing was)."""
    if out.cut is None:
        return text, {}
    text, found = out.cut.apply(text)
    if found is None:
        return text, {}
    return text, {"degenerate": {"reason": found.reason, "at": found.at, "original_chars": found.original_chars}}


def voted(
    ep: Episode,
    out: LLM,
    agent: StateAgent,
    profile: ModelProfile,
    messages: Any,
    sender: Agent | None,
    fields: dict[str, Any],
) -> str:
    """Sample ``vote.k`` candidates (fewer once :meth:`Vote.done` says so: a quorum, or a
    decided vote), execute each read-only, reply with the winner.

    Each candidate is a step ``<label>[candidate i]`` carrying its usage, action, result key
    and vote count; the winning reply is appended to the history by a step without usage
    (its call is already counted on its candidate step). Returns the winning reply.
    """
    vote = out.vote
    assert vote is not None
    candidates: list[Candidate] = []
    usages: list[Usage] = []
    for i in range(vote.size):
        if vote.done(candidates):
            break  # the candidates left cannot change the winner, or need not: do not pay for them
        variant = vote.variant(i)
        base, asked = fields, messages
        if variant is not None and variant.grammar is not None:
            base = ep.backends.request_fields(profile, dc_replace(out, grammar=variant.grammar), ep.ctx)
        if variant is not None and variant.rewrite is not None:
            asked = [_rewritten(m, variant.rewrite) for m in messages or []]
        try:
            with _system_message(agent, variant.rewrite if variant is not None else None):
                text, usage = ep.backends.call(agent, profile, asked, sender, vote.fields(base, i))
        except LLMError as err:
            err.state = ep.ctx.state
            raise
        if out.cut is not None:
            text, _ = out.cut.apply(text)
        candidates.append(vote.judge(ep.ctx, text))
        usages.append(usage)
    winner, votes = tally(candidates)
    for i, (c, usage) in enumerate(zip(candidates, usages, strict=True)):
        ep.log.record(
            f"{out.label}[candidate {i}]",
            usage=usage,
            detail={
                "reply": c.reply,
                "action": repr(c.action),
                "key": repr(c.key),
                "error": c.error,
                "votes": votes[i],
                "won": i == winner,
                **({"variant": v.name} if (v := vote.variant(i)) is not None else {}),
            },
        )
    text = candidates[winner].reply
    # the tally travels with the message, so result files (which keep the history) show it too
    tally_ = {
        "winner": winner,
        "votes": votes[winner],
        "k": vote.size,
        **({"asked": len(candidates)} if vote.stop_when_decided or vote.quorum else {}),
        "per_candidate": [votes[i] for i in range(len(candidates))],
        "errors": sum(c.error is not None for c in candidates),
        **({"variants": [v.name for v in vote.variants]} if vote.variants else {}),
        # what each candidate ran and got, so a result file alone can tell how the vote went
        # (which answers agreed, what the losers returned) and replay another voting rule
        "candidates": [
            {
                "action": None if c.action is None else _clip(str(c.action)),
                "result": None if c.error is not None else _clip(repr(c.key)),
                "error": None if c.error is None else _clip(c.error),
            }
            for c in candidates
        ],
    }
    msg = Message("assistant", agent.name, ep.ctx.state, Kind.LLM, text, meta={"vote": tally_})
    ep.log.record(out.label, msg, None, 0.0, {"vote": tally_})
    return text


def structured(
    ep: Episode,
    out: LLM,
    agent: StateAgent,
    profile: ModelProfile,
    messages: list[dict[str, Any]],
    sender: Agent | None,
    fields: dict[str, Any],
    text: str,
    usage: Usage,
) -> tuple[str, Usage, dict[str, Any]]:
    """``out.schema``: validate the reply into the schema's object; a reply that does not
    validate is a step ``<label>[invalid]`` with its error and usage, and the model is asked
    once more with the error (:func:`stateflow.structured.ask_structured`). The object goes on
    the blackboard; returns the valid reply, its usage and the message meta carrying the object.

    Raises:
        StructuredOutputError: the second reply does not validate either (after its step).
    """
    from stateflow.errors import StructuredOutputError
    from stateflow.structured import ask_structured

    assert out.schema is not None

    def call(asked: list[dict[str, Any]]) -> tuple[str, Usage]:
        return ep.backends.call(agent, profile, asked, sender, fields)

    try:
        reply = ask_structured(out.schema, (text, usage), messages, call, state=ep.ctx.state)
    except StructuredOutputError as err:  # every attempt was a model call that answered: record its usage
        for (reply_text, reply_usage), error in zip(err.attempts, err.errors, strict=True):
            detail = {"reply": _clip(reply_text), "error": error}
            ep.log.record(f"{out.label}[invalid]", usage=reply_usage, detail=detail)
        raise
    for a in reply.attempts[:-1]:
        ep.log.record(f"{out.label}[invalid]", usage=a.usage, detail={"reply": _clip(a.text), "error": a.error})
    ep.ctx.board.put(reply.obj)
    last = reply.attempts[-1]
    return last.text, last.usage, {"parsed": reply.obj.model_dump(mode="json"), "schema": out.schema.__name__}

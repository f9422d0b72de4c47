"""An episode's trace as steps: what the playback shows one at a time, and side by side aligns.

A *step* is one move of the agent: a model reply (with its state, tokens, cached tokens, latency
and, where a vote ran, the candidates) and the tool results that followed it, or a tool state's
own actions (e.g. Init's ``SHOW TABLES``). The instructions shown to the model before a reply
(``kind == "prompt"``) belong to that step. Two episodes of one task are aligned by step number.

Every field of a message is read defensively: a record's trace is data a model wrote.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from stateflow.tasks.kit.episode_record import EpisodeRecord

__all__ = ["Message", "Step", "Submission", "VoteCandidate", "align", "steps_of", "submission_of", "taken_edges"]


@dataclass(frozen=True)
class VoteCandidate:
    action: str
    result: str
    error: str | None
    votes: int
    winner: bool


@dataclass(frozen=True)
class Message:
    """One message of the trace, as the playback shows it."""

    kind: str  # prompt, llm, tool (anything else is shown as it is)
    name: str
    state: str
    content: str
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    cached_tokens: int | None = None
    latency_s: float | None = None
    model: str = ""
    ok: bool | None = None
    votes: tuple[VoteCandidate, ...] = ()


@dataclass
class Step:
    """One move of the agent (see the module docstring); ``number`` counts from 1."""

    number: int
    state: str
    messages: list[Message] = field(default_factory=list)

    @property
    def action(self) -> str:
        """The step's reply (or first tool output's action), for the side-by-side view."""
        for m in self.messages:
            if m.kind == "llm":
                return m.content
        return next((m.content for m in self.messages if m.kind == "tool"), "")

    @property
    def observations(self) -> list[str]:
        return [m.content for m in self.messages if m.kind == "tool"]

    @property
    def tokens(self) -> int:
        return sum((m.prompt_tokens or 0) + (m.completion_tokens or 0) for m in self.messages)


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ("" if value is None else str(value))


def _votes(meta: dict[str, Any]) -> tuple[VoteCandidate, ...]:
    vote = meta.get("vote")
    if not isinstance(vote, dict) or not isinstance(vote.get("candidates"), list):
        return ()
    per = vote.get("per_candidate") if isinstance(vote.get("per_candidate"), list) else []
    out = []
    for i, c in enumerate(vote["candidates"]):
        if not isinstance(c, dict):
            continue
        count = per[i] if i < len(per) and isinstance(per[i], int) else 0
        error = c.get("error")
        out.append(
            VoteCandidate(
                _text(c.get("action")),
                _text(c.get("result")),
                None if error is None else _text(error),
                count,
                i == vote.get("winner"),
            )
        )
    return tuple(out)


def _message(raw: Any) -> Message:
    if not isinstance(raw, dict):
        return Message("other", "", "", _text(raw))
    usage = raw.get("usage") if isinstance(raw.get("usage"), dict) else {}
    meta = raw.get("meta") if isinstance(raw.get("meta"), dict) else {}
    latency = usage.get("latency_s")
    ok = meta.get("ok")
    return Message(
        kind=_text(raw.get("kind")),
        name=_text(raw.get("name")),
        state=_text(raw.get("state")),
        content=_text(raw.get("content")),
        prompt_tokens=_int(usage.get("prompt_tokens")),
        completion_tokens=_int(usage.get("completion_tokens")),
        cached_tokens=_int(usage.get("cached_tokens")),
        latency_s=float(latency) if isinstance(latency, int | float) and not isinstance(latency, bool) else None,
        model=_text(usage.get("model")),
        ok=ok if isinstance(ok, bool) else None,
        votes=_votes(meta),
    )


def steps_of(history: Sequence[Any]) -> list[Step]:
    """Cut a trace into steps: a new step starts when the state changes, or at a prompt or reply
    once the current step holds a reply or a tool result (so a prompt and its reply stay together)."""
    steps: list[Step] = []
    for raw in history:
        m = _message(raw)
        cur = steps[-1] if steps else None
        acted = cur is not None and any(x.kind in ("llm", "tool") for x in cur.messages)
        starts = cur is None or m.state != cur.state or (m.kind in ("prompt", "llm") and acted)
        if starts:
            steps.append(Step(len(steps) + 1, m.state))
        steps[-1].messages.append(m)
    return steps


def align(a: Sequence[Step], b: Sequence[Step]) -> list[tuple[Step | None, Step | None]]:
    """Pairs of steps with the same number (``None`` where one episode has fewer steps)."""
    return [(a[i] if i < len(a) else None, b[i] if i < len(b) else None) for i in range(max(len(a), len(b)))]


@dataclass(frozen=True)
class Submission:
    """What was scored: the agent's last statement and its result next to the gold and its result.

    ``extra`` holds the other evaluation fields the environment recorded (for Bash, e.g. the
    comparison of outputs), shown as they are.
    """

    statement: str
    result: str
    gold: str
    gold_result: str
    reward: float
    extra: dict[str, str]


def submission_of(record: EpisodeRecord) -> Submission:
    """The episode's submission as recorded (``eval`` holds both observations, cut to 2,000 characters)."""
    ev = {str(k): _text(v) for k, v in record.eval.items()}
    return Submission(
        statement=record.last_action or "",
        result=ev.pop("agent_obs", ""),
        gold=record.gold,
        gold_result=ev.pop("eval_obs", ""),
        reward=record.reward_raw,
        extra=ev,
    )


def taken_edges(transitions: Sequence[Any]) -> list[tuple[str, str, str]]:
    """``(source, target, rule)`` of each transition the episode took, in order.

    The graph's edges are told apart by their rule, not only their ends: a flow often has two
    rules between the same states (``Solve -> End`` on ``submitted`` and on the turn limit).
    """
    return [
        (_text(t.get("source")), _text(t.get("target")), _text(t.get("rule")))
        for t in transitions
        if isinstance(t, dict)
    ]

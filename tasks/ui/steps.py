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

from stateflow.envs.bash.comparison import BashComparison
from stateflow.tasks.kit.episode_record import EpisodeRecord

__all__ = [
    "BASH_BENCHMARK",
    "FsRow",
    "Message",
    "Step",
    "Submission",
    "VoteCandidate",
    "align",
    "ending_of",
    "fs_rows",
    "steps_of",
    "submission_of",
    "taken_edges",
]

BASH_BENCHMARK = "intercode-bash"


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

    ``result`` / ``gold_result`` are ``None`` when the record does not hold them (an archive),
    ``""`` when the command printed nothing (shown differently: an edit in place prints nothing).

    ``extra`` holds the other evaluation fields the environment recorded, shown as they are.
    For a Bash episode (``bash``), ``comparison`` is what the reward compared (``None`` in
    records written before it was kept: the page says "not recorded"), and ``fs`` its file
    system changes path by path.
    """

    statement: str
    result: str | None
    gold: str
    gold_result: str | None
    reward: float
    extra: dict[str, str]
    bash: bool = False
    comparison: BashComparison | None = None
    fs: tuple[FsRow, ...] = ()


@dataclass(frozen=True)
class FsRow:
    """One path of a Bash comparison: each side's ``git status`` code and what the reward made of it.

    Attributes:
        agent, gold: the status codes on each side (``""``: that side did not change the path;
            several codes are joined by a space).
        outcome: ``same`` (both made that change), ``missing`` (only the gold did), ``extra``
            (only the agent did) or ``different`` (both changed it, differently).
        content: ``same`` / ``differs`` where the reward compared the file's hashes, else ``""``.
    """

    path: str
    agent: str
    gold: str
    outcome: str
    content: str


def fs_rows(c: BashComparison) -> tuple[FsRow, ...]:
    """The comparison's changes merged by path, sorted by path (missing and extra first)."""
    agent: dict[str, list[str]] = {}
    gold: dict[str, list[str]] = {}
    for side, changes in ((agent, (*c.agent_changes, *c.extra)), (gold, (*c.gold_changes, *c.missing))):
        for ch in changes:
            codes = side.setdefault(ch.path, [])
            if ch.status not in codes:
                codes.append(ch.status)
    content = {x.path: "same" if x.same else "differs" for x in c.content}
    rows = []
    for path in sorted(agent.keys() | gold.keys()):
        a, g = sorted(agent.get(path, [])), sorted(gold.get(path, []))
        outcome = "same" if a == g else "missing" if not a else "extra" if not g else "different"
        rows.append(FsRow(path, " ".join(a), " ".join(g), outcome, content.get(path, "")))
    rank = {"missing": 0, "extra": 0, "different": 0, "same": 1}
    return tuple(sorted(rows, key=lambda r: rank[r.outcome]))


def submission_of(record: EpisodeRecord) -> Submission:
    """The episode's submission as recorded (``eval`` holds both observations, cut to 2,000 characters)."""
    ev = {str(k): _text(v) for k, v in record.eval.items()}
    comparison = record.bash_comparison
    return Submission(
        statement=record.last_action or "",
        result=ev.pop("agent_obs", None),
        gold=record.gold,
        gold_result=ev.pop("eval_obs", None),
        reward=record.reward_raw,
        extra=ev,
        bash=record.benchmark == BASH_BENCHMARK,
        comparison=comparison,
        fs=fs_rows(comparison) if comparison is not None else (),
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


def ending_of(record: EpisodeRecord) -> str:
    """Why the episode ended, in words: what the episode page shows as "ended".

    The record's ``stop_reason`` says only how the *flow* stopped (``final``: a final state was
    reached), which reads as a normal end when the turn limit sent the episode to ``End``; here
    the rule that fired last, whether the agent submitted, and the turn limit (from the identity)
    say what actually happened. Archived records keep no transitions: the turn count decides.
    """
    if record.status != "ok":
        return f"{record.status} (see the error below)" if record.error else record.status
    reason = record.stop_reason or ""
    if reason == "max_transitions":
        return "the flow's transition bound (max_transitions) was reached"
    if reason != "final":
        return reason or "-"
    last = record.transitions[-1] if record.transitions and isinstance(record.transitions[-1], dict) else {}
    rule = str(last.get("rule", ""))
    limit = (record.identity or {}).get("max_turns")
    out_of_turns = "turn limit" in rule or (
        not rule and not record.submitted and isinstance(limit, int) and record.turns >= limit
    )
    if out_of_turns:
        used = f" ({record.turns} of {limit} turns)" if isinstance(limit, int) else ""
        return f"turn limit reached{used}, not submitted"
    if record.submitted:
        return "submitted"
    end = record.path[-1] if record.path else "a final state"
    return f"reached {end}" + (f" by rule '{rule}'" if rule else "") + " without submitting"

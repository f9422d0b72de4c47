"""What a run records: one step per output-function call and one record per transition."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from stateflow.blackboard import Blackboard
from stateflow.messages import History, Message, Usage

if TYPE_CHECKING:
    from stateflow.run_state import PendingQuestion

__all__ = ["RunResult", "Step", "TransitionRecord", "UsageTotals"]


@dataclass(frozen=True)
class Step:
    """One output-function call (or one LLM-judge consultation).

    Attributes:
        index: position in the run (0-based).
        state: the state that ran it.
        output: the output function's label (``prompt``, ``llm``, ``tool[execute]``, ``judge``...).
        message: the appended message (``None`` for judges: their exchange is not history).
        usage: LLM accounting (``None`` for prompts and tools).
        latency_s: wall time of the call.
        detail: extra facts (a judge's question and raw answer, ...).
        started_at: wall-clock start (seconds since the epoch; 0 when unknown).
    """

    index: int
    state: str
    output: str
    message: Message | None
    usage: Usage | None
    latency_s: float
    detail: dict[str, Any] = field(default_factory=dict)
    started_at: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "index": self.index,
            "state": self.state,
            "output": self.output,
            "latency_s": round(self.latency_s, 6),
        }
        if self.message is not None:
            out["message"] = self.message.to_dict()
        if self.usage is not None:
            out["usage"] = {
                "prompt_tokens": self.usage.prompt_tokens,
                "completion_tokens": self.usage.completion_tokens,
                "cached_tokens": self.usage.cached_tokens,
                "cost": self.usage.cost,
                "model": self.usage.model,
                "profile": self.usage.profile,
            }
        if self.detail:
            out["detail"] = self.detail
        return out


@dataclass(frozen=True)
class TransitionRecord:
    """``source -> target`` chosen by ``rule`` (its printable form) after step ``after_step``."""

    source: str
    target: str
    rule: str
    after_step: int

    def to_dict(self) -> dict[str, Any]:
        return {"source": self.source, "target": self.target, "rule": self.rule, "after_step": self.after_step}


@dataclass
class UsageTotals:
    """Summed accounting for a group of LLM calls."""

    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0
    cost: float = 0.0
    latency_s: float = 0.0

    def add(self, u: Usage) -> None:
        self.calls += u.calls
        self.prompt_tokens += u.prompt_tokens
        self.completion_tokens += u.completion_tokens
        self.cached_tokens += u.cached_tokens
        self.cost += u.cost
        self.latency_s += u.latency_s

    def to_dict(self) -> dict[str, Any]:
        return {
            "calls": self.calls,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "cached_tokens": self.cached_tokens,
            "cost": round(self.cost, 8),
            "latency_s": round(self.latency_s, 4),
        }


@dataclass
class RunResult:
    """Everything a run produced.

    Attributes:
        flow: the flow's name.
        view: ``stateflow`` or ``sf_agent``.
        exit_state: the state the run ended in.
        stop_reason: ``final`` (a final state was reached), ``max_transitions`` (the bound hit),
            ``paused`` (a deferred question waits for its answer)
            or ``error`` (an exception ended it; see ``error``).
        history: the context history.
        steps: one record per output-function call and judge consultation.
        transitions: the path taken.
        error: the message of the exception that ended the run, if any.
        vars: the user's variables at the end (what ``run(..., vars=...)`` started with, as tools
            left them).
        board: the typed records the flow's tools and conditions kept (:mod:`stateflow.blackboard`).
        started_at, ended_at: wall-clock bounds of the run (seconds since the epoch).
        pending: the question a paused run waits on (``stop_reason == "paused"``).
        thread_id: the thread the run was saved under, when it had a checkpointer.
    """

    flow: str
    view: str
    exit_state: str
    stop_reason: str
    history: History
    steps: list[Step]
    transitions: list[TransitionRecord]
    error: str | None = None
    vars: dict[str, Any] = field(default_factory=dict)
    board: Blackboard = field(default_factory=Blackboard)
    started_at: float = 0.0
    ended_at: float = 0.0
    pending: PendingQuestion | None = None
    thread_id: str | None = None

    @property
    def status(self) -> str:
        """``finished`` (a final state or the bound), ``paused`` (waiting on an answer) or ``failed``."""
        if self.stop_reason == "paused":
            return "paused"
        return "failed" if self.stop_reason == "error" else "finished"

    @property
    def path(self) -> list[str]:
        """The states visited, in order."""
        if not self.transitions:
            return [self.exit_state]
        return [self.transitions[0].source] + [t.target for t in self.transitions]

    def usage(self) -> UsageTotals:
        total = UsageTotals()
        for s in self.steps:
            if s.usage is not None:
                total.add(s.usage)
        return total

    def usage_by_state(self) -> dict[str, UsageTotals]:
        out: dict[str, UsageTotals] = defaultdict(UsageTotals)
        for s in self.steps:
            if s.usage is not None:
                out[s.state].add(s.usage)
        return dict(out)

    def usage_by_model(self) -> dict[str, UsageTotals]:
        """Keyed by profile name (which names the model and how it was reached)."""
        out: dict[str, UsageTotals] = defaultdict(UsageTotals)
        for s in self.steps:
            if s.usage is not None:
                out[s.usage.profile or s.usage.model].add(s.usage)
        return dict(out)

    def to_dict(self) -> dict[str, Any]:
        return {
            "flow": self.flow,
            "view": self.view,
            "exit_state": self.exit_state,
            "stop_reason": self.stop_reason,
            "error": self.error,
            "path": self.path,
            "usage": self.usage().to_dict(),
            "usage_by_state": {k: v.to_dict() for k, v in self.usage_by_state().items()},
            "usage_by_model": {k: v.to_dict() for k, v in self.usage_by_model().items()},
            "history": self.history.to_list(),
            "steps": [s.to_dict() for s in self.steps],
            "transitions": [t.to_dict() for t in self.transitions],
        }

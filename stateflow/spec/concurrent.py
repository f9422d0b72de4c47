"""Env-input steps with several actions: run them concurrently, then summarise (PASS).

A spec whose model lists several (Action, Action-Input) pairs before one env-input state (PASS's
Summary, ReWOO's solver) wants all of them executed as one step. :func:`pending_calls` reads the
pairs from the steps since the last env-input step; :func:`run_concurrently` runs them on a
bounded thread pool and records each call's start and end (so a trace shows what overlapped);
:class:`Summariser` then writes a summary of the numbered results with a model and keeps either
the summary or the raw numbered results, whichever the agent's model scores higher
(:func:`stateflow.scoring.choose_by_likelihood`).

Nothing here knows about environments: a call is ``tool(ActionCall) -> str``. A tool that is not
thread-safe (one database connection, one shell) passes ``serialise=True``: its calls still form
one step and are traced, but never overlap.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Protocol

from stateflow.context import Context
from stateflow.messages import Kind
from stateflow.outputs import ToolResult
from stateflow.scoring import Choice, Scorer, choose_by_likelihood
from stateflow.spec.compiled import AgentSpec
from stateflow.spec.completer import Completer

__all__ = [
    "ActionCall",
    "CallRecord",
    "ConcurrentStep",
    "Summariser",
    "SummaryOutcome",
    "multi_action_input",
    "numbered_results",
    "pending_calls",
    "run_concurrently",
]


class _StepLike(Protocol):
    state: str
    content: str
    source: str


@dataclass(frozen=True)
class ActionCall:
    """One listed action: its position in the list (1-based), tool name and input."""

    index: int
    action: str
    argument: str


@dataclass(frozen=True)
class CallRecord:
    """One executed call with its timing (seconds on the step's clock) and outcome."""

    call: ActionCall
    result: str
    ok: bool
    started: float
    ended: float
    thread: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "index": self.call.index,
            "action": self.call.action,
            "argument": self.call.argument,
            "result": self.result,
            "ok": self.ok,
            "started": round(self.started, 6),
            "ended": round(self.ended, 6),
            "thread": self.thread,
        }


@dataclass(frozen=True)
class ConcurrentStep:
    """All calls of one step, in list order."""

    records: tuple[CallRecord, ...]
    max_concurrency: int
    started: float
    ended: float

    @property
    def wall_s(self) -> float:
        """Elapsed time of the whole step."""
        return self.ended - self.started

    @property
    def busy_s(self) -> float:
        """Sum of the calls' own durations (what running them one by one would take)."""
        return sum(r.ended - r.started for r in self.records)

    def overlapping_pairs(self) -> list[tuple[int, int]]:
        """Pairs of call indices whose [start, end) intervals overlap."""
        out = []
        rs = self.records
        for i, a in enumerate(rs):
            for b in rs[i + 1 :]:
                if a.started < b.ended and b.started < a.ended:
                    out.append((a.call.index, b.call.index))
        return out

    def to_dict(self) -> dict[str, Any]:
        return {
            "calls": [r.to_dict() for r in self.records],
            "max_concurrency": self.max_concurrency,
            "wall_s": round(self.wall_s, 6),
            "busy_s": round(self.busy_s, 6),
            "overlapping_pairs": self.overlapping_pairs(),
        }


def pending_calls(
    steps: Sequence[_StepLike], *, action_state: str = "Action", input_state: str = "Action-Input"
) -> list[ActionCall]:
    """The (action, input) pairs the model listed since the last env-input step.

    An action without an input gets ``""``; an input without a preceding action is paired with
    an empty action name (the caller decides what an unnamed action means).
    """
    start = 0
    for i, s in enumerate(steps):
        if s.source == "env":
            start = i + 1
    calls: list[ActionCall] = []
    action: str | None = None
    for s in steps[start:]:
        if s.state == action_state:
            if action is not None:
                calls.append(ActionCall(len(calls) + 1, action, ""))
            action = s.content
        elif s.state == input_state:
            calls.append(ActionCall(len(calls) + 1, action or "", s.content))
            action = None
    if action is not None:
        calls.append(ActionCall(len(calls) + 1, action, ""))
    return calls


def run_concurrently(
    calls: Sequence[ActionCall],
    tool: Callable[[ActionCall], str],
    *,
    max_concurrency: int = 4,
    serialise: bool = False,
    clock: Callable[[], float] = time.perf_counter,
) -> ConcurrentStep:
    """Run ``tool`` on every call, at most ``max_concurrency`` at a time.

    A call that raises becomes a failed record whose result names the exception; the other
    calls still run and are recorded (nothing already executed is lost).

    Args:
        calls: the listed actions.
        tool: executes one call and returns its observation text.
        max_concurrency: bound on calls in flight (>= 1).
        serialise: never overlap calls (for a tool that is not thread-safe).
        clock: the time source of the recorded timestamps.

    Raises:
        ValueError: ``max_concurrency < 1``.
    """
    if max_concurrency < 1:
        raise ValueError(f"max_concurrency must be >= 1, got {max_concurrency}")
    lock = threading.Lock() if serialise else None

    def one(call: ActionCall) -> CallRecord:
        if lock is not None:
            lock.acquire()
        try:
            t0 = clock()
            try:
                result, ok = tool(call), True
            except Exception as err:  # a failing call is an observation, not the end of the step
                result, ok = f"error: {type(err).__name__}: {err}", False
            return CallRecord(call, result, ok, t0, clock(), threading.current_thread().name)
        finally:
            if lock is not None:
                lock.release()

    start = clock()
    if not calls:
        return ConcurrentStep((), max_concurrency, start, clock())
    workers = min(max_concurrency, len(calls))
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="action") as pool:
        records = tuple(pool.map(one, calls))
    return ConcurrentStep(records, workers, start, clock())


def numbered_results(step: ConcurrentStep) -> str:
    """The raw results, one numbered block per call: ``1. execute[SHOW TABLES] -> ...``."""
    lines = []
    for r in step.records:
        head = f"{r.call.action}[{r.call.argument}]" if r.call.action else r.call.argument
        lines.append(f"{r.call.index}. {head} -> {r.result}")
    return "\n".join(lines)


@dataclass(frozen=True)
class SummaryOutcome:
    """What the summariser returned and why."""

    text: str
    summary: str
    raw: str
    choice: Choice | None  # None when the summary was empty (raw kept without scoring)
    prompt_tokens: int = 0
    completion_tokens: int = 0

    @property
    def kept(self) -> str:
        """``"summary"`` or ``"raw"``."""
        return self.choice.best if self.choice is not None else "raw"

    def to_dict(self) -> dict[str, Any]:
        return {
            "kept": self.kept,
            "summary": self.summary,
            "raw": self.raw,
            "scores": {} if self.choice is None else self.choice.to_dict(),
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
        }


@dataclass
class Summariser:
    """Summarise numbered results with a model; keep the summary or the raw results.

    Args:
        completer: writes the summary (usually the agent's own model).
        scorer: scores both candidates (the agent's model).
        alpha: the length-normalisation exponent.
        max_tokens: bound on the summary's length.
        instruction: what the summary must do (written before the results).
    """

    completer: Completer
    scorer: Scorer
    alpha: float = 0.7
    max_tokens: int = 160
    instruction: str = (
        "Summarise the numbered results below in a few short lines for the question. Keep every "
        "name, number and value that may matter; do not invent anything."
    )
    history: list[SummaryOutcome] = field(default_factory=list)

    def __call__(self, question: str, raw: str, context: Sequence[dict[str, Any]], prefix: str) -> SummaryOutcome:
        """Summarise ``raw``; score both candidates as continuations of ``context`` + ``prefix``.

        Args:
            question: the task (shown to the summariser).
            raw: the numbered results.
            context: the agent's chat messages (the scoring context).
            prefix: the agent's open transcript ending with the summary state's text.
        """
        msgs = [
            {"role": "system", "content": self.instruction},
            {"role": "user", "content": f"Question: {question}\n\nResults:\n{raw}\n\nSummary:"},
        ]
        comp = self.completer.complete(msgs, stop=("\n\n\n",), max_tokens=self.max_tokens)
        summary = comp.text.strip()
        choice = None
        text = raw
        if summary:
            choice = choose_by_likelihood(
                self.scorer, context, prefix, {"summary": " " + summary, "raw": " " + raw}, alpha=self.alpha
            )
            text = summary if choice.best == "summary" else raw
        out = SummaryOutcome(text, summary, raw, choice, comp.prompt_tokens, comp.completion_tokens)
        self.history.append(out)
        return out


@dataclass(frozen=True)
class _HistoryStep:
    state: str
    content: str
    source: str


def multi_action_input(
    spec: AgentSpec,
    tool: Callable[[ActionCall], str],
    *,
    max_concurrency: int = 4,
    serialise: bool = False,
    summariser: Summariser | None = None,
    action_state: str = "Action",
    input_state: str = "Action-Input",
) -> Callable[[Context], ToolResult]:
    """An env-input handler for :func:`~stateflow.spec.importer.spec_to_flow` that runs every
    action listed since the last env-input step as one concurrent step.

    The result's text is the numbered results (or, with a ``summariser``, whichever of summary
    and raw results the summariser keeps; its scoring context is the run's history as one
    transcript); ``meta["concurrent"]`` holds the step's trace and ``meta["summary"]`` the
    choice, when made.

    Example:
        >>> from stateflow.spec import library_spec, spec_to_flow, task_input
        >>> spec = library_spec("pass")
        >>> handler = multi_action_input(spec, lambda call: call.argument.upper())
        >>> sf = spec_to_flow(spec, env_inputs={"Question": task_input, "Summary": handler})
    """

    def handler(ctx: Context) -> ToolResult:
        steps = []
        for m in ctx.history:
            if m.state not in spec.spec.states or m.kind not in (Kind.LLM, Kind.TOOL):
                continue
            segs = spec.segmenter.split(m.content.strip())
            first = segs[0] if segs else None
            content = "" if first is None or first.state not in (None, m.state) else first.content
            steps.append(_HistoryStep(m.state, content, "env" if m.kind == Kind.TOOL else "llm"))
        calls = pending_calls(steps, action_state=action_state, input_state=input_state)
        step = run_concurrently(calls, tool, max_concurrency=max_concurrency, serialise=serialise)
        raw = numbered_results(step) if calls else "No actions were listed."
        meta: dict[str, Any] = {"concurrent": step.to_dict()}
        text = raw
        if summariser is not None and calls:
            transcript = "".join(f"{spec.state(s.state).text} {s.content}\n" for s in steps)
            context = [{"role": "user", "content": ctx.task}]
            outcome = summariser(ctx.task, raw, context, transcript + spec.state(ctx.state).text)
            meta["summary"] = outcome.to_dict()
            text = outcome.text
        return ToolResult(text, meta)

    handler.__name__ = "multi_action_input"
    return handler

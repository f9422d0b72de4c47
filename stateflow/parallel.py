"""Parallel branches: several output functions of one state at once, merged by a declared function.

``Parallel(search_docs, search_code, merge=pick_best)`` runs its branches (``LLM`` calls,
``Tool`` s, subflows) concurrently on threads, each on the history as it stood when the state
reached it, then calls ``merge(ctx, results)`` with one :class:`BranchResult` per branch, in
declaration order; what ``merge`` returns (a ``ToolResult`` or a string) is the one message
appended to the history. Threads, not asyncio: a branch is a blocking model call (through
AutoGen's synchronous client), a tool or a whole subflow run, and the GIL is released while
each waits on its server.

The trace shows every branch as its own step ``<name>[<branch>]`` with its start time, latency
and usage, so branches that ran together have overlapping intervals; the merge is the step
``<name>`` that carries the appended message and the wall time of the whole fan-out.

A branch that raises fails the state with :class:`~stateflow.errors.ParallelBranchError`
naming the branch (after every branch has finished: no thread is left running), unless the
``Parallel`` says ``merge_failures=True``: then ``merge`` receives the failed branch's result
with ``ok=False`` and its ``error``, and decides.

Branches share the run context: they read the same history and ``ctx.env``; a branch that
writes ``ctx.vars`` or the blackboard must not write what another branch reads.

Example:
    >>> from stateflow import Tool
    >>> def merge(ctx, results):
    ...     return " + ".join(r.content for r in results)
    >>> p = Parallel(Tool(lambda ctx: "a", "left"), Tool(lambda ctx: "b", "right"), merge=merge)
    >>> p.names, p.label
    (('left', 'right'), 'parallel[left|right]')
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Protocol

from stateflow.context import Context
from stateflow.errors import ParallelBranchError, RunCancelled, StateFlowError
from stateflow.messages import Usage
from stateflow.outputs import LLM, Tool, ToolResult

if TYPE_CHECKING:
    from stateflow.flow import Flow
    from stateflow.trace import Step

__all__ = ["BranchFailed", "BranchResult", "BranchRunner", "Fanout", "Parallel", "run_branches"]


@dataclass(frozen=True)
class BranchResult:
    """What one branch produced.

    Attributes:
        name: the branch's name.
        content: its text (a tool's content, a model's reply, a subflow's last message);
            empty when it failed.
        ok: it finished without raising.
        error: ``Type: message`` of what it raised.
        meta: a tool's ``ToolResult.meta``.
        usage: model usage of the branch (summed over a subflow's calls).
        started_at: wall-clock start (seconds since the epoch).
        latency_s: how long it ran.
        parsed: the typed object of an ``LLM(schema=...)`` branch.
        calls_in_steps: its calls are recorded by its own inner steps (a subflow branch), so the
            branch's step carries no usage of its own: every call is counted once.
    """

    name: str
    content: str
    ok: bool = True
    error: str | None = None
    meta: dict[str, Any] = field(default_factory=dict)
    usage: Usage | None = None
    started_at: float = 0.0
    latency_s: float = 0.0
    parsed: Any = None
    calls_in_steps: bool = False


Branch = LLM | Tool  # or a Flow (a subflow branch), checked at run time to avoid an import cycle


class Parallel:
    """Output functions of one state run concurrently and merged by ``merge``.

    Args:
        *branches: ``LLM``, ``Tool`` or ``Flow`` (a subflow) instances; at least two.
        merge: ``merge(ctx, results) -> ToolResult | str``, ``results`` in branch order.
        names: a name per branch (default: a tool's name, ``llm``/``llm[profile]``, a flow's name;
            repeated names get ``#2``, ``#3``...).
        merge_failures: pass failed branches to ``merge`` instead of failing the state.
        name: the output function's name in the trace.

    Raises:
        TypeError: a branch of another kind, or a ``merge`` that is not callable.
        ValueError: fewer than two branches, or names that do not fit the branches.
    """

    __slots__ = ("branches", "merge", "merge_failures", "name", "names")

    def __init__(
        self,
        *branches: Any,
        merge: Callable[[Context, list[BranchResult]], ToolResult | str],
        names: Sequence[str] | None = None,
        merge_failures: bool = False,
        name: str = "parallel",
    ):
        from stateflow.flow import Flow

        if len(branches) < 2:
            raise ValueError(f"Parallel needs at least two branches, got {len(branches)}")
        for b in branches:
            if not isinstance(b, (LLM, Tool, Flow)):
                raise TypeError(f"Parallel branch {b!r} is not an LLM, a Tool or a Flow")
            if isinstance(b, LLM) and b.tools:
                raise TypeError("Parallel: an LLM branch with tools is not supported; give the tools their own state")
        if not callable(merge):
            raise TypeError(f"Parallel merge must be callable, got {merge!r}")
        if names is None:
            base = [b.name if isinstance(b, (Tool, Flow)) else b.label for b in branches]
            names = [n if base[:i].count(n) == 0 else f"{n}#{base[:i].count(n) + 1}" for i, n in enumerate(base)]
        if len(names) != len(branches) or len(set(names)) != len(names):
            raise ValueError(f"Parallel names {list(names)!r}: one distinct name per branch")
        self.branches: tuple[Any, ...] = tuple(branches)
        self.merge = merge
        self.names: tuple[str, ...] = tuple(names)
        self.merge_failures = merge_failures
        self.name = name

    @property
    def label(self) -> str:
        return f"{self.name}[{'|'.join(self.names)}]"

    def __repr__(self) -> str:
        return f"Parallel({', '.join(self.names)}, merge={getattr(self.merge, '__name__', self.merge)!r})"


class BranchRunner(Protocol):
    """How the episode runs the branches that need it (model calls and subflows)."""

    def llm(self, out: LLM, ctx: Context, branch: str) -> tuple[str, Usage, Any]:
        """One model call on the history; returns the text, its usage and the parsed object."""

    def subflow(self, flow: Flow, ctx: Context, branch: str) -> tuple[str, Usage | None, list[Step]]:
        """A whole run of ``flow`` on the run's task; its last message, usage and steps."""


_Outcome = tuple[BranchResult, "list[Step]", "Exception | None"]


def _one(par: Parallel, i: int, ctx: Context, runner: BranchRunner) -> _Outcome:
    from stateflow.flow import Flow

    branch, name = par.branches[i], par.names[i]
    started, t0 = time.time(), time.perf_counter()
    inner: list[Step] = []
    failure: Exception | None = None
    try:
        if isinstance(branch, Tool):
            raw = branch.fn(ctx)
            result = ToolResult(raw) if isinstance(raw, str) else raw
            if not isinstance(result, ToolResult):
                raise StateFlowError(f"tool {branch.name!r} returned {type(raw).__name__}; expected ToolResult or str")
            out = BranchResult(name, result.content, meta=dict(result.meta), usage=result.usage)
        elif isinstance(branch, Flow):
            text, usage, inner = runner.subflow(branch, ctx, name)
            out = BranchResult(name, text, usage=usage, calls_in_steps=True)
        else:
            text, usage, obj = runner.llm(branch, ctx, name)
            out = BranchResult(name, text, usage=usage, parsed=obj)
    except BranchFailed as err:  # what the branch did before failing is kept: its calls were made
        cause = err.cause
        out = BranchResult(name, "", False, f"{type(cause).__name__}: {cause}", usage=err.usage)
        inner, failure = list(err.steps), cause
        out = replace(out, calls_in_steps=bool(inner))
    except Exception as err:  # a branch's failure is reported by name, never lost
        out, failure = BranchResult(name, "", ok=False, error=f"{type(err).__name__}: {err}"), err
    latency = time.perf_counter() - t0
    return _timed(out, started, latency), inner, failure


def _timed(r: BranchResult, started: float, latency: float) -> BranchResult:
    return replace(r, started_at=started, latency_s=latency)


class BranchFailed(Exception):
    """A branch runner's failure with what the branch did before it (raised by a
    :class:`BranchRunner`): the model calls it made are recorded and counted like any other.

    Attributes:
        cause: what the branch raised (also ``__cause__``).
        usage: the usage of the calls it made (e.g. a typed reply asked twice), or ``None``.
        steps: a subflow branch's inner steps up to its failure.
    """

    def __init__(self, cause: BaseException, usage: Usage | None = None, steps: Sequence[Step] = ()):
        super().__init__(str(cause))
        self.cause, self.usage, self.steps = cause, usage, tuple(steps)
        self.__cause__ = cause


@dataclass
class Fanout:
    """The outcome of :func:`run_branches`.

    Attributes:
        results: one per branch, in branch order.
        steps: the inner steps of subflow branches, in branch order.
        failure: the error that fails the state (a branch raised and the merge does not take
            failures), or ``None``.
        wall_s: wall time of the whole fan-out.
    """

    results: list[BranchResult]
    steps: list[Step]
    failure: ParallelBranchError | None
    wall_s: float


def run_branches(par: Parallel, ctx: Context, runner: BranchRunner) -> Fanout:
    """Run every branch of ``par`` at once and wait for all of them (no thread outlives it).

    Raises:
        RunCancelled: the run was cancelled while a branch ran (its consumer went away): that
            is the run's end, not a branch's failure, whatever the merge takes.
    """
    t0 = time.perf_counter()
    with ThreadPoolExecutor(max_workers=len(par.branches), thread_name_prefix=f"sf-{par.name}") as pool:
        futures = [pool.submit(_one, par, i, ctx, runner) for i in range(len(par.branches))]
        done = [f.result() for f in futures]
    cancelled = next((err for _, _, err in done if isinstance(err, RunCancelled)), None)
    if cancelled is not None:
        raise cancelled
    failure = None
    if not par.merge_failures:
        failed = next(((r, err) for r, _, err in done if err is not None), None)
        if failed is not None:
            failure = ParallelBranchError(ctx.state, failed[0].name, failed[1])
            failure.__cause__ = failed[1]
    return Fanout(
        [r for r, _, _ in done], [s for _, inner, _ in done for s in inner], failure, time.perf_counter() - t0
    )

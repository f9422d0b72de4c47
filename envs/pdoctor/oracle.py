"""The exact oracle: check an episode's tool log against the request's constraints.

Each executed action gets its position in the log (first call); the positions (and, in the
extended version, the actual start and end times) are fixed in a Z3 solver and every constraint
is tracked by name. While the set is unsatisfiable, the unsat core names violated constraints
(each confirmed alone, so only genuinely violated ones are reported); they are set aside and the
check repeats, so *all* violated constraints are named, not just one.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import z3
from stateflow.envs.pdoctor.grammar import clock
from stateflow.envs.pdoctor.request import Request
from stateflow.envs.pdoctor.verdict import ErrorClass, Verdict

__all__ = ["Call", "judge", "violated_constraints"]


@dataclass(frozen=True)
class Call:
    """One call the agent made.

    Attributes:
        raw: the call as the agent wrote it.
        tool: the tool's name, or ``None`` when no such tool exists or the call was malformed.
        start / end: extended version: minutes since midnight (``start`` is ``None`` when the
            agent gave no valid start time; the tool then started it right after the previous one).
        start_given: the agent gave a valid start time.
    """

    raw: str
    tool: str | None
    start: int | None = None
    end: int | None = None
    start_given: bool = True


def violated_constraints(
    request: Request, position: dict[int, int], times: dict[int, tuple[int, int]] | None = None
) -> list[str]:
    """Names of the constraints the executed order (and times) violate, found with unsat cores.

    Constraints mentioning an action that was not executed are not checked (that is Action Lost).
    """
    ctx = z3.Context()  # private: thread-safe and independent of earlier checks (see solver.py)
    s = z3.Solver(ctx=ctx)
    p = {a: z3.Int(f"p{a}", ctx) for a in position}
    for a, v in position.items():
        s.add(p[a] == v)
    tracked: dict[str, z3.BoolRef] = {}
    for o in request.orders:
        if o.first in p and o.then in p and o.name not in tracked:
            lit = z3.Bool(o.name, ctx)
            s.add(z3.Implies(lit, p[o.first] < p[o.then]))
            tracked[o.name] = lit
    if times is not None:
        for b in request.bounds:
            if b.action in times and b.name not in tracked:
                lit = z3.Bool(b.name, ctx)
                start, end = times[b.action]
                holds = start >= b.minute if b.kind == "start_after" else end <= b.minute
                s.add(z3.Implies(lit, z3.BoolVal(holds, ctx)))
                tracked[b.name] = lit
    active = dict(tracked)
    violated: list[str] = []
    while active and s.check(*active.values()) == z3.unsat:
        core = {str(c) for c in s.unsat_core()}
        confirmed = [n for n in core if s.check(tracked[n]) == z3.unsat]
        if not confirmed:  # a non-minimal core of jointly-unsat items cannot occur with fixed values
            raise AssertionError(f"unsat core {sorted(core)} has no individually violated constraint")
        for n in confirmed:
            violated.append(n)
            del active[n]
    return sorted(violated)


def judge(request: Request, calls: Sequence[Call]) -> Verdict:
    """The verdict on ``calls`` (every call the agent made, in order)."""
    index = {t: i for i, t in enumerate(request.tools)}
    act_errors = tuple(c.raw[:120] for c in calls if c.tool is None)
    valid = [c for c in calls if c.tool is not None]
    executed = tuple(c.tool for c in valid if c.tool is not None)
    counts = Counter(executed)
    repeated = tuple(t for t in request.tools if counts[t] > 1)
    lost = tuple(t for t in request.tools if counts[t] == 0)
    position: dict[int, int] = {}
    times: dict[int, tuple[int, int]] = {}
    parameter_errors: list[str] = []
    previous_end: int | None = None
    for c in valid:
        assert c.tool is not None
        a = index[c.tool]
        if a in position:
            continue
        position[a] = len(position)
        if request.extended:
            if not c.start_given:
                parameter_errors.append(f"{c.tool}: no valid start time given")
            if c.start is not None and c.end is not None:
                if previous_end is not None and c.start < previous_end:
                    parameter_errors.append(
                        f"{c.tool}: starts at {clock(c.start)}, before the previous task ended ({clock(previous_end)})"
                    )
                times[a] = (c.start, c.end)
                previous_end = c.end
    violated = violated_constraints(request, position, times if request.extended else None)
    order_violated = [v for v in violated if "start(" not in v and "end(" not in v]
    bound_violated = [v for v in violated if v not in order_violated]
    parameter_errors += [f"time bound violated: {v}" for v in bound_violated]
    success = not (lost or repeated or order_violated or parameter_errors)
    error: ErrorClass | None = None
    if not success:
        if act_errors:
            error = ErrorClass.ACT
        elif lost:
            error = ErrorClass.LOST
        elif parameter_errors:
            error = ErrorClass.PARAMETER
        else:
            error = ErrorClass.ORDER
    return Verdict(
        success=success,
        error=error,
        executed=executed,
        lost=lost,
        repeated=repeated,
        act_errors=act_errors,
        violated=tuple(violated) + tuple(f"repeat:{t}" for t in repeated),
        parameter_errors=tuple(parameter_errors),
        n_actions=len(request.tools),
        n_sentences=len(request.sentences),
        n_constraints=len({o.name for o in request.orders}) + len(request.bounds),
        extended=request.extended,
    )

"""Z3 encodings shared by synthesis and the oracle.

* Order-only requests: one integer per action (its position), all distinct, ``a < b`` per order.
Every check builds its own ``z3.Context``: Z3's default context is shared by all threads (the
runner's workers synthesize and judge concurrently) and its models depend on what was created in
it before, which would make a request's witness, hence its time bounds, depend on history.

* Extended requests: additionally a start and end per action, ``end = start + duration``,
  every start at or after the day start, one task at a time (if ``a`` is placed before ``b``
  then ``end_a <= start_b``), and the time bounds.
"""

from __future__ import annotations

from collections.abc import Sequence

import z3
from stateflow.envs.pdoctor.request import Order, TimeBound

__all__ = ["IncrementalSolver", "satisfiable", "witness_order"]


def _solver(
    n: int, orders: Sequence[Order], bounds: Sequence[TimeBound], durations: Sequence[int] | None, day_start: int
) -> tuple[z3.Solver, list[z3.ArithRef]]:
    ctx = z3.Context()
    s = z3.Solver(ctx=ctx)
    pos = [z3.Int(f"p{i}", ctx) for i in range(n)]
    s.add(z3.Distinct(*pos))
    for p in pos:
        s.add(p >= 0, p < n)
    for o in orders:
        s.add(pos[o.first] < pos[o.then])
    if durations is not None:
        start = [z3.Int(f"start{i}", ctx) for i in range(n)]
        for i in range(n):
            s.add(start[i] >= day_start)
            for j in range(n):
                if i != j:
                    s.add(z3.Implies(pos[i] < pos[j], start[i] + durations[i] <= start[j]))
        for b in bounds:
            if b.kind == "start_after":
                s.add(start[b.action] >= b.minute)
            else:
                s.add(start[b.action] + durations[b.action] <= b.minute)
    return s, pos


def satisfiable(
    n: int,
    orders: Sequence[Order],
    bounds: Sequence[TimeBound] = (),
    durations: Sequence[int] | None = None,
    day_start: int = 480,
) -> bool:
    """Whether some execution order (and, extended, some schedule) meets every constraint."""
    s, _ = _solver(n, orders, bounds, durations, day_start)
    return s.check() == z3.sat


def witness_order(
    n: int,
    orders: Sequence[Order],
    bounds: Sequence[TimeBound] = (),
    durations: Sequence[int] | None = None,
    day_start: int = 480,
) -> list[int] | None:
    """One order of the actions meeting every constraint (``None`` when there is none)."""
    s, pos = _solver(n, orders, bounds, durations, day_start)
    if s.check() != z3.sat:
        return None
    m = s.model()
    return sorted(range(n), key=lambda i: m.eval(pos[i]).as_long())


class IncrementalSolver:
    """One request's constraint set, grown one sentence at a time (synthesis).

    Keeps one context and solver: each candidate is checked inside ``push``/``pop``, which is
    much cheaper than re-encoding the whole set per candidate.
    """

    def __init__(self, n: int, durations: Sequence[int] | None = None, day_start: int = 480):
        self._solver, self._pos = _solver(n, (), (), durations, day_start)

    def try_add(self, orders: Sequence[Order]) -> bool:
        """Add ``orders`` if the set stays satisfiable; returns whether they were added."""
        s = self._solver
        s.push()
        for o in orders:
            s.add(self._pos[o.first] < self._pos[o.then])
        if s.check() == z3.sat:
            return True
        s.pop()
        return False

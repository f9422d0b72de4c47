"""Brute-force references and hand-built requests for the pdoctor tests."""

from __future__ import annotations

import itertools
from collections.abc import Sequence

from stateflow.envs.pdoctor import Clause, ClauseForm, Group, Order, Request, Sentence, TimeBound
from stateflow.envs.pdoctor.topics import tool_name


def order_ok(order: Sequence[int], orders: Sequence[Order]) -> bool:
    pos = {a: i for i, a in enumerate(order)}
    return all(pos[o.first] < pos[o.then] for o in orders)


def asap_ok(order: Sequence[int], bounds: Sequence[TimeBound], durations: Sequence[int], day_start: int) -> bool:
    """For a fixed order, starting each task as early as allowed is optimal for every bound."""
    start_after: dict[int, int] = {}
    for b in bounds:  # several bounds on one action: the latest one binds
        if b.kind == "start_after":
            start_after[b.action] = max(b.minute, start_after.get(b.action, b.minute))
    t = day_start
    ends = {}
    for a in order:
        t = max(t, start_after.get(a, day_start))
        t += durations[a]
        ends[a] = t
    return all(ends[b.action] <= b.minute for b in bounds if b.kind == "finish_before")


def brute_force_sat(
    n: int,
    orders: Sequence[Order],
    bounds: Sequence[TimeBound] = (),
    durations: Sequence[int] | None = None,
    day_start: int = 480,
) -> bool:
    for perm in itertools.permutations(range(n)):
        if order_ok(perm, orders) and (durations is None or asap_ok(perm, bounds, durations, day_start)):
            return True
    return False


ACTIVITIES = ("feeding the lions", "cleaning the aviary", "weighing the penguins", "repairing the gate")


def hand_request(*sentences: Sentence, durations: tuple[int, ...] | None = None) -> Request:
    """A request over the four zoo activities (tools feeding_lions, cleaning_aviary, ...)."""
    return Request(
        profession="zookeeper",
        actions=ACTIVITIES,
        tools=tuple(tool_name(a) for a in ACTIVITIES),
        sentences=tuple(sentences),
        durations=durations,
        label="hand",
    )


def before(a: int, b: int, form: ClauseForm = ClauseForm.VERB) -> Clause:
    """A clause saying ``a`` runs before ``b``."""
    return Clause(form, Group((a,)), Group((b,)), precedes=True)


def one(*clauses: Clause) -> Sentence:
    return Sentence(clauses=clauses, connectives=tuple(0 for _ in clauses[1:]))

"""Which candidates go on to the next rung: paired racing, then successive halving.

Every candidate of a rung has run the same tasks, so two candidates are compared task by task:
only the tasks one solved and the other did not tell them apart, and the exact McNemar test
(:func:`~stateflow.tasks.kit.stats.mcnemar_exact_p`) says whether the difference is more than a
coin would give. A rung makes two cuts:

1. **Racing.** A candidate is dropped when a candidate that costs no more per task solves
   significantly more of the rung's tasks: each candidate is tested against the best of those
   no more expensive, and the p-values of the rung are Holm-corrected
   (:func:`~stateflow.tasks.kit.stats.holm`), so the chance of dropping any candidate that is
   in truth as good stays below ``alpha``.
2. **Halving.** Of the rest, the ``ceil(n / eta)`` that solved most go on, and so does every
   candidate on the rung's Pareto front of success against cost that solved at least one task:
   a cheaper candidate that racing did not drop is exactly what a user of the front wants
   measured on more tasks, even when it is not among the best (one that solved nothing is cheap
   only because it does nothing).

Ties at the halving cut are common (a rung of 30 tasks gives 31 possible scores for dozens of
candidates) and are broken by the **pooled evidence** of the whole rung: a candidate is a set of
traits (each lever on or off, each state's model), every trait's effect is the success rate of
the rung's candidates that have it minus that of those that do not, and a tied candidate with
the larger sum of its traits' effects goes first (then the cheaper, then the key). A trait is
measured on many candidates' tasks where a candidate's own score rests on its few, so this is
the better guess at which of two equal scores is luck. Cost is not the tie-break: the best-share
places are for success, and the front already keeps what is cheap (the first SQL search broke
ties by cost, and at its 30-task rung 8 of 12 candidates tied at the cut, so cost alone chose
which went on; docs/optimize.md, "Ties").

Racing alone rarely drops anything on few tasks (six discordant tasks all one way are needed at
5 %), which is why halving does the bulk of the pruning; racing makes sure a clearly dominated
candidate is not kept merely because it sits on the front.

>>> a = Standing("a", {0: True, 1: True, 2: True, 3: True, 4: True, 5: True}, cost=1.0)
>>> b = Standing("b", {0: False, 1: False, 2: False, 3: False, 4: False, 5: False}, cost=2.0)
>>> [(v.key, v.kept) for v in next_rung([a, b], eta=2, alpha=0.05)]
[('a', True), ('b', False)]
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from stateflow.tasks.kit.stats import holm, mcnemar_exact_p

__all__ = ["Standing", "Verdict", "next_rung", "pareto_keys", "trait_effects"]


@dataclass(frozen=True)
class Standing:
    """A candidate after a rung.

    Attributes:
        key: the candidate's key.
        outcomes: task index -> solved, over the rung's tasks.
        cost: mean cost per task in the budget's unit (model-seconds or tokens).
        traits: what the candidate is made of, one ``factor=level`` text per factor
            (``values=on``, ``Solve=local``); empty: no pooled evidence for its ties.
    """

    key: str
    outcomes: Mapping[int, bool]
    cost: float
    traits: frozenset[str] = frozenset()

    @property
    def solved(self) -> int:
        return sum(self.outcomes.values())


@dataclass(frozen=True)
class Verdict:
    """Whether a candidate goes on, and why (one line for the report)."""

    key: str
    kept: bool
    reason: str


def pareto_keys(standings: Sequence[Standing]) -> set[str]:
    """The keys no other standing beats on both success and cost (ties on both keep both)."""
    return {
        s.key
        for s in standings
        if not any(
            o.solved >= s.solved and o.cost <= s.cost and (o.solved > s.solved or o.cost < s.cost) for o in standings
        )
    }


def trait_effects(standings: Sequence[Standing]) -> dict[str, float]:
    """Each trait's success rate over the standings that have it minus over those that do not.

    A trait every standing has (or none) tells nothing apart and gets 0.

    >>> on = [Standing(f"v{i}", {0: True, 1: i == 0}, 1.0, frozenset({"vote=on"})) for i in range(2)]
    >>> off = [Standing(f"n{i}", {0: i == 0, 1: False}, 1.0, frozenset({"vote=off"})) for i in range(2)]
    >>> trait_effects(on + off)
    {'vote=off': -0.5, 'vote=on': 0.5}
    """

    def rate(group: Sequence[Standing]) -> float:
        tasks = sum(len(s.outcomes) for s in group)
        return sum(s.solved for s in group) / tasks if tasks else 0.0

    effects = {}
    for trait in sorted({t for s in standings for t in s.traits}):
        having = [s for s in standings if trait in s.traits]
        lacking = [s for s in standings if trait not in s.traits]
        effects[trait] = rate(having) - rate(lacking) if having and lacking else 0.0
    return effects


def _paired(a: Standing, b: Standing) -> tuple[int, int]:
    """Tasks ``a`` solved and ``b`` did not, and the reverse, over their common tasks."""
    common = a.outcomes.keys() & b.outcomes.keys()
    return (
        sum(a.outcomes[t] and not b.outcomes[t] for t in common),
        sum(b.outcomes[t] and not a.outcomes[t] for t in common),
    )


def next_rung(standings: Sequence[Standing], *, eta: int, alpha: float) -> list[Verdict]:
    """One verdict per standing, in the order given.

    Raises:
        ValueError: ``eta`` below 2, ``alpha`` outside (0, 1), or two standings with one key.
    """
    if eta < 2 or not 0.0 < alpha < 1.0:
        raise ValueError(f"next_rung: eta must be >= 2 and alpha in (0, 1), got eta={eta}, alpha={alpha}")
    if len({s.key for s in standings}) != len(standings):
        raise ValueError("next_rung: two standings share a key")
    tests: list[tuple[Standing, Standing, int, int, float]] = []
    for s in standings:
        rivals = [o for o in standings if o is not s and o.cost <= s.cost and o.solved > s.solved]
        if rivals:
            best = max(rivals, key=lambda o: (o.solved, -o.cost))
            won, lost = _paired(best, s)
            tests.append((s, best, won, lost, mcnemar_exact_p(won, lost)))
    adjusted = holm([t[4] for t in tests])
    dropped: dict[str, str] = {}
    for (s, best, won, lost, _), p in zip(tests, adjusted, strict=True):
        if p < alpha:
            dropped[s.key] = (
                f"raced out: {best.key} costs no more and won {won}, lost {lost} of the paired tasks "
                f"(exact McNemar, Holm-adjusted p = {p:.3g})"
            )
    alive = [s for s in standings if s.key not in dropped]
    quota = max(1, math.ceil(len(standings) / eta))
    effects = trait_effects(standings)
    ranked = sorted(alive, key=lambda s: (-s.solved, -sum(effects[t] for t in s.traits), s.cost, s.key))
    top = {s.key for s in ranked[:quota]}
    # solving nothing cheaply is no trade-off worth measuring further: the front keeps only solvers
    front = pareto_keys([s for s in alive if s.solved > 0])
    out = []
    for s in standings:
        if s.key in dropped:
            out.append(Verdict(s.key, False, dropped[s.key]))
        elif s.key in top:
            out.append(Verdict(s.key, True, f"among the best {quota} ({s.solved} solved)"))
        elif s.key in front:
            out.append(Verdict(s.key, True, f"on the front ({s.solved} solved at {s.cost:.1f} per task)"))
        else:
            out.append(
                Verdict(s.key, False, f"halved out: {s.solved} solved, not among the best {quota} nor on the front")
            )
    return out

"""The statistics every table cites: Wilson intervals, the exact McNemar test, Holm's correction,
and the outcome of repeated episodes (pass@1, pass@K, pass^K, flips).

On 100 tasks a 95 % interval around 66 % spans about 56-75 %, so a success rate printed without
one invites reading noise as progress. The tests come from scipy and statsmodels rather than
being written here:

* :func:`wilson_interval`: the Wilson score interval of a success rate (scipy's
  ``binomtest(...).proportion_ci(method="wilson")``): unlike the normal approximation it stays
  inside [0, 1] and keeps its coverage near 0 % and 100 %.
* :func:`mcnemar_exact_p`: two methods on the same tasks. Only the discordant tasks (one side
  solved, the other not) carry information; under "no difference" each is a fair coin, so the
  exact McNemar test is the two-sided binomial test of ``won`` out of ``won + lost`` at 1/2 (the
  same test as the exact sign test on discordant pairs; statsmodels' ``mcnemar(exact=True)``
  computes the same number).
* :func:`holm`: several candidates each compared with one baseline. Holm's step-down correction
  (statsmodels ``multipletests(method="holm")``) keeps the chance of any false "better" at 5 %
  across the whole table, where uncorrected p-values would not.
* :func:`repeat_outcomes`: K episodes per task with distinct seeds. The repeats of one task are
  not independent draws, so pass@1's interval is a percentile bootstrap over tasks (scipy's
  ``bootstrap``, a fixed seed so reports are reproducible), not a Wilson interval over episodes.

>>> wilson_interval(66, 100).text()
'56.3-74.5'
>>> round(mcnemar_exact_p(8, 2), 6)
0.109375
>>> [round(p, 3) for p in holm([0.01, 0.04, 0.03])]
[0.03, 0.06, 0.06]
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from scipy.stats import binomtest, bootstrap
from statsmodels.stats.multitest import multipletests

__all__ = ["CONFIDENCE", "Interval", "RepeatOutcomes", "holm", "mcnemar_exact_p", "repeat_outcomes", "wilson_interval"]

CONFIDENCE = 0.95
"""The confidence level of every interval the reports print."""


@dataclass(frozen=True)
class Interval:
    """A confidence interval of a rate, in % (``low`` <= ``high``)."""

    low: float
    high: float

    def text(self) -> str:
        """``56.3-74.4``: how the tables print it (one decimal, as the rates beside it)."""
        return f"{self.low:.1f}-{self.high:.1f}"


def wilson_interval(successes: int, n: int, confidence: float = CONFIDENCE) -> Interval:
    """The Wilson score interval of ``successes`` out of ``n``, in %.

    Raises:
        ValueError: ``n`` < 1, or ``successes`` outside 0..n.
    """
    if n < 1 or not 0 <= successes <= n:
        raise ValueError(f"a rate needs 0 <= successes <= n and n >= 1, got {successes} of {n}")
    ci = binomtest(successes, n).proportion_ci(confidence_level=confidence, method="wilson")
    return Interval(100.0 * float(ci.low), 100.0 * float(ci.high))


def mcnemar_exact_p(won: int, lost: int) -> float:
    """The exact two-sided McNemar test on the discordant tasks: ``won`` by the candidate, ``lost``.

    Returns 1.0 when there is no discordant task (nothing tells the two sides apart).

    Raises:
        ValueError: a negative count.
    """
    if won < 0 or lost < 0:
        raise ValueError(f"counts must be >= 0, got won={won}, lost={lost}")
    if won + lost == 0:
        return 1.0
    return float(binomtest(won, won + lost, 0.5).pvalue)


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm-adjusted p-values, in the order given (compare each with 0.05).

    Raises:
        ValueError: a p-value outside [0, 1].
    """
    if any(not 0.0 <= p <= 1.0 for p in p_values):
        raise ValueError(f"p-values must lie in [0, 1], got {list(p_values)}")
    if not p_values:
        return []
    return [float(p) for p in multipletests(list(p_values), method="holm")[1]]


_BOOTSTRAP_RESAMPLES = 9999
_BOOTSTRAP_SEED = 20261127  # fixed: the same records always print the same interval


def _bootstrap_over_tasks(per_task: list[float], confidence: float = CONFIDENCE) -> Interval:
    """Percentile bootstrap interval (in %) of the mean of ``per_task`` (each task's success share)."""
    data = np.asarray(per_task, dtype=float)
    if len(data) < 2 or np.all(data == data[0]):  # nothing to resample: every resample has this mean
        return Interval(100.0 * float(data.mean()), 100.0 * float(data.mean()))
    res = bootstrap(
        (data,),
        np.mean,
        confidence_level=confidence,
        n_resamples=_BOOTSTRAP_RESAMPLES,
        method="percentile",
        rng=np.random.default_rng(_BOOTSTRAP_SEED),
    )
    return Interval(100.0 * float(res.confidence_interval.low), 100.0 * float(res.confidence_interval.high))


@dataclass(frozen=True)
class RepeatOutcomes:
    """What K repeats of each task say.

    Attributes:
        tasks: tasks with all ``k`` repeats recorded (tasks with fewer are left out).
        k: repeats per task.
        pass_1: mean success per episode, in % (the expected success of one attempt).
        pass_1_ci: its 95 % interval: a percentile bootstrap over tasks of each task's mean success
            (for ``k == 1``, the Wilson interval over the tasks, as every table).
        pass_k: % of tasks solved by at least one of the ``k`` repeats.
        pass_hat_k: % of tasks solved by all ``k`` repeats (pass^K).
        flips: % of tasks whose outcome differs between repeats.
        flipped_tasks: those tasks' indices.
    """

    tasks: int
    k: int
    pass_1: float
    pass_1_ci: Interval
    pass_k: float
    pass_hat_k: float
    flips: float
    flipped_tasks: tuple[int, ...]


def repeat_outcomes(successes: Mapping[int, Sequence[bool]], k: int) -> RepeatOutcomes:
    """Summarise ``task -> success of each repeat``; tasks with fewer than ``k`` repeats are left out.

    Raises:
        ValueError: ``k`` < 1, or no task has ``k`` repeats.
    """
    if k < 1:
        raise ValueError(f"repeats must be >= 1, got {k}")
    full = {t: list(s)[:k] for t, s in successes.items() if len(s) >= k}
    if not full:
        raise ValueError(f"no task has all {k} repeats recorded")
    n = len(full)
    solved = sum(sum(s) for s in full.values())
    flipped = tuple(sorted(t for t, s in full.items() if 0 < sum(s) < k))
    return RepeatOutcomes(
        tasks=n,
        k=k,
        pass_1=100.0 * solved / (n * k),
        pass_1_ci=wilson_interval(solved, n) if k == 1 else _bootstrap_over_tasks([sum(s) / k for s in full.values()]),
        pass_k=100.0 * sum(any(s) for s in full.values()) / n,
        pass_hat_k=100.0 * sum(all(s) for s in full.values()) / n,
        flips=100.0 * len(flipped) / n,
        flipped_tasks=flipped,
    )

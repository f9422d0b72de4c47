"""Independent references for the SQL tests: upstream InterCode's semantics, written for the tests.

Two references, deliberately not sharing code with ``stateflow.envs.sql``:

* :func:`upstream_reward`: the reward as upstream computes it (multiset IoU, then Kendall tau-b
  from scipy over the shared rows, rounded only when tau is not NaN);
* :func:`exact_reward`: the same number from first principles: tau-b counted pair by pair in exact
  integer arithmetic, the product rounded in decimal. It reports the two candidates when the exact
  value sits on a rounding boundary (where float rounding may legitimately go either way).
* :class:`SharedConnectionEpisode`: an episode as upstream runs it: agent actions and the gold on
  one connection, so a ``USE`` by the agent moves the gold too.
"""

from __future__ import annotations

import math
import warnings
from collections import Counter
from dataclasses import dataclass
from decimal import ROUND_HALF_EVEN, Decimal, localcontext
from fractions import Fraction
from typing import Any

import mysql.connector
from scipy.stats import kendalltau

__all__ = ["SharedConnectionEpisode", "exact_reward", "shared_prefix", "upstream_reward"]


def shared_prefix(rows: list[str], shared: Counter[str]) -> list[str]:
    """``rows`` in order, each value kept only while ``shared`` still has copies of it."""
    left = dict(shared)
    kept = []
    for row in rows:
        if left.get(row, 0) > 0:
            left[row] -= 1
            kept.append(row)
    return kept


def upstream_reward(agent: Any, gold: Any) -> float:
    """Upstream's reward, step by step as its environment computes it (scipy for tau)."""
    if not isinstance(agent, list) or not isinstance(gold, list):
        return 0.0
    a = [str(row) for row in agent]
    g = [str(row) for row in gold]
    count_a, count_g = Counter(a), Counter(g)
    union_size = sum(max(count_a[k], count_g[k]) for k in set(count_a) | set(count_g))
    if union_size == 0:
        return 1
    shared = count_a & count_g
    reward = sum(shared.values()) / union_size
    if shared:
        with warnings.catch_warnings():  # scipy warns on constant input before returning NaN
            warnings.simplefilter("ignore")
            tau = kendalltau(shared_prefix(a, shared), shared_prefix(g, shared), nan_policy="omit").statistic
        if not math.isnan(tau):
            reward = round(tau * reward, 2)
    return reward


def _sign(x: str, y: str) -> int:
    return (x > y) - (x < y)


@dataclass(frozen=True)
class ExactReward:
    """The reward computed exactly.

    Attributes:
        candidates: the acceptable float results: one value, or two when the exact product lies
            within 1e-9 of a rounding boundary (float arithmetic may land on either side).
        iou: the exact multiset IoU.
        tau: None when tau is undefined, else (tau squared, sign of tau) as exact values.
    """

    candidates: frozenset[float]
    iou: Fraction
    tau: tuple[Fraction, int] | None


def exact_reward(agent: list[Any], gold: list[Any]) -> ExactReward:
    """The reward from first principles (no scipy): exact IoU, exact tau-b², decimal rounding.

    tau-b = (P - Q) / sqrt((n0 - n1) (n0 - n2)) over the pairs of shared rows, with P/Q the
    concordant/discordant pairs, n0 all pairs, n1/n2 the pairs tied in the agent's/gold's labels.
    """
    a = [str(row) for row in agent]
    g = [str(row) for row in gold]
    count_a, count_g = Counter(a), Counter(g)
    union_size = sum(max(count_a[k], count_g[k]) for k in set(count_a) | set(count_g))
    if union_size == 0:
        return ExactReward(frozenset({1.0}), Fraction(1), None)
    shared = count_a & count_g
    iou = Fraction(sum(shared.values()), union_size)
    if not shared:
        return ExactReward(frozenset({float(iou)}), iou, None)
    x, y = shared_prefix(a, shared), shared_prefix(g, shared)
    n = len(x)
    concordance = tied_x = tied_y = 0
    for i in range(n):
        for j in range(i + 1, n):
            sx, sy = _sign(x[i], x[j]), _sign(y[i], y[j])
            tied_x += sx == 0
            tied_y += sy == 0
            concordance += sx * sy
    pairs = n * (n - 1) // 2
    denominator = (pairs - tied_x) * (pairs - tied_y)
    if denominator == 0:  # fewer than two rows, or one side all ties: tau undefined
        return ExactReward(frozenset({float(iou)}), iou, None)
    tau_squared = Fraction(concordance * concordance, denominator)
    sign = (concordance > 0) - (concordance < 0)
    with localcontext() as ctx:
        ctx.prec = 50
        product = sign * (Decimal(tau_squared.numerator) / Decimal(tau_squared.denominator)).sqrt()
        product *= Decimal(iou.numerator) / Decimal(iou.denominator)
        rounded = product.quantize(Decimal("0.01"), rounding=ROUND_HALF_EVEN)
        candidates = {float(rounded)}
        boundary = (product * 100 - (product * 100).to_integral_value(rounding="ROUND_FLOOR")) - Decimal("0.5")
        if abs(boundary) < Decimal("1e-7"):  # x.xx5 up to float noise: either neighbour is fine
            low = (product - Decimal("0.00001")).quantize(Decimal("0.01"))
            high = (product + Decimal("0.00001")).quantize(Decimal("0.01"))
            candidates = {float(low), float(high)}
    return ExactReward(frozenset(candidates), iou, (tau_squared, sign))


class SharedConnectionEpisode:
    """Upstream's episode on one connection: ``USE task_db``, the agent's actions, then the gold.

    Args:
        connection: a mysql-connector connection allowed to read every dataset database (the
            tests use an admin login, like upstream's ``admin`` account); only read actions are run.
    """

    ERROR = "Error executing query: "

    def __init__(self, connection: Any) -> None:
        self.connection = connection

    def run(self, database: str, actions: list[str], gold: str) -> tuple[float, bool]:
        """The reward upstream gives and whether its gold errored (``corrupt_gold``)."""
        cursor = self.connection.cursor(buffered=True)
        try:
            cursor.execute(f"USE {database}")  # upstream's reset
            observation: Any = None
            for action in actions:
                try:
                    cursor.execute(action)
                    observation = cursor.fetchall() if cursor.description is not None else None
                except mysql.connector.Error as err:
                    observation = self.ERROR + str(err.msg)
            try:
                cursor.execute(gold)  # same connection: whatever database the agent left it in
                gold_rows = cursor.fetchall() if cursor.description is not None else []
                corrupt = False
            except mysql.connector.Error:
                gold_rows, corrupt = [], True
            return upstream_reward(observation, gold_rows), corrupt
        finally:
            cursor.close()

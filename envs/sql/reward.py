"""InterCode's SQL reward: multiset IoU of result rows, scaled by Kendall tau-b of their order.

The algorithm is upstream's exactly (see ``docs/intercode.md``); only the way undefined tau is
detected differs: instead of letting scipy return NaN (and emit warnings, whose filters are
process-global and not thread-safe), the degenerate inputs are recognised up front. Both paths
leave the reward unrounded, so the numbers are identical.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from scipy.stats import kendalltau

__all__ = ["sql_reward"]


def _restrict(items: list[str], budget: Counter[str]) -> list[str]:
    """``items`` in their order, each kept at most as often as ``budget`` allows."""
    left = Counter(budget)
    out: list[str] = []
    for item in items:
        if left[item] > 0:
            left[item] -= 1
            out.append(item)
    return out


def _tau_defined(a: list[str], g: list[str]) -> bool:
    """Kendall tau-b is undefined for fewer than two items or when one side is all ties."""
    return len(a) >= 2 and len(set(a)) > 1 and len(set(g)) > 1


def sql_reward(agent_observation: Any, gold_rows: Any) -> float:
    """Score an agent's last observation against the gold query's rows, as InterCode does.

    Args:
        agent_observation: the agent's last observation: a list of row tuples when its last
            query returned rows, otherwise ``None`` or an error string (both score 0).
        gold_rows: the gold query's rows (``[]`` when the gold query errors).

    Returns:
        1.0 when both results are empty; otherwise the multiset intersection-over-union of the
        rows' string forms, multiplied by the Kendall tau-b between the two orders of the shared
        rows and rounded to 2 decimals when tau is defined. Reversed orders give negative values.

    Example:
        >>> sql_reward([(1,), (2,)], [(1,), (2,), (3,)])
        0.67
        >>> sql_reward([(1,), (1,)], [(1,)])
        0.5
    """
    if not (isinstance(agent_observation, list) and isinstance(gold_rows, list)):
        return 0.0
    agent = [str(row) for row in agent_observation]
    gold = [str(row) for row in gold_rows]
    count_a, count_g = Counter(agent), Counter(gold)
    union = count_a | count_g
    if not union:
        return 1.0
    inter = count_a & count_g
    reward = sum(inter.values()) / sum(union.values())
    if inter:
        a = _restrict(agent, inter)
        g = _restrict(gold, inter)
        if _tau_defined(a, g):
            tau = float(kendalltau(a, g, nan_policy="omit").statistic)
            reward = round(tau * reward, 2)
    return reward

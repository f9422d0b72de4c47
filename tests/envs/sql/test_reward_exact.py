"""Exact values of InterCode's SQL reward: partial orders, ties, duplicates, empty results.

The expected values are worked out by hand in the comments (IoU of the row multisets, then
Kendall tau-b over the shared rows, compared as string labels, rounded to 2 places only when tau
is defined). The enumeration and the property test compare every case with two independent
references from ``upstream_reference``: upstream's own steps (scipy) and an exact integer count.
Rounding tau before multiplying, or dropping the rounding, changes many of these values.
"""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from stateflow.envs.sql import sql_reward

from .upstream_reference import exact_reward, upstream_reward

A, B, C, D, X = ("a",), ("b",), ("c",), ("d",), ("x",)

EXACT_CASES = [
    # (agent, gold, expected, why)
    (
        [B, A, C, D, X],
        [A, B, C, D],
        0.53,
        "IoU 4/5; shared orders b,a,c,d vs a,b,c,d: 5 concordant, 1 discordant "
        "of 6 pairs, tau 2/3; 8/15 = 0.533 -> 0.53 (rounding tau first gives 0.67 * 0.8 = 0.54)",
    ),
    (
        [A, B, C, D, A, X],
        [A, A, B, C, D],
        0.19,
        "IoU 5/6; agent labels a,b,c,d,a vs gold a,a,b,c,d: one tied pair on "
        "each side, P - Q = 2, tau-b = 2 / sqrt(9 * 9) = 2/9; 10/54 = 0.185 -> 0.19 (tau first: 0.22 * 5/6 = 0.18)",
    ),
    ([A, B, A, C], [A, A, B, C], 0.4, "IoU 1; ties: P - Q = 2, n1 = n2 = 1, tau-b = 2 / 5"),
    ([A, B, A, C, X], [A, A, B, C], 0.32, "IoU 4/5, tau-b 2/5 as above: 0.32"),
    ([A, B, C, A], [A, A, B, C], 0.0, "IoU 1; P - Q = 0: tau-b 0, the reward is 0 although every row is right"),
    ([(3,), (1,), (2,)], [(1,), (2,), (3,), (4,)], -0.25, "IoU 3/4; 3,1,2 vs 1,2,3: P - Q = -1 of 3, tau -1/3"),
    ([(2,), (1,)], [(1,), (2,), (3,)], -0.67, "IoU 2/3, reversed order: tau -1"),
    ([(10,), (9,)], [(9,), (10,)], -1.0, "labels are strings: '(10,)' < '(9,)', the pair is discordant"),
    ([(1,), (2,), (1,)], [(1,), (2,)], 0.67, "duplicate row in the agent's result: IoU 2/3, tau 1"),
    ([(1,)], [(1,), (1,)], 0.5, "duplicate row in the gold: IoU 1/2, one shared row: tau undefined, unrounded"),
    ([(1,), (1,), (1,)], [(1,)], 1 / 3, "IoU 1/3; one shared row: tau undefined, the IoU stays unrounded"),
    ([(1,), (1,)], [(1,), (1,)], 1.0, "all ties: tau undefined, IoU 1"),
    ([(1,), (2,), (3,)], [(2,)], 1 / 3, "one shared row of three: unrounded 1/3"),
    ([], [], 1.0, "both empty"),
    ([], [(1,)], 0.0, "empty agent result, non-empty gold"),
    ([(1,)], [], 0.0, "non-empty agent result, empty gold (or a gold that errored)"),
    (None, [], 0.0, "a statement without result set is not a list: 0 even against an empty gold"),
    ("Error executing query: x", [], 0.0, "an error observation scores 0"),
    ([("a", 1), ("b", 2)], [(1, "a"), (2, "b")], 0.0, "column order differs: no row is shared"),
    ([(1, "a"), (2, "b")], [(1, "a"), (2, "b")], 1.0, "same columns, same order"),
]


@pytest.mark.parametrize(("agent", "gold", "expected", "why"), EXACT_CASES, ids=range(len(EXACT_CASES)))
def test_exact_values(agent: object, gold: list, expected: float, why: str) -> None:
    assert sql_reward(agent, gold) == expected, why


def _orderings(rows: list[tuple[str]]) -> set[tuple[tuple[str], ...]]:
    return set(itertools.permutations(rows))


def _enumerated_cases() -> list[tuple[list[tuple[str]], list[tuple[str]]]]:
    """Every ordering of agent results built from a gold with a tie (a twice): the full result, one
    row missing, one extra row, and both; against the gold in its own order."""
    gold = [A, A, B, C, D]
    agents: set[tuple[tuple[str], ...]] = set()
    for variant in ([A, A, B, C, D], [A, B, C, D], [A, A, B, C, D, X], [A, A, C, D, X], [A, B, B, C, D]):
        agents |= _orderings(variant)
    return [(list(agent), gold) for agent in sorted(agents)]


ENUMERATED = _enumerated_cases()


def test_enumerated_partial_orders_match_both_references() -> None:
    # 60 + 24 + 360 + 60 + 60 distinct orderings: a broken generator cannot pass vacuously
    assert len(ENUMERATED) == 564
    wrong = []
    for agent, gold in ENUMERATED:
        value = sql_reward(agent, gold)
        exact = exact_reward(agent, gold)
        if value not in exact.candidates or value != upstream_reward(agent, gold):
            wrong.append((agent, value, sorted(exact.candidates), upstream_reward(agent, gold)))
    assert wrong == [], f"{len(wrong)} cases differ, first: {wrong[:3]}"


def test_enumeration_covers_negative_zero_and_fractional_values() -> None:
    values = {sql_reward(agent, gold) for agent, gold in ENUMERATED}
    assert min(values) < 0 < max(values) == 1.0
    assert any(v not in (-1.0, 0.0, 1.0) and round(v, 2) == v for v in values)


labels = st.sampled_from([A, B, C, D, X, (1,), (2,), (10,)])


@settings(max_examples=400)
@given(st.lists(labels, max_size=8), st.lists(labels, max_size=8))
def test_random_partial_orders_match_both_references(agent: list, gold: list) -> None:
    value = sql_reward(agent, gold)
    assert value in exact_reward(agent, gold).candidates
    assert value == upstream_reward(agent, gold)

"""InterCode's SQL reward: documented examples and algebraic properties (hypothesis)."""

from __future__ import annotations

import datetime
import math
from decimal import Decimal

from hypothesis import given, settings
from hypothesis import strategies as st
from stateflow.envs.sql import sql_reward

rows = st.lists(st.tuples(st.integers(-3, 3)) | st.tuples(st.sampled_from(["a", "b", "c"]), st.integers(0, 2)))


def test_documented_examples() -> None:
    assert sql_reward([(1,), (2,)], [(1,), (2,), (3,)]) == 0.67
    assert sql_reward([(1,), (1,)], [(1,)]) == 0.5
    assert sql_reward([(1.0,)], [(1,)]) == 0.0
    assert sql_reward([], []) == 1.0
    assert sql_reward([(3,), (2,), (1,)], [(1,), (2,), (3,)]) == -1.0


def test_non_lists_score_zero() -> None:
    assert sql_reward(None, [(1,)]) == 0.0
    assert sql_reward("Error executing query: boom", []) == 0.0
    assert sql_reward([(1,)], None) == 0.0


def test_types_compare_by_string_form() -> None:
    assert sql_reward([(Decimal("1.50"),)], [(Decimal("1.50"),)]) == 1.0
    assert sql_reward([(Decimal("1.5"),)], [(Decimal("1.50"),)]) == 0.0
    day = datetime.date(2024, 7, 1)
    assert sql_reward([(day, None)], [(day, None)]) == 1.0


def test_single_shared_row_keeps_unrounded_iou() -> None:
    # tau undefined for one element: the IoU stays unrounded, as upstream
    assert sql_reward([(1,), (2,), (3,)], [(1,)]) == 1 / 3


@given(rows)
def test_identical_results_score_one(result: list) -> None:
    assert sql_reward(list(result), list(result)) == 1.0


@given(rows, rows)
def test_bounded(agent: list, gold: list) -> None:
    value = sql_reward(agent, gold)
    assert -1.0 <= value <= 1.0
    assert not math.isnan(value)


@given(rows, rows)
def test_disjoint_results_score_zero(agent: list, gold: list) -> None:
    shared = {str(r) for r in agent} & {str(r) for r in gold}
    if (gold or agent) and not shared:
        assert sql_reward(agent, gold) == 0.0


@settings(max_examples=200)
@given(rows, rows)
def test_symmetric(agent: list, gold: list) -> None:
    assert sql_reward(agent, gold) == sql_reward(gold, agent)


@given(st.lists(st.integers(), min_size=2, unique=True))
def test_reversed_sorted_result_is_negative(values: list[int]) -> None:
    # tau compares the rows' string labels pairwise: a gold sorted by its string form and
    # the agent's exact reverse are perfectly discordant
    gold = sorted(((v,) for v in values), key=str)
    assert sql_reward(list(reversed(gold)), gold) == -1.0


@given(st.permutations(list(range(6))))
def test_permutation_keeps_iou_and_scales_by_tau(order: list[int]) -> None:
    gold = [(v,) for v in range(6)]
    agent = [gold[i] for i in order]
    value = sql_reward(agent, gold)
    assert -1.0 <= value <= 1.0
    assert (value == 1.0) == (order == sorted(order))


@given(rows, st.integers(1, 3))
def test_duplicating_the_gold_divides_by_repeats(gold: list, repeats: int) -> None:
    # agent = gold repeated: IoU = 1/repeats, and tau over the intersection (= gold) is 1 or undefined
    if not gold:
        return
    agent = list(gold) * repeats
    value = sql_reward(agent, gold)
    assert math.isclose(value, 1 / repeats, abs_tol=0.005)

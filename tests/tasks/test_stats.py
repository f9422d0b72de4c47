"""The statistics the reports cite, against textbook values and an independent implementation."""

from __future__ import annotations

import itertools
import math

import pytest
from stateflow.tasks.kit.stats import holm, mcnemar_exact_p, repeat_outcomes, wilson_interval
from statsmodels.stats.contingency_tables import mcnemar
from statsmodels.stats.proportion import proportion_confint


def test_wilson_interval_of_66_of_100_and_newcombes_textbook_case():
    ci = wilson_interval(66, 100)
    assert (round(ci.low, 2), round(ci.high, 2)) == (56.28, 74.54)
    assert ci.text() == "56.3-74.5"
    # Newcombe (1998), Statistics in Medicine 17:857, example: 81 of 263 -> 0.2553 to 0.3662
    ci = wilson_interval(81, 263)
    assert (round(ci.low / 100, 4), round(ci.high / 100, 4)) == (0.2553, 0.3662)


@pytest.mark.parametrize(("k", "n"), [(0, 1), (0, 10), (10, 10), (1, 3), (59, 100), (22, 100), (5, 40)])
def test_wilson_interval_agrees_with_statsmodels_and_stays_inside_0_100(k, n):
    low, high = proportion_confint(k, n, alpha=0.05, method="wilson")
    ci = wilson_interval(k, n)
    assert math.isclose(ci.low, 100 * low, abs_tol=1e-9) and math.isclose(ci.high, 100 * high, abs_tol=1e-9)
    assert 0.0 <= ci.low <= 100.0 * k / n <= ci.high <= 100.0


@pytest.mark.parametrize(("k", "n"), [(-1, 10), (11, 10), (0, 0)])
def test_wilson_interval_refuses_impossible_counts(k, n):
    with pytest.raises(ValueError, match="0 <= successes <= n"):
        wilson_interval(k, n)


@pytest.mark.parametrize(("won", "lost"), [(8, 2), (2, 8), (0, 12), (5, 5), (13, 2), (1, 0), (11, 25)])
def test_exact_mcnemar_is_statsmodels_on_the_2x2_table_and_the_binomial_by_brute_force(won, lost):
    # the concordant cells (both solved / both failed) must not change the exact test
    table = [[40, lost], [won, 17]]
    assert math.isclose(mcnemar_exact_p(won, lost), mcnemar(table, exact=True).pvalue)
    n = won + lost
    if n <= 16:
        extreme = abs(won - lost)
        at_least = sum(1 for f in itertools.product((0, 1), repeat=n) if abs(2 * sum(f) - n) >= extreme)
        assert math.isclose(mcnemar_exact_p(won, lost), at_least / 2**n)


def test_exact_mcnemar_known_values_and_bad_counts():
    assert mcnemar_exact_p(8, 2) == pytest.approx(0.109375)
    assert mcnemar_exact_p(0, 0) == 1.0
    assert mcnemar_exact_p(11, 5) == pytest.approx(0.2101, abs=1e-4)  # the held-out one-shot's 11 / 5
    with pytest.raises(ValueError, match="counts must be >= 0"):
        mcnemar_exact_p(-1, 3)


def test_holm_on_a_fixed_list():
    # Holm (1979): sorted p times (m, m-1, ...), made monotone, capped at 1; returned in input order
    assert holm([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert holm([0.5, 0.9]) == pytest.approx([1.0, 1.0])
    assert holm([0.02]) == pytest.approx([0.02])
    assert holm([]) == []
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        holm([0.1, 1.5])


def test_repeat_outcomes_pass_at_1_pass_at_k_pass_hat_k_and_flips():
    runs = {
        0: [True, True, True],  # always
        1: [True, False, True],  # flips
        2: [False, False, False],  # never
        3: [False, True, False],  # flips
        4: [True],  # not every repeat recorded: left out
    }
    r = repeat_outcomes(runs, 3)
    assert r.tasks == 4 and r.k == 3
    assert r.pass_1 == pytest.approx(100 * 6 / 12)
    # repeats of a task are not independent: the interval resamples tasks (fixed seed: reproducible)
    assert r.pass_1_ci.low < 50.0 < r.pass_1_ci.high and repeat_outcomes(runs, 3).pass_1_ci == r.pass_1_ci
    assert r.pass_k == 75.0 and r.pass_hat_k == 25.0
    assert r.flips == 50.0 and r.flipped_tasks == (1, 3)
    with pytest.raises(ValueError, match="no task has all 5 repeats"):
        repeat_outcomes(runs, 5)
    with pytest.raises(ValueError, match="repeats must be >= 1"):
        repeat_outcomes(runs, 0)


def test_pass_at_1_interval_of_repeats_is_wider_than_treating_episodes_as_independent():
    # five tasks always solved, five never: 30 episodes but only 10 independent tasks
    runs = {t: [t < 5] * 3 for t in range(10)}
    r = repeat_outcomes(runs, 3)
    naive = wilson_interval(15, 30)
    assert r.pass_1 == 50.0 and r.flips == 0.0
    assert r.pass_1_ci.high - r.pass_1_ci.low > naive.high - naive.low
    # one repeat: the tables' Wilson interval over tasks
    assert repeat_outcomes({t: [t < 5] for t in range(10)}, 1).pass_1_ci == wilson_interval(5, 10)
    # nothing varies: the interval is the point
    assert repeat_outcomes({t: [True, True] for t in range(4)}, 2).pass_1_ci.text() == "100.0-100.0"

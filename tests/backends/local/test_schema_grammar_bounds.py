"""Numeric bounds in the embedded server's JSON-schema grammar (issue 57, item 9): the range
algebra of :mod:`stateflow.backends.local.schema_grammar`, without llama.cpp.

Each GBNF expression is translated into a Python regex (the subset the module emits: literals,
digit classes, groups, alternation, ``?`` and ``{m,n}``) so that the languages can be compared
with the arithmetic they stand for: an integer range's grammar matches a decimal string exactly
when it is a canonical JSON integer (no leading zeros, no ``-0``) inside the range.
"""

from __future__ import annotations

import math
import re
from decimal import Decimal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stateflow.backends.local.schema_grammar import (
    MAX_DIGITS,
    SchemaGrammarError,
    integer_bounds,
    integer_range_gbnf,
    number_bounds,
    number_range_gbnf,
)

_TOKEN = re.compile(r'"(?P<lit>[^"\\]*)"|(?P<cls>\[[^\]]+\])|(?P<rep>\{\d+(?:,\d+)?\})|(?P<op>[()|?])|(?P<ws>\s+)')


def to_regex(gbnf: str) -> re.Pattern[str]:
    """The Python regex of a GBNF expression in the subset the range functions emit."""
    out, pos = [], 0
    while pos < len(gbnf):
        m = _TOKEN.match(gbnf, pos)
        assert m is not None, f"unexpected GBNF at {pos}: {gbnf[pos : pos + 20]!r}"
        pos = m.end()
        if m["lit"] is not None:
            out.append(f"(?:{re.escape(m['lit'])})")
        elif m["cls"] or m["rep"]:
            out.append(m["cls"] or m["rep"])
        elif m["op"]:
            out.append("(?:" if m["op"] == "(" else m["op"])
    return re.compile("".join(out))


def _canonical(s: str) -> bool:
    return s == str(int(s))  # rejects "007", "-0", "+1"


bound = st.integers(-(10**7), 10**7)


@settings(max_examples=300, deadline=None)
@given(lo=bound, width=st.integers(0, 10**7), s=st.from_regex(r"-?[0-9]{1,9}", fullmatch=True))
def test_an_integer_ranges_grammar_matches_exactly_the_canonical_integers_in_it(lo, width, s):
    hi = lo + width
    assert bool(to_regex(integer_range_gbnf(lo, hi)).fullmatch(s)) == (_canonical(s) and lo <= int(s) <= hi)


@settings(max_examples=300, deadline=None)
@given(lo=bound, width=st.integers(0, 10**7), data=st.data())
def test_every_integer_in_a_range_matches_and_its_neighbours_do_not(lo, width, data):
    hi = lo + width
    rx = to_regex(integer_range_gbnf(lo, hi))
    inside = data.draw(st.integers(lo, hi))
    assert rx.fullmatch(str(inside)) and rx.fullmatch(str(lo)) and rx.fullmatch(str(hi))
    assert not rx.fullmatch(str(lo - 1)) and not rx.fullmatch(str(hi + 1))


def test_the_issues_case_le_1000_cannot_produce_3000000000000000():
    rx = to_regex(integer_range_gbnf(None, 1000))
    assert not rx.fullmatch("3000000000000000")
    assert rx.fullmatch("1000") and rx.fullmatch("-" + "9" * MAX_DIGITS) and not rx.fullmatch("1001")


def test_one_sided_ranges_keep_the_librarys_digit_limit_on_the_open_side():
    rx = to_regex(integer_range_gbnf(0, None))
    assert rx.fullmatch("9" * MAX_DIGITS) and not rx.fullmatch("1" + "0" * MAX_DIGITS)
    assert not rx.fullmatch("-1") and rx.fullmatch("0")


def test_bounds_that_exclude_every_integer_are_refused():
    with pytest.raises(SchemaGrammarError, match="no integer is >= 5 and <= 4"):
        integer_range_gbnf(5, 4)
    with pytest.raises(SchemaGrammarError, match="exclude every value"):
        number_range_gbnf(1.5, 0.5)


@pytest.mark.parametrize(
    ("schema", "expected"),
    [
        ({"type": "integer", "minimum": 0, "maximum": 1000}, (0, 1000)),  # ge=0, le=1000
        ({"type": "integer", "exclusiveMinimum": 0, "exclusiveMaximum": 10}, (1, 9)),  # gt=0, lt=10
        ({"type": "integer", "minimum": 0.5, "maximum": 9.5}, (1, 9)),
        ({"type": "integer", "exclusiveMinimum": 0.5, "exclusiveMaximum": 9.5}, (1, 9)),
        ({"type": "integer", "minimum": 3, "exclusiveMinimum": 5}, (6, None)),  # the tighter wins
        ({"type": "integer"}, (None, None)),
    ],
)
def test_integer_bounds_read_pydantics_keywords(schema, expected):
    assert integer_bounds(schema) == expected


def test_a_bound_that_is_not_a_number_is_refused():
    with pytest.raises(SchemaGrammarError, match="exclusiveMinimum must be a number"):
        integer_bounds({"type": "integer", "minimum": 0, "exclusiveMinimum": True})


money = st.decimals(min_value=-(10**6), max_value=10**6, places=2, allow_nan=False, allow_infinity=False)


@settings(max_examples=300, deadline=None)
@given(a=money, b=money, data=st.data())
def test_a_number_ranges_grammar_admits_every_value_in_it_and_no_integral_part_outside(a, b, data):
    lo, hi = sorted((a, b))
    rx = to_regex(number_range_gbnf(float(lo), float(hi)))
    inside = data.draw(st.decimals(min_value=lo, max_value=hi, places=3, allow_nan=False, allow_infinity=False))
    text = format(abs(inside) if inside.is_zero() else inside, "f")
    assert rx.fullmatch(text), (text, lo, hi)
    low_int = math.ceil(lo) if lo < 0 else math.floor(lo)  # the integral parts the grammar allows
    outside = data.draw(st.one_of(st.integers(max_value=low_int - 1), st.integers(min_value=math.floor(hi) + 1)))
    assert not rx.fullmatch(str(outside)) and not rx.fullmatch(f"{outside}.5")
    assert not rx.fullmatch(f"{Decimal(inside):f}e0")  # never an exponent, which would escape the bound


def test_number_bounds_take_exclusive_bounds_as_closed():
    assert number_bounds({"type": "number", "exclusiveMinimum": 0, "maximum": 1}) == (0, 1)
    rx = to_regex(number_range_gbnf(0, 1))
    assert rx.fullmatch("0.25") and rx.fullmatch("1") and not rx.fullmatch("-0.25") and not rx.fullmatch("2.0")
    assert rx.fullmatch("1.5")  # the fraction is not bounded: pydantic's validation (and re-ask) is

"""The grammar the embedded server decodes ``LLM(schema=...)`` replies with: a JSON schema as GBNF,
with the numeric bounds the library's converter leaves out.

llama-cpp-python (0.3.x) turns a request's ``response_format`` ``{"type": "json_object",
"schema": ...}`` into a grammar with its ``SchemaConverter``, which ignores ``minimum``,
``maximum``, ``exclusiveMinimum`` and ``exclusiveMaximum`` (an integer is any sign and up to 16
digits: ``le=1000`` let ``3000000000000000`` through), and which falls back, silently, to a
grammar for *any* JSON when it cannot convert a schema. :func:`schema_to_gbnf` is that converter
with two changes:

* **bounded numbers**: an ``integer`` with bounds is decoded as exactly the integers in its range
  (:func:`integer_range_gbnf`, also for one-sided bounds, the open side capped at the library's
  16 digits); a ``number`` with bounds gets its sign and integral part bounded, no exponent, and
  a free fraction (:func:`number_range_gbnf`: ``ge=0, le=1`` still lets ``1.5`` through);
* **no fallback**: a schema it cannot convert raises :class:`SchemaGrammarError`, which the
  server answers with HTTP 400 naming the problem.

What the grammar cannot hold (``multipleOf``, the fraction of a float bound, exclusive float
bounds, ``uniqueItems``, most string formats, custom validators) is checked when StateFlow
validates the reply into the pydantic model, which re-asks once (``stateflow.structured``).

This module imports nothing from ``stateflow`` (the server child process loads it by path, see
``server_app.py``) and needs ``llama_cpp`` only inside :func:`schema_to_gbnf`.

Example:
    >>> integer_range_gbnf(0, 1000)
    '([0-9] | [1-9] [0-9]{1,2} | "1000")'
    >>> integer_range_gbnf(-5, 12)
    '("-" [1-5] | [0-9] | "1" [0-2])'
"""

from __future__ import annotations

import copy
import math
from typing import Any

__all__ = ["MAX_DIGITS", "SchemaGrammarError", "integer_range_gbnf", "number_range_gbnf", "schema_to_gbnf"]

#: digits of the integral part on an unbounded side: the library's own limit (``integral-part``)
MAX_DIGITS = 16
_CAP = 10**MAX_DIGITS - 1
#: digits of a fraction, as the library's ``decimal-part``
_FRACTION = '("." [0-9]{1,16})?'


class SchemaGrammarError(ValueError):
    """A JSON schema that cannot be turned into a grammar (the request is refused, not relaxed)."""


# --- integer ranges as GBNF ----------------------------------------------------------------------


def _lit(text: str) -> str:
    return f'"{text}"'


def _digit_class(lo: int, hi: int) -> str:
    return f"[{lo}]" if lo == hi else f"[{lo}-{hi}]"


def _repeat_digits(low: int, high: int) -> str:
    if high == 0:
        return ""
    if low == high:
        return "[0-9]" if low == 1 else f"[0-9]{{{low}}}"
    return f"[0-9]{{{low},{high}}}"


def _seq(*parts: str) -> str:
    return " ".join(p for p in parts if p)


def _alt(options: list[str]) -> str:
    return options[0] if len(options) == 1 else "(" + " | ".join(options) + ")"


def _same_length(lo: str, hi: str) -> str:
    """Digit strings of ``len(lo) == len(hi)`` digits whose value is in ``[lo, hi]``."""
    if lo == hi:
        return _lit(lo)
    if lo[0] == hi[0]:
        return _seq(_lit(lo[0]), _same_length(lo[1:], hi[1:]))
    rest = len(lo) - 1
    first_lo, first_hi = int(lo[0]), int(hi[0])
    options = []
    # lo[0] followed by anything >= lo[1:]; when lo[1:] is all zeros that is every tail
    middle_lo = first_lo
    if lo[1:] != "0" * rest:
        options.append(_seq(_lit(lo[0]), _same_length(lo[1:], "9" * rest)))
        middle_lo = first_lo + 1
    middle_hi = first_hi
    upper = None
    if hi[1:] != "9" * rest:
        upper = _seq(_lit(hi[0]), _same_length("0" * rest, hi[1:]))
        middle_hi = first_hi - 1
    if middle_lo <= middle_hi:
        options.append(_seq(_digit_class(middle_lo, middle_hi), _repeat_digits(rest, rest)))
    if upper is not None:
        options.append(upper)
    return _alt(options)


def _non_negative(lo: int, hi: int) -> list[str]:
    """Alternatives for the decimal forms (no leading zeros) of the integers in ``[lo, hi]``, ``0 <= lo <= hi``."""
    options: list[str] = []
    full: list[int] = []  # lengths whose every number is in range, merged into one option

    def flush() -> None:
        if full:
            options.append(_seq("[1-9]", _repeat_digits(full[0] - 1, full[-1] - 1)))
            full.clear()

    for length in range(len(str(lo)), len(str(hi)) + 1):
        first = 0 if length == 1 else 10 ** (length - 1)
        last = 10**length - 1
        a, b = max(lo, first), min(hi, last)
        if length > 1 and (a, b) == (first, last):
            full.append(length)
            continue
        flush()
        options.append(_same_length(str(a), str(b)))
    flush()
    return options


def integer_range_gbnf(lo: int | None, hi: int | None) -> str:
    """A GBNF expression for exactly the JSON integers in ``[lo, hi]`` (no leading zeros, no
    ``-0``); a missing bound is the library's limit of :data:`MAX_DIGITS` digits.

    Raises:
        SchemaGrammarError: ``lo > hi`` (no integer satisfies the bounds).
    """
    low = lo if lo is not None else min(-_CAP, hi if hi is not None else 0)
    high = hi if hi is not None else max(_CAP, low)
    if low > high:
        raise SchemaGrammarError(f"no integer is >= {lo} and <= {hi}: the schema's bounds exclude every value")
    options = []
    if low < 0:
        options.append(_seq('"-"', _alt(_non_negative(max(-high, 1), -low))))
    if high >= 0:
        options.extend(_non_negative(max(low, 0), high))
    return _alt(options)


def number_range_gbnf(lo: float | None, hi: float | None) -> str:
    """A GBNF expression for JSON numbers whose sign and integral part fit ``[lo, hi]``: written
    without an exponent, with any fraction (so a superset of the range: validation checks the
    fraction).

    Raises:
        SchemaGrammarError: ``lo > hi``.
    """
    if lo is not None and hi is not None and lo > hi:
        raise SchemaGrammarError(f"no number is >= {lo} and <= {hi}: the schema's bounds exclude every value")
    options = []
    if lo is None or lo < 0:  # negative values: their magnitude's integral part
        magnitude_hi = _CAP if lo is None else math.floor(-lo)
        magnitude_lo = math.floor(-hi) if hi is not None and hi < 0 else 0
        options.append(_seq('"-"', _alt(_non_negative(magnitude_lo, magnitude_hi)), _FRACTION))
    if hi is None or hi >= 0:
        low = math.floor(lo) if lo is not None and lo > 0 else 0
        high = _CAP if hi is None else math.floor(hi)
        options.append(_seq(_alt(_non_negative(low, high)), _FRACTION))
    return _alt(options)


# --- bounds read from a schema --------------------------------------------------------------------

_BOUND_KEYS = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum")


def _bound(schema: dict[str, Any], key: str) -> float | None:
    value = schema.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise SchemaGrammarError(f"{key} must be a number, got {value!r} (draft-4 boolean bounds are not supported)")
    return value


def integer_bounds(schema: dict[str, Any]) -> tuple[int | None, int | None]:
    """The smallest and largest integer a schema's bounds allow (``None``: unbounded)."""
    lows, highs = [], []
    if (v := _bound(schema, "minimum")) is not None:
        lows.append(math.ceil(v))
    if (v := _bound(schema, "exclusiveMinimum")) is not None:
        lows.append(math.floor(v) + 1)
    if (v := _bound(schema, "maximum")) is not None:
        highs.append(math.floor(v))
    if (v := _bound(schema, "exclusiveMaximum")) is not None:
        highs.append(math.ceil(v) - 1)
    return (max(lows) if lows else None), (min(highs) if highs else None)


def number_bounds(schema: dict[str, Any]) -> tuple[float | None, float | None]:
    """The closed interval a number's bounds fit in (exclusive bounds taken as inclusive: the
    grammar is a superset there, validation is exact)."""
    lows = [v for k in ("minimum", "exclusiveMinimum") if (v := _bound(schema, k)) is not None]
    highs = [v for k in ("maximum", "exclusiveMaximum") if (v := _bound(schema, k)) is not None]
    return (max(lows) if lows else None), (min(highs) if highs else None)


# --- the whole schema -------------------------------------------------------------------------------


def schema_to_gbnf(schema: dict[str, Any]) -> str:
    """The GBNF grammar for replies valid under ``schema``: llama-cpp-python's ``SchemaConverter``
    with bounded integers and numbers (see the module docstring).

    Raises:
        SchemaGrammarError: the schema cannot be converted (the library's error, named), or its
            bounds exclude every value.
    """
    from llama_cpp import llama_grammar

    class BoundedConverter(llama_grammar.SchemaConverter):  # type: ignore[misc, name-defined]
        def visit(self, schema: dict[str, Any], name: str) -> str:
            kind = schema.get("type")
            plain = not any(k in schema for k in ("$ref", "anyOf", "oneOf", "allOf", "const", "enum"))
            if kind in ("integer", "number") and plain and any(k in schema for k in _BOUND_KEYS):
                rule = name + "-" if name in llama_grammar.RESERVED_NAMES else name or "root"
                body = (
                    integer_range_gbnf(*integer_bounds(schema))
                    if kind == "integer"
                    else number_range_gbnf(*number_bounds(schema))
                )
                return self._add_rule(rule, f"{body} space")
            return super().visit(schema, name)

    try:
        converter = BoundedConverter(prop_order={}, allow_fetch=False, dotall=False, raw_pattern=False)
        resolved = converter.resolve_refs(copy.deepcopy(schema), "request")  # it rewrites $ref in place
        converter.visit(resolved, "")
    except SchemaGrammarError:
        raise
    except Exception as err:  # the library raises assorted errors (AssertionError, KeyError...)
        raise SchemaGrammarError(
            f"the JSON schema cannot be turned into a grammar ({type(err).__name__}: {err}); "
            "simplify the schema, or ask without response_format"
        ) from err
    return converter.format_grammar()

"""Canonical JSON of the trees a run's encoder builds, written by orjson, byte for byte as ``json`` writes it.

A checkpoint's text is canonical JSON (:func:`stateflow.checkpoint.record.canonical_json`: sorted
keys, no spaces, UTF-8 characters kept, no NaN). A run's encoder
(:class:`stateflow.run_state.PayloadEncoder`) encodes each new message, step, transition and chat
message of a run once; with the standard library's C encoder that was the largest single piece of
a checkpoint inside an episode (scripts/bench_checkpoint.py, docs/checkpoints.md). orjson writes
the same text several times faster, with two kinds of differences, each handled here so that the text
stays exactly the standard encoder's:

- *floats*: below ``1e-4`` orjson writes negative exponents without padding (``1e-7``;
  ``json``: ``1e-07``) and numbers in ``[1e-5, 1e-4)`` in full (``0.00001``; ``json``:
  ``1e-05``), and it writes NaN and infinity as ``null``, which ``json`` refuses. Within
  ``1e-4 <= |x| < 1e16`` (and zero) both write Python's shortest ``repr`` (checked on a million
  random floats, and by tests/core/checkpoint/test_tree_text.py); larger numbers agreed too
  (``1e+16``) but are not relied on. The builder of a tree passes every other float through
  :func:`json_float`, which marks it as a ``float`` subclass: orjson hands the tree back (below)
  and the standard encoder writes it, or refuses it, exactly as before;
- *values ``json`` refuses or writes otherwise*: subclasses of ``str``, ``int``, ``float``,
  ``dict`` and ``list``, dataclasses, dates, integers beyond 64 bits, keys that are not ``str``
  and unpaired surrogates make orjson fail here (its ``passthrough`` options, and a ``default``
  that refuses everything), and the standard encoder writes the text or raises its own error.

Enums, UUIDs and numpy values, which orjson writes natively and ``json`` refuses, never reach
these trees: the run's encoder has turned every such value into its ``str`` already
(:func:`stateflow.run_state._plain`). Values a user hands in as they are (``vars``, blackboard
records) are not written here: they keep the standard encoder and its errors.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NoReturn

import orjson

__all__ = ["json_float", "tree_dumper"]

_OPTIONS = (
    orjson.OPT_SORT_KEYS
    | orjson.OPT_PASSTHROUGH_SUBCLASS
    | orjson.OPT_PASSTHROUGH_DATACLASS
    | orjson.OPT_PASSTHROUGH_DATETIME
)


def _refuse(value: Any) -> NoReturn:
    raise TypeError(f"{type(value).__name__} is left to the standard encoder")


class _StandardFloat(float):
    """A float whose text only the standard encoder writes right (see :func:`json_float`)."""

    __slots__ = ()


def json_float(value: Any) -> Any:
    """``value``, marked for the standard encoder if it is a float whose text orjson writes otherwise
    (an exponent, a number below ``1e-4``, NaN, infinity); anything else is returned as it is.

    Example:
        >>> type(json_float(0.25)).__name__, type(json_float(2.5e-05)).__name__, json_float("x")
        ('float', '_StandardFloat', 'x')
    """
    if type(value) is float and not (value == 0.0 or 1e-4 <= abs(value) < 1e16):
        return _StandardFloat(value)
    return value


def tree_dumper(exact: Callable[[Any], str]) -> Callable[[Any], str]:
    """A function that returns ``exact(tree)``, computed by orjson when its text is certainly the same.

    The tree's plain floats must have passed through :func:`json_float` (a float outside
    ``1e-4 <= |x| < 1e16`` that did not would be written in orjson's form).

    Args:
        exact: the standard encoder with canonical settings (its text, or its error, is the answer
            whenever orjson's could differ).

    Example:
        >>> from stateflow.checkpoint.record import canonical_json
        >>> dump = tree_dumper(canonical_json)
        >>> dump({"b": [1, json_float(2.5e-05), "é"], "a": None})
        '{"a":null,"b":[1,2.5e-05,"é"]}'
    """
    dumps, options = orjson.dumps, _OPTIONS

    def dump(tree: Any) -> str:
        try:
            return dumps(tree, default=_refuse, option=options).decode()
        except TypeError:  # orjson.JSONEncodeError is a TypeError: a value for the standard encoder
            return exact(tree)

    return dump

"""Payload deltas: what changed in a run's state between two consecutive checkpoints.

A run's history only grows, so a checkpoint that copies it whole costs O(n) per step and O(n^2)
per thread. A delta stores, per top-level payload key, either the items appended to a list that
extends the previous one, or the new value; :func:`apply_delta` rebuilds the payload exactly.

Format (JSON): ``{"append": {key: [new items]}, "set": {key: value}, "drop": [key, ...]}``.

Example:
    >>> old = {"history": ["a", "b"], "vars": {"n": 1}}
    >>> new = {"history": ["a", "b", "c"], "vars": {"n": 2}}
    >>> d = payload_delta(old, new)
    >>> d
    {'append': {'history': ['c']}, 'set': {'vars': {'n': 2}}, 'drop': []}
    >>> apply_delta(old, d) == new
    True
"""

from __future__ import annotations

import operator
from collections.abc import Mapping
from typing import Any

__all__ = ["apply_delta", "identity_delta", "payload_delta"]


def payload_delta(previous: Mapping[str, Any], current: Mapping[str, Any]) -> dict[str, Any]:
    """The delta that turns ``previous`` into ``current`` (unchanged keys are left out)."""
    append: dict[str, list[Any]] = {}
    changed: dict[str, Any] = {}
    for key, value in current.items():
        old = previous.get(key, _MISSING)
        if old is _MISSING or old != value:
            extends = isinstance(value, list) and isinstance(old, list) and value[: len(old)] == old
            if extends and len(old) <= len(value):
                append[key] = value[len(old) :]
            else:
                changed[key] = value
    return {"append": append, "set": changed, "drop": sorted(k for k in previous if k not in current)}


def identity_delta(previous: Mapping[str, Any], current: Mapping[str, Any]) -> dict[str, Any]:
    """The delta from ``previous`` to ``current`` where "unchanged" means *the same object*.

    For payloads built from shared, never-mutated parts (a run's encoder reuses each encoded
    message): a key is left out only if it holds the very object it held before, and a list is
    an append only if its first items are the very items of the previous list. Equal but distinct
    values are written again, so the delta is exact in JSON terms (``1`` and ``1.0`` are equal in
    Python, not in JSON) without encoding the unchanged parts to check it, which is what costs
    in :func:`payload_delta`'s callers. Same format as :func:`payload_delta`.
    """
    append: dict[str, list[Any]] = {}
    changed: dict[str, Any] = {}
    for key, value in current.items():
        old = previous.get(key, _MISSING)
        if old is value:
            continue
        if (
            isinstance(value, list)
            and isinstance(old, list)
            and len(old) <= len(value)
            and all(map(operator.is_, old, value))  # at C speed (map stops at the shorter)
        ):
            if len(old) < len(value):
                append[key] = value[len(old) :]
            continue
        changed[key] = value
    return {"append": append, "set": changed, "drop": sorted(k for k in previous if k not in current)}


def apply_delta(previous: Mapping[str, Any], delta: Mapping[str, Any]) -> dict[str, Any]:
    """``previous`` with ``delta`` applied (a new dict; ``previous`` is not changed).

    Raises:
        ValueError: the delta does not fit ``previous`` (an append to a key that is not a list) or
            is malformed.
    """
    if not isinstance(delta, Mapping) or set(delta) != {"append", "set", "drop"}:
        raise ValueError("a delta has exactly the keys append, set and drop")
    result = dict(previous)
    for key in delta["drop"]:
        result.pop(key, None)
    for key, items in delta["append"].items():
        base = result.get(key)
        if not isinstance(base, list) or not isinstance(items, list):
            raise ValueError(f"append to {key!r}, which is not a list in the previous checkpoint")
        result[key] = base + items
    result.update(delta["set"])
    return result


_MISSING = object()

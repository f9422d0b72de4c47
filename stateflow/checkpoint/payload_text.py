"""A payload's canonical JSON kept in parts: the text of each top-level value, and of each item of
its growing lists.

A run's encoder (:class:`stateflow.run_state.PayloadEncoder`) has the text of every message, step
and value of a payload before any store sees it. Joining those texts into one string at every
transition, and encoding the new items a second time for a delta row, was most of what a
checkpoint cost inside an episode (scripts/bench_checkpoint.py). A :class:`PayloadText` keeps the
parts instead: a store that writes a delta row takes the new items' texts from it
(:meth:`PayloadText.delta_text`), and the whole text is joined only by a store that needs it
(:meth:`PayloadText.json`).

Every part is a ``str``, a tuple of them, or an :class:`ItemTexts` (a growing list's items as
segments, one per checkpoint that added items, each segment shared by the later checkpoints): a
``PayloadText`` never changes after it is made, so a store may keep it as the stored form of its
payload.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from stateflow.checkpoint.record import canonical_json

__all__ = ["ItemTexts", "PayloadText"]


class ItemTexts:
    """The canonical JSON of a list's items, as the segments successive checkpoints added.

    A run's lists only grow, so the items a checkpoint adds are encoded once, as one segment (the
    items' texts joined by commas), and the next checkpoint's list is that segment plus its own:
    nothing is copied or encoded again per checkpoint, and a list of ``n`` items is joined only
    when a reader needs its text.

    Args:
        prefix: the segments of the items before these (``None`` for the first items).
        text: the new items' texts joined by ``,`` (empty if there are none).
        count: how many items the list has with this segment.

    Example:
        >>> first = ItemTexts(None, '"a"', 1)
        >>> ItemTexts(first, '"b","c"', 3).json(), ItemTexts(first, '"b","c"', 3).after(1)
        ('["a","b","c"]', '"b","c"')
    """

    __slots__ = ("count", "prefix", "text")

    def __init__(self, prefix: ItemTexts | None, text: str, count: int):
        self.prefix, self.text, self.count = prefix, text, count

    def after(self, start: int) -> str | None:
        """The items from index ``start`` on, their texts joined by ``,``; ``None`` if ``start`` is
        not where a segment begins (the caller then encodes those items itself)."""
        texts: list[str] = []
        segment: ItemTexts | None = self
        while segment is not None and segment.count > start:
            if segment.text:
                texts.append(segment.text)
            segment = segment.prefix
        if (0 if segment is None else segment.count) != start:
            return None
        texts.reverse()
        return ",".join(texts)

    def json(self) -> str:
        """The whole list's canonical JSON."""
        return "[" + (self.after(0) or "") + "]"


Part = str | tuple[str, ...] | ItemTexts
"""The canonical JSON of one value, of each item of a list value, or of a list's segments."""


class PayloadText:
    """The canonical JSON of one payload (``canonical_json(payload)``), in parts.

    Args:
        parts: ``(key, value)`` for every key of the payload in sorted order; ``value`` is the
            canonical JSON of the key's value, or a tuple with that of each item of a list value.

    Example:
        >>> text = PayloadText((("history", ('"a"', '"b"')), ("n", "1")))
        >>> text.json()
        '{"history":["a","b"],"n":1}'
        >>> text.delta_text({"history": ["a"], "n": 1}, {"append": {"history": ["b"]}, "set": {}, "drop": []})
        '{"append":{"history":["b"]},"drop":[],"set":{}}'
    """

    __slots__ = ("_parts",)

    def __init__(self, parts: tuple[tuple[str, Part], ...]):
        self._parts = dict(parts)

    def json(self) -> str:
        """The whole payload's canonical JSON."""
        return "{" + ",".join(_key(k) + ":" + _joined(v) for k, v in self._parts.items()) + "}"

    def delta_text(self, previous: Mapping[str, Any], delta: Mapping[str, Any]) -> str:
        """``canonical_json(delta)`` for a delta from ``previous`` to this payload (the format of
        :mod:`stateflow.checkpoint.delta`), with the appended items' and set values' texts taken
        from the parts instead of encoded again.

        Args:
            previous: the payload the delta starts from (only its lists' lengths are read).
            delta: the delta from ``previous`` to the payload these parts encode.
        """
        appended = []
        for key in sorted(delta["append"]):
            part = self._parts.get(key)
            tail = part.after(len(previous[key])) if type(part) is ItemTexts else None
            if type(part) is tuple:
                items = "[" + ",".join(part[len(previous[key]) :]) + "]"
            elif tail is not None:  # the previous checkpoint ended where a segment begins (the usual case)
                items = "[" + tail + "]"
            else:  # not kept item by item: encode the items
                items = canonical_json(delta["append"][key])
            appended.append(_key(key) + ":" + items)
        changed = []
        for key in sorted(delta["set"]):
            part = self._parts.get(key)
            changed.append(_key(key) + ":" + (canonical_json(delta["set"][key]) if part is None else _joined(part)))
        return (
            '{"append":{'
            + ",".join(appended)
            + '},"drop":'
            + (canonical_json(list(delta["drop"])) if delta["drop"] else "[]")  # a run's keys stay: none dropped
            + ',"set":{'
            + ",".join(changed)
            + "}}"
        )


def _joined(part: Part) -> str:
    if type(part) is str:
        return part
    if type(part) is ItemTexts:
        return part.json()
    return "[" + ",".join(part) + "]"


def _key(key: str) -> str:
    # a payload's keys are ASCII identifiers ("history", "vars"...), whose JSON is the name in quotes
    if type(key) is str and key.isascii() and key.isidentifier():
        return '"' + key + '"'
    return json.dumps(key, ensure_ascii=False)

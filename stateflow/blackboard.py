"""The run's blackboard: typed records that a flow's own components keep during one run.

``Context.vars`` belongs to the user (what they pass to ``run(..., vars=...)``, returned as
``RunResult.vars``). Tools and conditions that need memory of their own (a turn counter, the
episode's reward, an importer's cached decision) keep it in a record class of their own on
``ctx.board`` instead, looked up by the class itself rather than by a string key:

>>> from dataclasses import dataclass
>>> @dataclass
... class Counter:
...     n: int = 0
>>> board = Blackboard()
>>> board.setdefault(Counter).n += 1
>>> board.setdefault(Counter).n, board.get(Counter), board.get(int)
(1, Counter(n=1), None)

The board is fresh for every run and returned as ``RunResult.board``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TypeVar

__all__ = ["Blackboard"]

R = TypeVar("R")


class Blackboard:
    """At most one record per record class, created on first use."""

    def __init__(self) -> None:
        self._records: dict[type, object] = {}

    def get(self, kind: type[R]) -> R | None:
        """The record of class ``kind``, or ``None`` when nothing created one in this run."""
        record = self._records.get(kind)
        return record if record is None or isinstance(record, kind) else None

    def setdefault(self, kind: type[R], factory: Callable[[], R] | None = None) -> R:
        """The record of class ``kind``, created with ``factory()`` (default ``kind()``) if absent.

        Raises:
            TypeError: ``factory`` made something that is not a ``kind``.
        """
        record = self._records.get(kind)
        if record is None:
            record = (factory or kind)()
            if not isinstance(record, kind):
                raise TypeError(f"blackboard: the factory for {kind.__name__} made a {type(record).__name__}")
            self._records[kind] = record
        return record  # type: ignore[return-value]

    def put(self, record: object) -> None:
        """Store ``record`` as the record of its class (replacing an earlier one)."""
        self._records[type(record)] = record

    def __contains__(self, kind: object) -> bool:
        return kind in self._records

    def __iter__(self) -> Iterator[object]:
        return iter(list(self._records.values()))

    def __len__(self) -> int:
        return len(self._records)

    def __repr__(self) -> str:
        return f"Blackboard({', '.join(k.__name__ for k in self._records)})"

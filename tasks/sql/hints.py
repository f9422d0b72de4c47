"""Say where an unknown column really is, under the database's error message.

Why: after re-binding (:mod:`stateflow.tasks.sql.rebind`), a quarter of the 1.5B model's one-shot
answers on the development sample still failed with "Unknown column" (docs/results.md, issue
15): the column exists, but in a table the statement does not read (``SELECT size_code FROM
breeds`` where ``size_code`` is in ``dogs``). MariaDB's message names the column, not where it
is, and the schema listing is many lines up; a repair step fixes the statement more often when
the observation says which tables have the column. Only facts from the schema are added.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping, Sequence

__all__ = ["unknown_column_hint"]

_UNKNOWN_COLUMN = re.compile(r"Unknown column '(?:[^'.]+\.)?([^'.]+)'")


def unknown_column_hint(error: str, columns: Mapping[str, Sequence[str]], *, max_names: int = 3) -> str | None:
    """One sentence on where the column of an "Unknown column" error is, or ``None``.

    Args:
        error: the database's error message.
        columns: each table's columns, as the schema lists them.
        max_names: the most tables (or, when no table has the column, similar names) listed.

    Returns ``None`` when ``error`` is not an unknown-column error or no schema is known.

    >>> unknown_column_hint("Unknown column 'T1.size_code' in 'field list'", {"dogs": ["size_code"], "breeds": []})
    'size_code is a column of: dogs.'
    """
    m = _UNKNOWN_COLUMN.search(error)
    if m is None or not columns:
        return None
    name = m.group(1)
    having = [t for t, cols in columns.items() if name.lower() in {c.lower() for c in cols}]
    if having:
        return f"{name} is a column of: {', '.join(having[:max_names])}."
    qualified = {f"{t}.{c}": c.lower() for t, cols in columns.items() for c in cols}
    close = difflib.get_close_matches(name.lower(), list(set(qualified.values())), n=max_names, cutoff=0.6)
    similar = [q for q, c in qualified.items() if c in close][:max_names]
    if not similar:
        return f"No table has a column {name}."
    return f"No table has a column {name}; similar: {', '.join(similar)}."

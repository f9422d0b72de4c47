"""Which tasks a ``--tasks`` value selects: ``all``, ``A:B``, ``A:``, ``0,4,9`` or a fixed sample.

Kept apart from the runner (which imports AutoGen and every environment) so the command line
can refuse a malformed value at once, before any heavy import: :func:`check_selection`.
"""

from __future__ import annotations

from dataclasses import dataclass

from stateflow.tasks.kit.samples import SAMPLE_NAMES

__all__ = ["TaskSelection", "check_selection", "select_tasks"]


@dataclass(frozen=True)
class TaskSelection:
    """The task indices a ``--tasks`` value selects, each once, in the order given.

    Attributes:
        indices: the distinct indices, first occurrence first.
        duplicates: indices the selection named more than once (each still runs once).
        contexts: each index's task context (database, file system), for the ``context`` order;
            empty when the order does not need them.
    """

    indices: tuple[int, ...]
    duplicates: tuple[int, ...] = ()
    contexts: tuple[str | None, ...] = ()


def select_tasks(selection: str, total: int) -> TaskSelection:
    """Parse ``all``, ``A:B`` (half-open), ``A:`` or ``3,5,9`` into task indices.

    Nothing is clipped: a range reaching past the dataset is an error like an index outside it.
    Repeated indices are run once (and reported in ``duplicates``).

    Raises:
        ValueError: malformed selection, an index or range end outside the dataset (the message
            names the valid range), or a selection of no task.
    """
    s = selection.strip()
    valid = f"the dataset has {total} task(s): valid indices 0..{total - 1}, ranges A:B with B <= {total}"
    if s in ("all", ":"):
        return TaskSelection(tuple(range(total)))
    try:
        if ":" in s:
            a, _, b = s.partition(":")
            lo, hi = int(a or 0), int(b) if b.strip() else total
            if lo < 0 or lo >= total:
                raise IndexError(f"start {lo}")
            if hi > total:
                raise IndexError(f"end {hi}")
            wanted = list(range(lo, hi))
        else:
            items = [x.strip() for x in s.split(",")]
            if "" in items:  # "1,,2" or "1,2,": a lost index, not a separator to skip
                raise ValueError
            wanted = [int(x) for x in items]
            bad = [i for i in wanted if not 0 <= i < total]
            if bad:
                raise IndexError(f"index {bad[0]}")
    except ValueError:
        raise ValueError(
            f"--tasks {selection!r}: use all, A:B or a comma list of indices such as 0,4,9 (no empty items)"
        ) from None
    except IndexError as err:
        raise ValueError(f"--tasks {selection!r}: {err.args[0]} is outside the dataset ({valid})") from None
    if not wanted:
        raise ValueError(f"--tasks {selection!r} selects no task ({valid})")
    seen: dict[int, None] = {}
    duplicates: dict[int, None] = {}
    for i in wanted:
        (duplicates if i in seen else seen)[i] = None
    return TaskSelection(tuple(seen), tuple(duplicates))


def check_selection(selection: str) -> None:
    """Refuse a malformed ``--tasks`` value without knowing the dataset (its size is checked by
    :func:`select_tasks` once the dataset is loaded).

    Raises:
        ValueError: as :func:`select_tasks` words it.

    Example:
        >>> check_selection("0:5"); check_selection("dev")
        >>> check_selection("0-5")
        Traceback (most recent call last):
        ...
        ValueError: --tasks '0-5': use all, A:B or a comma list of indices such as 0,4,9 (no empty items)
    """
    s = selection.strip()
    if s in (*SAMPLE_NAMES, "all", ":"):
        return
    head, colon, tail = s.partition(":")
    try:
        for part in (head, tail) if colon else s.split(","):
            if part.strip() or not colon:  # a range may leave out either end; a list no item
                int(part)
    except ValueError:
        raise ValueError(
            f"--tasks {selection!r}: use all, A:B or a comma list of indices such as 0,4,9 (no empty items)"
        ) from None

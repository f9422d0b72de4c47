"""The order a run's episodes start in (``stateflow run --order``, ``stateflow bench --order``).

Three orders over the same ``(method, task)`` episodes, each episode exactly once:

* ``method``: every task of the first method, then the next method;
* ``task``: every method on the first task, then the next task (a run stopped part-way leaves
  all methods on the same tasks, comparable row by row);
* ``context``: tasks grouped by their context (SQL: the database, Bash: the file system), the
  groups in the order their first task was selected; inside a group each method runs the
  group's tasks in turn.

Why ``context``: an embedded model spends most of an episode evaluating its prompt, and its
server keeps a prompt cache keyed by token prefixes. Episodes on one database share the system
message and the schema listing (when the flow lists it before the question), so running them
back to back reuses that prefix instead of evaluating it again; in index order the Spider dev
set changes database every few tasks and the shared prefix is evicted between uses. Methods stay
inside a group because two methods' prompts differ from their first tokens: one method's
episodes keep its own prefix warm, and a run stopped part-way still has every method on the
same finished groups.

The order is a pure function of the selection and the tasks' contexts, so a resumed run (the
same command again) runs its remaining episodes in the order the first run would have.

>>> episode_order(("a", "b"), [(0, "x"), (1, "y"), (2, "x")], "context")
[('a', 0), ('a', 2), ('b', 0), ('b', 2), ('a', 1), ('b', 1)]
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal, get_args

__all__ = ["RUN_ORDERS", "RunOrder", "episode_order"]

RunOrder = Literal["method", "task", "context"]
"""The order episodes run in (see the module docstring)."""

#: every :data:`RunOrder`, in the order help texts list them
RUN_ORDERS: tuple[str, ...] = get_args(RunOrder)


def episode_order(
    methods: Sequence[str], tasks: Sequence[tuple[int, str | None]], order: RunOrder
) -> list[tuple[str, int]]:
    """Every ``(method, task index)`` pair once, in ``order``.

    Args:
        methods: the run's methods (distinct), in the order given.
        tasks: ``(index, context)`` of each selected task (distinct indices), in selection order;
            a task without a context (``None``) forms a group of its own kind with the others
            that have none.
        order: ``method``, ``task`` or ``context``.

    Raises:
        ValueError: an unknown order, or a task index selected twice.
    """
    if order not in RUN_ORDERS:
        raise ValueError(f"order {order!r} is not one of {', '.join(RUN_ORDERS)}")
    indices = [i for i, _ in tasks]
    if len(set(indices)) != len(indices):
        raise ValueError("episode_order: a task index is selected twice (select_tasks removes repeats)")
    if order == "method":
        return [(m, i) for m in methods for i in indices]
    if order == "task":
        return [(m, i) for i in indices for m in methods]
    groups: dict[str | None, list[int]] = {}
    for i, context in tasks:
        groups.setdefault(context, []).append(i)
    return [(m, i) for members in groups.values() for m in methods for i in members]

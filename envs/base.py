"""The environment contract shared by every InterCode backend.

An environment follows InterCode's gym-style API (the old 4-tuple):

* ``reset(index) -> (observation, info)`` loads task ``index`` and clears episode state;
* ``step(action) -> (observation, reward, done, info)`` executes one action;
  ``"submit"`` scores the last observation and ends the episode, ``"skip"`` ends it with 0.

Every action string comes from an LLM and is treated as hostile: backends execute it with
the least privilege that still reproduces upstream's observations.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

__all__ = ["Environment", "EnvironmentError_", "Task"]


@dataclass(frozen=True)
class Task:
    """One benchmark task.

    Attributes:
        index: position of the task in its dataset (stable across runs; the resume key).
        query: the natural-language request shown to the agent.
        gold: the reference command (SQL query or shell command) used only for scoring.
        context: where the task runs (SQL: database name; Bash: file-system id such as ``fs_1``).
        hardness: optional difficulty label (Spider: easy / medium / hard / extra).
        extra: any further fields of the source record (e.g. ``db_tables``), kept verbatim.
    """

    index: int
    query: str
    gold: str
    context: str
    hardness: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)


class EnvironmentError_(RuntimeError):
    """An environment could not be started or used (server missing, sandbox unavailable...).

    The message names the problem and the way out (another backend, a set-up command).
    The trailing underscore avoids shadowing the builtin ``EnvironmentError`` alias of OSError.
    """


@runtime_checkable
class Environment(Protocol):
    """What runners and task flows rely on. Both SQL and Bash backends implement it."""

    name: str  # "intercode-sql" or "intercode-bash"

    def __len__(self) -> int:
        """Number of tasks in the loaded dataset."""
        ...

    def task(self, index: int) -> Task:
        """The task at ``index`` (no side effects)."""
        ...

    def reset(self, index: int) -> tuple[Any, dict[str, Any]]:
        """Start an episode on task ``index``; returns ``(observation, info)`` like upstream."""
        ...

    def step(self, action: str) -> tuple[Any, float, bool, dict[str, Any]]:
        """Execute ``action``; returns ``(observation, reward, done, info)`` like upstream."""
        ...

    def close(self) -> None:
        """Release every resource (servers, sandboxes, temp dirs). Idempotent."""
        ...

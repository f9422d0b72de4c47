"""An in-memory environment for runner tests that need no MariaDB or sandbox.

It implements the :class:`stateflow.envs.base.Environment` protocol: ``execute`` actions echo the command,
``submit`` scores the task with a reward chosen per task (so tests can plant negative rewards),
and ``delay_s`` slows every step down (to interrupt a run in the middle).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from stateflow.envs.base import Task


@dataclass
class FakeEnv:
    """``n`` tasks ``task-<i>`` whose gold is ``echo <i>``; ``rewards[i]`` is paid on submit (default 1)."""

    n: int = 5
    rewards: Mapping[int, float] = field(default_factory=dict)
    delay_s: float = 0.0
    name: str = "intercode-bash"
    queries: Mapping[int, str] = field(default_factory=dict)
    closed: bool = False
    _index: int = -1

    def __len__(self) -> int:
        return self.n

    def task(self, index: int) -> Task:
        if not 0 <= index < self.n:
            raise IndexError(index)
        return Task(index, self.queries.get(index, f"task-{index}"), f"echo {index}", "fs_fake")

    def reset(self, index: int) -> tuple[Any, dict[str, Any]]:
        self._index = index
        return self.task(index).query, {}

    def step(self, action: str) -> tuple[Any, float, bool, dict[str, Any]]:
        time.sleep(self.delay_s)
        if action.strip() == "submit":
            return "submitted", float(self.rewards.get(self._index, 1.0)), True, {"action_executed": True}
        return f"ran: {action}", 0.0, False, {"action_executed": True}

    def close(self) -> None:
        self.closed = True

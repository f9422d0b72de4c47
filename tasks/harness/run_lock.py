"""One writer per results directory: an exclusive lock held while a run appends records.

Two runs appending to the same ``results.jsonl`` would each decide which episodes are missing
from what they read at start, run the same episodes and record them twice (and share a
``run.json``). :class:`RunLock` makes the second run fail at once with a message naming the
directory and the process that holds it. The lock is an ``fcntl.flock`` on ``DIR/.lock``: the
kernel releases it when the holder exits, even when it is killed, so a crashed run never leaves
a stale lock behind. The file itself stays (unlinking a lock file races with a process opening it).
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path
from types import TracebackType

from stateflow.errors import ConfigError

__all__ = ["LOCK_NAME", "RunInProgressError", "RunLock"]

LOCK_NAME = ".lock"


class RunInProgressError(ConfigError):
    """Another process is running into the same results directory."""

    def __init__(self, directory: Path, holder: str):
        self.directory, self.holder = directory, holder
        who = f"process {holder}" if holder else "another process"
        super().__init__(
            f"{directory} is being written by {who}: wait for that run to finish (or stop it), "
            "or give this run another --out"
        )


class RunLock:
    """Hold the exclusive lock of ``directory`` (which must exist) until :meth:`release`.

    Raises:
        RunInProgressError: (at construction) another process holds it.
    """

    def __init__(self, directory: Path):
        self.path = directory / LOCK_NAME
        self._fd: int | None = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(self._fd, 32, 0).decode(errors="replace").strip()
            os.close(self._fd)
            self._fd = None
            raise RunInProgressError(directory, holder) from None
        os.ftruncate(self._fd, 0)
        os.pwrite(self._fd, str(os.getpid()).encode(), 0)

    def release(self) -> None:
        """Let the next run in. Idempotent."""
        if self._fd is not None:
            os.close(self._fd)  # closing the descriptor drops the flock
            self._fd = None

    def __enter__(self) -> RunLock:
        return self

    def __exit__(self, *exc: type[BaseException] | BaseException | TracebackType | None) -> None:
        self.release()

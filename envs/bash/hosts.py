"""Execution hosts: where the environment runs commands (one for the agent, one for the gold).

:class:`ExecutionHost` is what :class:`stateflow.envs.bash.env.BashEnv` needs; :class:`SandboxHost`
implements it with a bubblewrap :class:`~stateflow.envs.bash.sandbox.Sandbox` per host, the Docker backend
(:mod:`stateflow.envs.bash.docker_backend`) with a container.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from stateflow.envs.base import EnvironmentError_
from stateflow.envs.bash.layers import FsSource, LayerStore
from stateflow.envs.bash.rootfs import HOSTNAME, BaseRoot
from stateflow.envs.bash.sandbox import CommandResult, Sandbox, SandboxLimits

__all__ = ["ExecutionHost", "SandboxHost"]


class ExecutionHost(Protocol):
    """A resettable machine that runs argv lists."""

    def reset(self, fs_id: str) -> None:
        """Restore the pristine state of file system ``fs_id`` (switching to it if needed)."""
        ...

    def run(self, argv: Sequence[str], *, cwd: str = "/", timeout: float | None = None) -> CommandResult:
        """Run ``argv`` (no shell added) with working directory ``cwd``; stdout+stderr merged."""
        ...

    def close(self) -> None:
        """Release everything. Idempotent."""
        ...


class SandboxHost:
    """An :class:`ExecutionHost` backed by one bubblewrap sandbox, created on first reset."""

    def __init__(
        self, base: BaseRoot, layers: LayerStore, sources: dict[str, FsSource], limits: SandboxLimits | None = None
    ) -> None:
        self._base = base
        self._layers = layers
        self._sources = sources
        self._limits = limits
        self._box: Sandbox | None = None

    def _lowers(self, fs_id: str) -> list:
        try:
            source = self._sources[fs_id]
        except KeyError:
            raise EnvironmentError_(f"no source for file system {fs_id!r} (known: {sorted(self._sources)})") from None
        return [self._layers.layer(source), self._base.path]

    def reset(self, fs_id: str) -> None:
        lowers = self._lowers(fs_id)
        if self._box is None:
            self._box = Sandbox(lowers, limits=self._limits, hostname=HOSTNAME)
        else:
            self._box.reset(lowers)

    def run(self, argv: Sequence[str], *, cwd: str = "/", timeout: float | None = None) -> CommandResult:
        if self._box is None:
            raise EnvironmentError_("reset() the host before running commands")
        return self._box.run(argv, cwd=cwd, timeout=timeout)

    def close(self) -> None:
        if self._box is not None:
            self._box.close()
            self._box = None

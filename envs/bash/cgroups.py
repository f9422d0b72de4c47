"""Per-sandbox control groups: a pids cap, a memory cap, and a reliable "kill everything".

As real root, ``RLIMIT_NPROC`` is not enforced (the kernel exempts uid 0), so a fork bomb is
only stopped by a pids cgroup; the memory cgroup also charges the sandbox's tmpfs pages. Both
cgroup v1 (one hierarchy per controller) and v2 (unified) are handled. Without a writable
hierarchy (non-root) the caller falls back to rlimits and :meth:`SandboxCgroup.create`
returns ``None``.

Groups are named ``stateflow-bash-<pid>-<random>``; :func:`sweep_stale_cgroups` removes those
left by processes that died without cleaning up (e.g. ``kill -9`` of a test run).
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import signal
import time
from pathlib import Path

__all__ = ["CGROUP_ROOT", "SandboxCgroup", "sweep_stale_cgroups"]

CGROUP_ROOT = Path("/sys/fs/cgroup")
_PREFIX = "stateflow-bash-"
_NAME_RE = re.compile(rf"^{_PREFIX}(\d+)-[0-9a-f]+$")


def _v1_dirs() -> list[Path]:
    return [CGROUP_ROOT / c for c in ("pids", "memory") if (CGROUP_ROOT / c / "cgroup.procs").exists()]


def _is_v2() -> bool:
    return (CGROUP_ROOT / "cgroup.controllers").exists()


def _read_pids(group: Path) -> list[int]:
    try:
        return [int(x) for x in (group / "cgroup.procs").read_text().split()]
    except OSError:
        return []


def _kill_and_remove(groups: list[Path]) -> None:
    for group in groups:
        _kill_all(group)
    for group in groups:
        with contextlib.suppress(OSError):
            group.rmdir()


def _kill_all(group: Path, *, rounds: int = 200, keep: frozenset[int] = frozenset()) -> bool:
    """SIGKILL every process in ``group`` but ``keep`` until none is left; True when done."""
    kill_file = group / "cgroup.kill"  # v2 only, atomic (kills everything, so only without keep)
    for _ in range(rounds):
        pids = [p for p in _read_pids(group) if p not in keep]
        if not pids:
            return True
        if kill_file.exists() and not keep:
            with contextlib.suppress(OSError):
                kill_file.write_text("1")
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.005)
    return not [p for p in _read_pids(group) if p not in keep]


class SandboxCgroup:
    """One cgroup (per controller hierarchy) that a sandbox's commands join."""

    def __init__(self, groups: list[Path]) -> None:
        self.groups = groups

    @classmethod
    def create(cls, *, pids_max: int, memory_bytes: int) -> SandboxCgroup | None:
        """Create the group with its caps, or return None if cgroups are not writable here."""
        name = f"{_PREFIX}{os.getpid()}-{secrets.token_hex(4)}"
        made: list[Path] = []
        try:
            if _is_v2():
                parent = CGROUP_ROOT
                with contextlib.suppress(OSError):
                    (parent / "cgroup.subtree_control").write_text("+pids +memory")
                group = parent / name
                group.mkdir()
                made.append(group)
                (group / "pids.max").write_text(str(pids_max))
                (group / "memory.max").write_text(str(memory_bytes))
                if (group / "memory.swap.max").exists():
                    (group / "memory.swap.max").write_text("0")
            else:
                dirs = _v1_dirs()
                if len(dirs) < 2:
                    return None
                for hierarchy in dirs:
                    group = hierarchy / name
                    group.mkdir()
                    made.append(group)
                (CGROUP_ROOT / "pids" / name / "pids.max").write_text(str(pids_max))
                mem = CGROUP_ROOT / "memory" / name
                (mem / "memory.limit_in_bytes").write_text(str(memory_bytes))
                if (mem / "memory.memsw.limit_in_bytes").exists():
                    # Swap accounting may be disabled: the RAM cap still holds then.
                    with contextlib.suppress(OSError):
                        (mem / "memory.memsw.limit_in_bytes").write_text(str(memory_bytes))
        except OSError:
            _kill_and_remove(made)
            return None
        return cls(made)

    def procs_files(self) -> list[str]:
        """The ``cgroup.procs`` paths a process writes its pid into to join."""
        return [str(g / "cgroup.procs") for g in self.groups]

    def kill_all(self, keep: set[int] | frozenset[int] = frozenset()) -> bool:
        """Kill every process of the group except ``keep``; True when no other is left."""
        return all(_kill_all(g, keep=frozenset(keep)) for g in self.groups)

    def remove(self) -> None:
        """Kill what is left and delete the group. Idempotent."""
        _kill_and_remove(self.groups)
        self.groups = []


def sweep_stale_cgroups() -> int:
    """Remove groups whose creating process is gone; returns how many were removed."""
    removed = 0
    roots = [CGROUP_ROOT] if _is_v2() else _v1_dirs()
    for hierarchy in roots:
        try:
            entries = list(hierarchy.iterdir())
        except OSError:
            continue
        for entry in entries:
            match = _NAME_RE.match(entry.name)
            if match and not Path(f"/proc/{match.group(1)}").exists():
                _kill_and_remove([entry])
                removed += 1
    return removed

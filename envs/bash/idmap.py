"""Sandbox root as an unprivileged host uid when StateFlow runs as root (the id mapping).

As root, every sandboxed command runs as host uid :data:`SANDBOX_ID_BASE` (and gid the same):
the spawner switches to it before starting ``bwrap``, whose user namespace then maps sandbox
uid 0 to that host uid, exactly as in the non-root mode with the invoking user. Files the
sandbox can see must therefore be owned by the mapped range: sandbox uid ``u`` is host uid
``SANDBOX_ID_BASE + u`` (for ``u`` below :data:`SANDBOX_ID_COUNT`; nothing else exists inside).

The layers are made so once, like Docker's ``userns-remap``: a copy of the base root whose
owners are shifted by the base (:func:`shift_ownership`, cached next to the original, keyed by
the mapping), and task layers shifted after unpacking. The overlay itself is still mounted by
host root in the keeper's private mount namespace (a user-namespace mount would need the lower
paths to be reachable by the mapped uid, and ``/root/.cache`` is not); the overlay checks the
caller's permissions on its own inodes and creates files with the caller's ids, so the upper
layer holds files owned by the mapped uid.

Why not an idmapped mount instead of a copy: on Linux 6.18 an idmapped mount of the overlay is
refused (``mount_setattr``: EINVAL), and an overlay mounted by host root over an idmapped upper
layer cannot create its work directory (EOVERFLOW) and turns itself read-only.

The range 0x70000000 + 65536 lies in the block systemd documents as unused (above the
``systemd-nspawn`` container range, below 2^31) and, by default, far from ``/etc/subuid``
ranges (which start at 100000): :func:`check_range_free` refuses to run if a local account or a
subordinate-id range overlaps it, since whoever owns those ids could modify the cached layers.
"""

from __future__ import annotations

import os
import stat
import subprocess
from dataclasses import dataclass
from pathlib import Path

from stateflow.envs.base import EnvironmentError_

__all__ = [
    "SANDBOX_ID_BASE",
    "SANDBOX_ID_COUNT",
    "IdMapping",
    "MappingChoice",
    "check_range_free",
    "choose_id_mapping",
    "sandbox_id_mapping",
    "shift_ownership",
]

SANDBOX_ID_BASE = 0x7000_0000
SANDBOX_ID_COUNT = 65_536
_HOST_PATH = "/usr/sbin:/usr/bin:/sbin:/bin"


@dataclass(frozen=True)
class IdMapping:
    """Sandbox ids ``0 .. count-1`` are host ids ``host_base .. host_base+count-1`` (uids and gids).

    Attributes:
        host_base: host id of sandbox root.
        count: number of mapped ids.
    """

    host_base: int
    count: int

    @property
    def key(self) -> str:
        """Cache-key part naming this mapping (layers shifted for one mapping are not for another)."""
        return f"ids{self.host_base}+{self.count}"

    def host_id(self, inside: int) -> int:
        """Host id of sandbox id ``inside``.

        Raises:
            ValueError: ``inside`` is outside the mapped range.
        """
        if not 0 <= inside < self.count:
            raise ValueError(f"id {inside} is outside the sandbox's mapped range 0..{self.count - 1}")
        return self.host_base + inside


@dataclass(frozen=True)
class MappingChoice:
    """Whether sandboxes map their root to an unprivileged host uid here, and why (or why not).

    Attributes:
        mapping: the mapping in force, or None (non-root run, or the fallback to host root).
        reason: one phrase for :class:`stateflow.envs.bash.sandbox.Protection` and the CLI.
    """

    mapping: IdMapping | None
    reason: str


def choose_id_mapping() -> MappingChoice:
    """Decide the mapping for this process (a probe of ~2 ms as root; nothing as non-root).

    No mapping for non-root runs (sandbox root is then the invoking user) and for root runs
    where the mapped uid cannot create a user namespace (``user.max_user_namespaces`` = 0, an
    AppArmor/SELinux restriction): the sandbox then falls back to host uid 0 with dropped
    capabilities, and the reason says so.

    Raises:
        EnvironmentError_: as root, a local account or subordinate-id range overlaps the mapping.
    """
    if os.geteuid() != 0:
        return MappingChoice(None, "the invoking user (non-root run)")
    mapping = IdMapping(SANDBOX_ID_BASE, SANDBOX_ID_COUNT)
    check_range_free(mapping)
    probe = subprocess.run(
        ["unshare", "--user", "true"],
        user=mapping.host_base,
        group=mapping.host_base,
        extra_groups=[],
        capture_output=True,
        env={"PATH": _HOST_PATH},
        check=False,
    )
    end = mapping.host_base + mapping.count - 1
    if probe.returncode == 0:
        return MappingChoice(mapping, f"mapped ids {mapping.host_base}..{end}, which own the sandbox's layers")
    error = probe.stderr.decode(errors="replace").strip() or f"exit {probe.returncode}"
    return MappingChoice(None, f"host root: uid {mapping.host_base} cannot create a user namespace ({error})")


def sandbox_id_mapping() -> IdMapping | None:
    """The mapping sandboxes use here, or None (:func:`choose_id_mapping`)."""
    return choose_id_mapping().mapping


def _ranges(path: Path, *, subordinate: bool) -> list[tuple[str, int, int]]:
    """``(name, first, count)`` of each entry of a passwd/group (one id) or subuid/subgid file."""
    try:
        text = path.read_text(errors="replace")
    except FileNotFoundError:
        return []
    out = []
    for line in text.splitlines():
        fields = line.split(":")
        try:
            if subordinate and len(fields) >= 3:
                out.append((fields[0], int(fields[1]), int(fields[2])))
            elif not subordinate and len(fields) >= 3:
                out.append((fields[0], int(fields[2]), 1))
        except ValueError:
            continue  # comments and malformed lines name no id
    return out


def check_range_free(mapping: IdMapping, etc: Path = Path("/etc")) -> None:
    """Refuse a mapping whose host ids belong to someone (an account or a subordinate range).

    Raises:
        EnvironmentError_: naming the file, the entry and its ids.
    """
    end = mapping.host_base + mapping.count
    for name, subordinate in (("passwd", False), ("group", False), ("subuid", True), ("subgid", True)):
        for owner, first, count in _ranges(etc / name, subordinate=subordinate):
            if first < end and mapping.host_base < first + count:
                raise EnvironmentError_(
                    f"{etc / name}: {owner!r} owns ids {first}..{first + count - 1}, which overlap the bash "
                    f"sandbox's host ids {mapping.host_base}..{end - 1} (stateflow.envs.bash.idmap.SANDBOX_ID_BASE); "
                    "whoever owns them could change the sandbox's cached layers. Move that entry."
                )


def shift_ownership(tree: Path, mapping: IdMapping) -> int:
    """Give every entry of ``tree`` (itself included) its owner and group shifted into the mapping.

    Hard links are shifted once. ``chown`` clears set-user/group-ID bits, so they are restored;
    file capabilities (``security.capability``) are dropped by the kernel and not restored
    (the sandbox's root has its capabilities anyway, and ``no_new_privs`` stops file ones).
    Returns the number of inodes changed.

    Raises:
        EnvironmentError_: an entry has an owner or group outside ``0 .. count-1``.
    """
    seen: set[tuple[int, int]] = set()
    for dirpath, dirnames, filenames in os.walk(tree):
        for path in [dirpath, *(os.path.join(dirpath, name) for name in dirnames + filenames)]:
            st = os.lstat(path)
            if (st.st_dev, st.st_ino) in seen:
                continue
            seen.add((st.st_dev, st.st_ino))
            if st.st_uid >= mapping.count or st.st_gid >= mapping.count:
                raise EnvironmentError_(
                    f"{path} is owned by {st.st_uid}:{st.st_gid}, outside the sandbox's id range 0..{mapping.count - 1}"
                )
            os.lchown(path, mapping.host_id(st.st_uid), mapping.host_id(st.st_gid))
            if not stat.S_ISLNK(st.st_mode) and st.st_mode & (stat.S_ISUID | stat.S_ISGID):
                os.chmod(path, stat.S_IMODE(st.st_mode))
    return len(seen)

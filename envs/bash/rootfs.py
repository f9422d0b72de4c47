"""The read-only base root every bash sandbox runs on.

Choice: a Debian root built once with ``mmdebstrap`` and cached under
``~/.cache/stateflow/bash-root/<key>/rootfs`` (``key`` = hash of the package list, the suite and
the customisation below), not the host's ``/usr`` mounted read-only. Reasons:

* isolation: the sandbox sees no host file at all (no host ``/etc``, no host home, no project
  checkout), so "reading host files" has nothing to find and nothing host-specific leaks into
  observations;
* fidelity: like upstream's image it is a plain distribution root with exactly the tools the
  tasks use (and, like upstream, *without* ``md5deep``, which the reward's directory quirk
  relies on), independent of what happens to be installed on the host;
* reproducibility: the same package list gives the same tools on every machine; the cache key
  changes when the list does, so a stale root is never reused.

Cost: one build of ~1-1.5 min and ~300 MB on a fresh machine (``scripts/setup_bash.sh`` runs
it; as root or, via ``mmdebstrap --mode=unshare``, as a user with user namespaces). Every later
use is a directory lookup.

Run ``python -m stateflow.envs.bash --build-root`` to build (``--print-root`` shows the path).

As root, sandboxes run as an unprivileged host uid (:mod:`stateflow.envs.bash.idmap`), so
:func:`locate_base_root` returns a copy of the root whose owners are shifted into that range,
made once (~5 s, ~300 MB) next to the original, keyed by the original's key and the mapping.
:func:`build_base_root` (and the Docker backend, which imports it) keeps the original.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from stateflow.envs.base import EnvironmentError_
from stateflow.envs.bash.idmap import IdMapping, sandbox_id_mapping, shift_ownership

from stateflow.paths import cache_dir

__all__ = [
    "ROOT_PACKAGES",
    "BaseRoot",
    "build_base_root",
    "cache_home",
    "locate_base_root",
]

# The tools the NL2Bash tasks use (the upstream image's list) plus the few that moved package
# in Debian 12 (``cal`` lives in ncal, ``w``/``ps`` in procps).
ROOT_PACKAGES: tuple[str, ...] = (
    "bash",
    "bsdmainutils",
    "bsdextrautils",
    "coreutils",
    "cpio",
    "curl",
    "dnsutils",
    "findutils",
    "git",
    "imagemagick",
    "iputils-ping",
    "jq",
    "ncal",
    "net-tools",
    "procps",
    "psmisc",
    "python3",
    "tree",
)
SUITE = "bookworm"
DEFAULT_MIRROR = "http://deb.debian.org/debian"
HOSTNAME = "sandbox"

# Written into the root after installation: a fixed identity instead of the build host's
# (mmdebstrap copies the host's /etc/hostname and /etc/resolv.conf), and no documentation.
_CUSTOMIZE = (
    f'echo {HOSTNAME} > "$1/etc/hostname"',
    f'printf "127.0.0.1\\tlocalhost\\n::1\\tlocalhost ip6-localhost ip6-loopback\\n127.0.1.1\\t{HOSTNAME}\\n"'
    ' > "$1/etc/hosts"',
    ': > "$1/etc/resolv.conf"',
    'rm -rf "$1/var/cache/apt/archives"/*.deb "$1/var/lib/apt/lists"/* "$1/usr/share/doc" "$1/usr/share/man"',
)
_FORMAT = 1  # bump when the build recipe changes in a way the other inputs do not show


def cache_home() -> Path:
    """StateFlow's cache directory (:func:`stateflow.paths.cache_dir`)."""
    return cache_dir()


def _key() -> str:
    blob = json.dumps([_FORMAT, SUITE, sorted(ROOT_PACKAGES), list(_CUSTOMIZE)]).encode()
    return hashlib.sha256(blob).hexdigest()[:16]


class BaseRoot:
    """A built base root: ``path`` is the root directory, ``key`` its cache key."""

    def __init__(self, path: Path, key: str) -> None:
        self.path = path
        self.key = key

    def __repr__(self) -> str:
        return f"BaseRoot({str(self.path)!r})"


def _root_dir(key: str) -> Path:
    return cache_home() / "bash-root" / key


def locate_base_root(explicit: str | os.PathLike[str] | None = None) -> BaseRoot:
    """Return the base root sandboxes run on here (``explicit`` / ``$STATEFLOW_BASH_ROOT`` if given).

    When sandboxes map their root to an unprivileged host uid (root runs, see
    :func:`~stateflow.envs.bash.idmap.sandbox_id_mapping`) this is the ownership-shifted copy of
    the root, made on first use.

    Raises:
        EnvironmentError_: no usable root; the message names the set-up command.
    """
    root = _locate_original(explicit)
    mapping = sandbox_id_mapping()
    return root if mapping is None else _shifted(root, mapping)


def _locate_original(explicit: str | os.PathLike[str] | None) -> BaseRoot:
    chosen = explicit or os.environ.get("STATEFLOW_BASH_ROOT")
    if chosen:
        path = Path(chosen).expanduser().resolve()
        if not (path / "bin" / "bash").exists():
            raise EnvironmentError_(f"bash base root {path} has no bin/bash; build one with scripts/setup_bash.sh")
        return BaseRoot(path, hashlib.sha256(str(path).encode()).hexdigest()[:16])
    key = _key()
    root = _root_dir(key)
    if not (root / "ready").exists():
        raise EnvironmentError_(
            f"the bash sandbox base root is not built (expected {root}/rootfs). "
            "Run scripts/setup_bash.sh (or `python -m stateflow.envs.bash --build-root`), "
            "or use backend='docker' where a Docker engine is available."
        )
    return BaseRoot(root / "rootfs", key)


def _shifted(root: BaseRoot, mapping: IdMapping) -> BaseRoot:
    """The copy of ``root`` owned by the mapped id range, made once (staging dir, then rename)."""
    key = f"{root.key}-{mapping.key}"
    final = _root_dir(key)
    if (final / "ready").exists():
        return BaseRoot(final / "rootfs", key)
    final.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{key}-", dir=final.parent))
    try:
        copy = subprocess.run(
            ["cp", "-a", "--", str(root.path), str(staging / "rootfs")], capture_output=True, check=False
        )
        if copy.returncode != 0:
            raise EnvironmentError_(
                f"copying the bash base root {root.path} for the sandbox's id mapping failed: "
                + copy.stderr.decode(errors="replace")[-1000:]
            )
        shift_ownership(staging / "rootfs", mapping)
        (staging / "ready").write_text(json.dumps({"original": str(root.path), "mapping": mapping.key}) + "\n")
        try:
            staging.rename(final)
        except OSError:  # a concurrent process finished first: keep theirs
            shutil.rmtree(staging, ignore_errors=True)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return BaseRoot(final / "rootfs", key)


def build_base_root(*, mirror: str | None = None, quiet: bool = False) -> BaseRoot:
    """Build the base root with mmdebstrap unless the cache already has it; return it.

    Raises:
        EnvironmentError_: mmdebstrap missing or failing (its output is included).
    """
    key = _key()
    final = _root_dir(key)
    if (final / "ready").exists():
        return BaseRoot(final / "rootfs", key)
    if shutil.which("mmdebstrap") is None:
        raise EnvironmentError_("mmdebstrap is not installed; run scripts/setup_bash.sh (apt-get install mmdebstrap)")
    final.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{key}-", dir=final.parent))
    rootless = os.geteuid() != 0
    # Non-root: mmdebstrap (unshare mode, needs /etc/subuid ranges) writes a tarball that we
    # unpack as the user, so every file is owned by the user, who is root inside the sandbox's
    # user namespace (ownership is flattened; the tasks never depend on it).
    target = staging / ("rootfs.tar" if rootless else "rootfs")
    cmd = [
        "mmdebstrap",
        "--variant=apt",
        "--include=" + ",".join(ROOT_PACKAGES),
        "--dpkgopt=path-exclude=/usr/share/doc/*",
        "--dpkgopt=path-exclude=/usr/share/man/*",
        "--dpkgopt=path-exclude=/usr/share/locale/*",
        "--dpkgopt=force-unsafe-io",  # no fsync per file: a throw-away build, ~2x faster on slow disks
        *(f"--customize-hook={hook}" for hook in _CUSTOMIZE),
        *(["--mode=unshare", "--format=tar"] if rootless else []),
        SUITE,
        str(target),
        mirror or os.environ.get("STATEFLOW_DEBIAN_MIRROR") or DEFAULT_MIRROR,
    ]
    # Progress goes to stderr so callers can capture the printed path from stdout.
    proc = subprocess.run(
        cmd, stdout=subprocess.PIPE if quiet else sys.stderr, stderr=subprocess.STDOUT if quiet else None, check=False
    )
    if proc.returncode == 0 and rootless:
        (staging / "rootfs").mkdir()
        proc = subprocess.run(
            ["tar", "-x", "-p", "-f", str(target), "-C", str(staging / "rootfs"), "--exclude=./dev/*"],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            check=False,
        )
        target.unlink(missing_ok=True)
    if proc.returncode != 0:
        shutil.rmtree(staging, ignore_errors=True)
        tail = proc.stdout.decode(errors="replace")[-2000:] if proc.stdout else ""
        raise EnvironmentError_(
            f"building the bash base root failed (exit {proc.returncode}){' as non-root' if rootless else ''}. "
            f"{tail} Non-root builds need subordinate ids for your user in /etc/subuid and /etc/subgid."
        )
    (staging / "ready").write_text(json.dumps({"packages": sorted(ROOT_PACKAGES), "suite": SUITE}) + "\n")
    try:
        staging.rename(final)
    except OSError:  # another process finished first: keep theirs
        shutil.rmtree(staging, ignore_errors=True)
    return BaseRoot(final / "rootfs", key)

"""The Docker engine as the SQL and bash Docker backends use it: connection, images, cleanup.

* :func:`connect_engine`: a docker SDK client with a reachable engine; connecting also sweeps
  what dead processes left behind (see below).
* Images are built locally, never pulled: :func:`ensure_base_image` imports the project's
  Debian root (the bash sandbox's mmdebstrap root, :mod:`stateflow.envs.bash.rootfs`) as
  ``stateflow-base:<root key>``; :func:`ensure_image` builds a Dockerfile on top of it and tags
  the result with a hash of the Dockerfile, its context files and build arguments, so an
  unchanged image is a lookup and a changed input gives a new tag.
* :class:`DockerSession`: the containers and host directories of one environment. Everything
  it creates carries the labels ``org.stateflow.owner`` (host, pid and start time of the
  creating process) and ``org.stateflow.session``. ``close`` removes them; if the process dies
  without closing (``kill -9``), a small reaper process (started per session, watching a pipe
  from its parent) removes them, and the next :func:`connect_engine` on this host sweeps
  anything whose owner process is gone.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import io
import os
import secrets
import shutil
import socket
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from stateflow.envs.base import EnvironmentError_

from stateflow.paths import cache_dir

__all__ = [
    "OWNER_LABEL",
    "SESSION_LABEL",
    "DockerSession",
    "connect_engine",
    "ensure_base_image",
    "ensure_image",
    "owner_id",
    "sweep_stale",
]

OWNER_LABEL = "org.stateflow.owner"
SESSION_LABEL = "org.stateflow.session"
IMAGE_LABEL = "org.stateflow.image"
BASE_REPO = "stateflow-base"
_RUN_PREFIX = "sf-docker-"
_CLOSED = b"closed"  # what a session writes to its reaper when it cleaned up itself
_SETUP_HINT = "run scripts/setup_docker.sh (installs and starts a Docker engine)"


def _start_time(pid: int) -> str | None:
    """The kernel start time of ``pid`` (field 22 of /proc/pid/stat), or None if it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()[19]


def owner_id(pid: int | None = None) -> str:
    """``host/pid/start-time`` of a process: unique on this host even after pid reuse."""
    pid = os.getpid() if pid is None else pid
    return f"{socket.gethostname()}/{pid}/{_start_time(pid)}"


def _owner_alive(owner: str) -> bool:
    """Whether the process named by ``owner`` still runs; owners on other hosts count as alive."""
    try:
        host, pid, start = owner.split("/")
    except ValueError:
        return False  # not ours to understand: a malformed label is stale
    if host != socket.gethostname():
        return True
    return pid.isdigit() and _start_time(int(pid)) == start


def _run_root() -> Path:
    return Path(tempfile.gettempdir())


def sweep_stale(client: Any) -> list[str]:
    """Remove containers, networks, volumes and run directories of dead owner processes.

    Returns:
        The names of what was removed (for logs and tests).
    """
    removed: list[str] = []
    flt = {"label": OWNER_LABEL}
    # the low-level listing is one call; the high-level one inspects each container and fails
    # when another process removes one meanwhile
    for container in client.api.containers(all=True, filters=flt):
        if not _owner_alive((container.get("Labels") or {}).get(OWNER_LABEL, "")):
            with contextlib.suppress(Exception):  # removed concurrently by its reaper
                client.api.remove_container(container["Id"], force=True)
                removed.append(container["Names"][0].lstrip("/"))
    for collection in (client.networks, client.volumes):
        for item in collection.list(filters=flt):
            labels = item.attrs.get("Labels") or {}
            if not _owner_alive(labels.get(OWNER_LABEL, "")):
                with contextlib.suppress(Exception):
                    item.remove()
                    removed.append(item.name)
    for path in _run_root().glob(f"{_RUN_PREFIX}*"):
        owner_file = path / "owner"
        try:
            owner = owner_file.read_text().strip()
        except OSError:
            continue  # being created, or not ours
        if not _owner_alive(owner):
            shutil.rmtree(path, ignore_errors=True)
            removed.append(str(path))
    return removed


def connect_engine(*, sweep: bool = True) -> Any:
    """A docker SDK client with a reachable engine (``DOCKER_HOST`` or the default socket).

    Args:
        sweep: remove leftovers of dead processes (see :func:`sweep_stale`).

    Raises:
        EnvironmentError_: the SDK is missing or no engine answers; the message names the set-up
            script.
    """
    try:
        import docker
    except ImportError as err:  # pragma: no cover - a declared dependency
        raise EnvironmentError_("the docker Python package is missing: pip install docker") from err
    try:
        client = docker.from_env(timeout=120)
        client.ping()
    except Exception as err:  # the SDK raises several unrelated types for "no engine"
        raise EnvironmentError_(f"no Docker engine reachable ({err}); {_SETUP_HINT}") from err
    if sweep:
        sweep_stale(client)
    return client


def _cache_dir() -> Path:
    path = cache_dir() / "docker"
    path.mkdir(parents=True, exist_ok=True)
    return path


@contextlib.contextmanager
def _build_lock(name: str) -> Any:
    """Serialise builds of one image across threads and processes."""
    with open(_cache_dir() / f"{name}.lock", "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield


def _has_image(client: Any, tag: str) -> bool:
    from docker.errors import ImageNotFound

    try:
        client.images.get(tag)
    except ImageNotFound:
        return False
    return True


def ensure_base_image(client: Any) -> str:
    """``stateflow-base:<key>``: the project's Debian root imported as an image (built if missing).

    Raises:
        EnvironmentError_: the root cannot be built (mmdebstrap missing) or the import failed.
    """
    from stateflow.envs.bash.rootfs import build_base_root

    root = build_base_root(quiet=True)
    tag = f"{BASE_REPO}:{root.key}"
    if _has_image(client, tag):
        return tag
    with _build_lock(tag.replace(":", "-")):
        if _has_image(client, tag):
            return tag
        tar = subprocess.Popen(["tar", "-C", str(root.path), "--numeric-owner", "-c", "."], stdout=subprocess.PIPE)
        try:
            assert tar.stdout is not None
            client.api.import_image_from_stream(
                tar.stdout, repository=BASE_REPO, tag=root.key, changes=[f"LABEL {IMAGE_LABEL}={BASE_REPO}"]
            )
        except Exception as err:
            raise EnvironmentError_(f"importing {root.path} as {tag} failed: {err}") from err
        finally:
            tar.stdout.close()  # type: ignore[union-attr]
            tar.wait()
        if tar.returncode != 0 or not _has_image(client, tag):
            raise EnvironmentError_(f"importing {root.path} as {tag} failed (tar exit {tar.returncode})")
    return tag


def image_key(dockerfile: bytes, files: Mapping[str, bytes], buildargs: Mapping[str, str]) -> str:
    """Hash of everything a build depends on (the base image is named in ``buildargs``)."""
    digest = hashlib.sha256(dockerfile)
    for name in sorted(files):
        digest.update(f"\0{name}\0{len(files[name])}\0".encode())
        digest.update(files[name])
    for name in sorted(buildargs):
        digest.update(f"\0{name}={buildargs[name]}".encode())
    return digest.hexdigest()[:16]


def _context(dockerfile: bytes, files: Mapping[str, bytes]) -> bytes:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w") as ctx:
        for name, data in {"Dockerfile": dockerfile, **files}.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mode = 0o644
            ctx.addfile(info, io.BytesIO(data))
    return out.getvalue()


def ensure_image(
    client: Any,
    repo: str,
    dockerfile: bytes,
    files: Mapping[str, bytes] | None = None,
    buildargs: Mapping[str, str] | None = None,
    *,
    key_prefix: str = "",
) -> str:
    """``repo:<prefix><hash>``, built from ``dockerfile`` and ``files`` unless already present.

    Builds run with the default (bridge) network so ``apt-get`` reaches the Debian mirror; the
    containers the backends run never have a network.

    Raises:
        EnvironmentError_: the build failed; the message holds the end of the build log.
    """
    files = dict(files or {})
    buildargs = dict(buildargs or {})
    tag = f"{repo}:{key_prefix}{image_key(dockerfile, files, buildargs)}"
    if _has_image(client, tag):
        return tag
    with _build_lock(tag.replace(":", "-").replace("/", "-")):
        if _has_image(client, tag):
            return tag
        log: list[str] = []
        try:
            for chunk in client.api.build(
                fileobj=io.BytesIO(_context(dockerfile, files)),
                custom_context=True,
                tag=tag,
                buildargs=buildargs,
                labels={IMAGE_LABEL: repo},
                rm=True,
                forcerm=True,
                decode=True,
            ):
                if "stream" in chunk:
                    log.append(chunk["stream"])
                if "error" in chunk:
                    raise EnvironmentError_(f"building {tag} failed: {chunk['error']}\n{''.join(log)[-2000:]}")
        except EnvironmentError_:
            raise
        except Exception as err:
            raise EnvironmentError_(f"building {tag} failed: {err}\n{''.join(log)[-2000:]}") from err
    return tag


class DockerSession:
    """Containers and host directories of one environment, removed by :meth:`close`.

    Args:
        client: from :func:`connect_engine`.
        kind: short name in container names (``bash``, ``sql``).
        reaper: start the reaper process that cleans up if this process dies unclosed.
    """

    def __init__(self, client: Any, kind: str, *, reaper: bool = True) -> None:
        self.client = client
        self.kind = kind
        self.token = secrets.token_hex(6)
        self.owner = owner_id()
        self.labels = {OWNER_LABEL: self.owner, SESSION_LABEL: self.token}
        self._run_dir: Path | None = None
        self._closed = False
        self._reaper: subprocess.Popen[bytes] | None = self._start_reaper() if reaper else None

    def _start_reaper(self) -> subprocess.Popen[bytes]:
        # Same interpreter and environment (PYTHONPATH included): it imports the same `stateflow`.
        env = dict(os.environ)
        # Its own session: a Ctrl-C to the runner's process group must not stop the cleaner.
        return subprocess.Popen(
            [sys.executable, "-m", "stateflow.envs.docker_engine", "--reap", self.token, str(self.run_dir_path())],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env=env,
            start_new_session=True,
        )

    def run_dir_path(self) -> Path:
        return _run_root() / f"{_RUN_PREFIX}{os.getpid()}-{self.token}"

    def run_dir(self) -> Path:
        """A private host directory (mode 0700) for bind mounts, removed with the session."""
        if self._run_dir is None:
            path = self.run_dir_path()
            path.mkdir(mode=0o700)
            (path / "owner").write_text(self.owner + "\n")
            self._run_dir = path
        return self._run_dir

    def name(self, role: str) -> str:
        return f"stateflow-{self.kind}-{role}-{self.token}-{secrets.token_hex(2)}"

    def run(self, image: str, *, role: str, **kwargs: Any) -> Any:
        """Start a detached, labelled container of ``image`` (``kwargs`` go to ``containers.run``)."""
        if self._closed:
            raise EnvironmentError_(f"the docker {self.kind} session was closed")
        labels = {**self.labels, **kwargs.pop("labels", {})}
        return self.client.containers.run(image, detach=True, name=self.name(role), labels=labels, **kwargs)

    def container_ids(self) -> list[str]:
        """Ids of this session's containers."""
        found = self.client.api.containers(all=True, filters={"label": f"{SESSION_LABEL}={self.token}"})
        return [c["Id"] for c in found]

    def close(self) -> None:
        """Remove every container and directory of this session; stop the reaper. Idempotent."""
        if self._closed:
            return
        self._closed = True
        _remove_session(self.client, self.token)
        if self._run_dir is not None:
            shutil.rmtree(self._run_dir, ignore_errors=True)
        if self._reaper is not None:
            with contextlib.suppress(OSError):
                self._reaper.stdin.write(_CLOSED)  # type: ignore[union-attr]
                self._reaper.stdin.close()  # type: ignore[union-attr]
            # not waited for: it exits on its own once it reads the message; subprocess reaps it later
            self._reaper = None

    def __del__(self) -> None:
        with contextlib.suppress(Exception):  # interpreter shutdown: the reaper does the work
            self.close()


def _remove_session(client: Any, token: str) -> None:
    for container in client.api.containers(all=True, filters={"label": f"{SESSION_LABEL}={token}"}):
        with contextlib.suppress(Exception):  # already gone
            client.api.remove_container(container["Id"], force=True)


def _reap(token: str, run_dir: str) -> None:
    """Reaper body: wait for the parent's pipe to close; unless the parent said it closed the
    session itself, remove the session's leftovers."""
    try:
        if sys.stdin.buffer.read() == _CLOSED:
            return
    except OSError:
        pass
    client = connect_engine(sweep=False)
    # twice: a container whose creation the dead parent had requested may appear a moment later
    for delay in (0.0, 2.0):
        time.sleep(delay)
        _remove_session(client, token)
    shutil.rmtree(run_dir, ignore_errors=True)


def _main(argv: Sequence[str]) -> int:
    if len(argv) == 3 and argv[0] == "--reap":
        _reap(argv[1], argv[2])
        return 0
    if argv == ["--sweep"]:
        for name in sweep_stale(connect_engine(sweep=False)):
            print(f"removed {name}")
        return 0
    print("usage: python -m stateflow.envs.docker_engine --sweep", file=sys.stderr)
    return 2


if __name__ == "__main__":
    raise SystemExit(_main(sys.argv[1:]))

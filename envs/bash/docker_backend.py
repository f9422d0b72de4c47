"""Optional Docker backend: each host is a container of an image built from our Dockerfile.

Images: one per task file system, ``stateflow-intercode-bash:<fs>-<hash>``, built locally from
``envs/bash/docker/Dockerfile`` on top of the project's Debian root imported as an image (see
:mod:`stateflow.envs.docker_engine`; the same root and tools as the sandbox backend). The hash covers the
Dockerfile, the task files and the base, so a changed input gives a new image.

Containers run with no network, all capabilities dropped except the four file-ownership ones a
root shell needs for the tasks (chown, chmod of any file), ``no-new-privileges``, memory
(without swap), pids, CPU and rlimit caps, and are labelled for cleanup (see
:class:`~stateflow.envs.docker_engine.DockerSession`).

Semantics match the sandbox backend:

* a command runs through the same relay as in the sandbox: the step ends when every holder of
  its output has closed it (``docker exec`` semantics), then every process the step started is
  killed, so nothing outlives a step. The container's process 1 (``docker/pid1.py``) forks the
  command on request over a Unix socket in a bind-mounted host directory, which costs a fork
  instead of a ``docker exec`` (a runc process on the host, ~50-150 ms);
* reset restores the whole root, byte for byte and with the image's timestamps (upstream's
  ``git reset; git clean`` leaves ``/etc``, ``/usr``, ... changed and directory mtimes moved,
  which changes e.g. the tar archives some golds create): a container whose file system the
  episode did not change (its overlay upper directory is empty) is kept, otherwise it is
  replaced by a spare container of the same image started in the background after the last
  reset, so the reset itself only swaps containers;
* at the timeout process 1 kills every other process in the container.
"""

from __future__ import annotations

import contextlib
import gzip
import io
import json
import os
import secrets
import socket
import struct
import tarfile
import threading
import time
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

from stateflow.envs.base import EnvironmentError_
from stateflow.envs.bash.layers import GITIGNORE, FsSource
from stateflow.envs.bash.rootfs import HOSTNAME
from stateflow.envs.bash.sandbox import CommandResult, SandboxLimits
from stateflow.envs.docker_engine import DockerSession, connect_engine, ensure_base_image, ensure_image

from stateflow.paths import resource_path

__all__ = ["DOCKERFILE", "IMAGE", "DockerHost", "bash_image", "connect_docker", "container_options"]

DOCKERFILE = resource_path(__package__, "docker", "Dockerfile")
IMAGE = "stateflow-intercode-bash"

# The sandbox's relay (merged output through `cat`, so the exec ends when every holder of the
# output closed it; exit status preserved), then kill every other process but pid 1.
_RELAY = '{ rc=$( { { "$@" 2>&1 3>&- 4>&-; echo $? >&4; } | cat >&3; } 4>&1 ); } 3>&1; kill -9 -1 2>/dev/null; exit $rc'
_CONTROL_DIR = "/run/sf-control"  # where process 1 (docker/pid1.py) listens, bind-mounted from the host
_CONTROL_NAME = "pid1.sock"
PID1 = resource_path(__package__, "docker", "pid1.py")
# What a root shell needs for the tasks (chown/chmod/cp -p of any file); everything else dropped.
_CAPABILITIES = ["CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID"]


def connect_docker() -> Any:
    """A docker SDK client with a reachable engine.

    Raises:
        EnvironmentError_: no engine (the message suggests the sandbox backend).
    """
    try:
        return connect_engine()
    except EnvironmentError_ as err:
        raise EnvironmentError_(f"{err}; or use backend='sandbox' (the default) instead") from err


def _fs_tar_gz(source: FsSource) -> bytes:
    """The task files as a tar.gz of paths relative to ``/`` (deterministic for a given tree)."""
    if source.tarball is not None:
        return source.tarball.read_bytes()
    raw = io.BytesIO()
    with gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as gz, tarfile.open(fileobj=gz, mode="w") as tar:
        if source.tree is not None and source.mount_at:
            tar.add(source.tree, arcname="." + source.mount_at)
    return raw.getvalue()


def _context_files(source: FsSource) -> dict[str, bytes]:
    """The build context besides the Dockerfile: gitignore, fs.tar.gz, setup.sh."""
    return {
        "gitignore": GITIGNORE.encode(),
        "fs.tar.gz": _fs_tar_gz(source),
        "setup.sh": (source.script or "").encode(),
        "pid1.py": PID1.read_bytes(),
    }


def _context_tar(source: FsSource) -> bytes:
    """The whole build context as a tar (Dockerfile included), as ``docker build`` receives it."""
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w") as ctx:
        for name, data in {"Dockerfile": DOCKERFILE.read_bytes(), **_context_files(source)}.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            ctx.addfile(info, io.BytesIO(data))
    return out.getvalue()


def bash_image(client: Any, source: FsSource) -> str:
    """The image of ``source``'s file system, built on first use."""
    base = ensure_base_image(client)
    return ensure_image(
        client,
        IMAGE,
        DOCKERFILE.read_bytes(),
        _context_files(source),
        {"BASE": base},
        key_prefix=f"{source.fs_id}-",
    )


def container_options(limits: SandboxLimits) -> dict[str, Any]:
    """``containers.run`` keyword arguments enforcing isolation and ``limits``."""
    from docker.types import Ulimit

    return {
        "hostname": HOSTNAME,
        "network_mode": "none",
        "cap_drop": ["ALL"],
        "cap_add": _CAPABILITIES,
        "security_opt": ["no-new-privileges"],
        "mem_limit": limits.memory_bytes,
        "memswap_limit": limits.memory_bytes,
        "pids_limit": limits.processes,
        "nano_cpus": 1_000_000_000,
        "ulimits": [
            Ulimit(name="fsize", soft=limits.file_size_bytes, hard=limits.file_size_bytes),
            Ulimit(name="nofile", soft=limits.open_files, hard=limits.open_files),
            Ulimit(name="cpu", soft=limits.cpu_seconds, hard=limits.cpu_seconds),
        ],
        "environment": {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME": "/root"},
    }


class DockerHost:
    """An execution host in a Docker container (see module docstring).

    Args:
        client: from :func:`connect_docker`.
        sources: file systems by id.
        role: ``agent`` or ``eval`` (part of the container name).
        limits: resource caps (the sandbox's; ``disk_bytes`` is not enforced: overlay2 on this
            file system has no size quota).
    """

    def __init__(
        self,
        client: Any,
        sources: dict[str, FsSource],
        *,
        role: str,
        limits: SandboxLimits | None = None,
    ) -> None:
        self._session = DockerSession(client, "bash")
        self._client = client
        self._sources = sources
        self._role = role
        self._limits = limits or SandboxLimits()
        self._container: Any = None
        self._control = Path()  # host path of the container's command socket
        self._upper: str | None = None
        self._fs: str | None = None
        self._dirty_processes = False  # a step may have left processes running
        self._lock = threading.Lock()  # one command at a time: a step kills all other processes
        # container starts and removals happen here, off the reset path
        self._background = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"sf-docker-{role}")
        self._spare: tuple[str, Future[tuple[Any, Path]]] | None = None
        self.replacements = 0  # fresh containers taken by reset (for tests and benchmarks)

    def _image(self, fs_id: str) -> str:
        try:
            source = self._sources[fs_id]
        except KeyError:
            raise EnvironmentError_(f"no source for file system {fs_id!r} (known: {sorted(self._sources)})") from None
        return bash_image(self._client, source)

    def _pristine(self) -> bool:
        """Whether the container's file system is still the image's.

        The only change tolerated is ``/.git/index``, whose stat cache ``git status`` refreshes
        (it does not change what git reports). Reads the container's overlay upper directory
        when this process can (a local engine, as root: ~0.1 ms); otherwise asks the engine for
        the diff (~0.4 s).
        """
        upper = self._upper
        if upper is not None:
            try:
                top = {entry.name for entry in os.scandir(upper)}
                return top <= {".git"} and (not top or {e.name for e in os.scandir(f"{upper}/.git")} <= {"index"})
            except OSError:
                self._upper = None
        changes = self._client.api.diff(self._container.id) or []
        return {change["Path"] for change in changes} <= {"/.git", "/.git/index"}

    def _start(self, image: str) -> tuple[Any, Path]:
        """Start a container of ``image``; return it and the host path of its command socket."""
        control_dir = self._session.run_dir() / f"ctl-{secrets.token_hex(4)}"
        control_dir.mkdir(mode=0o700)
        options = container_options(self._limits)
        options["volumes"] = {str(control_dir): {"bind": _CONTROL_DIR, "mode": "rw"}}
        container = self._session.run(image, role=self._role, **options)
        return container, control_dir / _CONTROL_NAME

    def _take(self, image: str) -> tuple[Any, Path]:
        """A fresh container of ``image``: the pre-started spare if it matches, else a new one."""
        spare, self._spare = self._spare, None
        fresh = None
        if spare is not None:
            if spare[0] == image:
                with contextlib.suppress(Exception):  # a failed spare: start one here instead
                    fresh = spare[1].result()
            else:
                self._background.submit(_remove_quietly, spare[1])
        if fresh is None:
            fresh = self._start(image)
        self._spare = (image, self._background.submit(self._start, image))
        return fresh

    def reset(self, fs_id: str) -> None:
        with self._lock:
            if self._container is not None and self._fs == fs_id and self._pristine():
                if self._dirty_processes:
                    self._request(["true"], "/", 10)  # the relay kills every process after it
                    self._dirty_processes = False
                return
            image = self._image(fs_id)
            old, self._container, self._fs = self._container, None, None
            if old is not None:
                self._background.submit(_remove_quietly, old)
            self._container, self._control = self._take(image)
            self._fs = fs_id
            self._dirty_processes = False
            data = (self._container.attrs.get("GraphDriver") or {}).get("Data") or {}
            upper = data.get("UpperDir")
            self._upper = upper if upper and os.access(upper, os.R_OK | os.X_OK) else None
            self.replacements += 1

    def _connect(self) -> socket.socket:
        """A connection to the container's process 1 (waiting briefly for a just-started one)."""
        deadline = time.monotonic() + 30
        while True:
            conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                conn.connect(str(self._control))
                return conn
            except (FileNotFoundError, ConnectionRefusedError):
                conn.close()
                self._container.reload()
                if self._container.status != "running" or time.monotonic() > deadline:
                    raise
                time.sleep(0.01)

    def _request(self, argv: Sequence[str], cwd: str, timeout: float) -> tuple[int | None, bytes, bool]:
        """Run ``argv`` through the relay: exit code (None on timeout), capped output, truncated."""
        cap = self._limits.output_bytes
        kept: list[bytes] = []
        size = 0
        request = {"argv": list(argv), "cwd": cwd, "timeout": timeout, "relay": _RELAY}
        with self._connect() as conn:
            conn.settimeout(timeout + 30)  # process 1 enforces the timeout; this only guards against a hang
            conn.sendall(json.dumps(request).encode() + b"\n")
            reader = conn.makefile("rb")
            while True:
                header = reader.read(5)
                if len(header) < 5:
                    raise ConnectionError("the container's process 1 closed the connection mid-command")
                kind, length = header[:1], struct.unpack("!I", header[1:])[0]
                payload = reader.read(length)
                if kind == b"x":
                    status = payload.decode()
                    break
                if size < cap:
                    kept.append(payload[: cap - size])
                size += len(payload)
        if status == "timeout":
            return None, b"", False
        return int(status), b"".join(kept), size > cap

    def run(self, argv: Sequence[str], *, cwd: str = "/", timeout: float | None = None) -> CommandResult:
        if self._container is None:
            raise EnvironmentError_("reset() the host before running commands")
        if any("\0" in a for a in argv):
            raise ValueError("NUL byte in command")
        from docker.errors import DockerException

        with self._lock:
            try:
                code, output, truncated = self._request(
                    argv, cwd, self._limits.timeout_s if timeout is None else timeout
                )
            except (OSError, DockerException) as err:
                # the container stopped or its socket is gone: report it, replace it on reset
                self._fs = None
                return CommandResult(126, f"the container is not running or not reachable: {err}\n".encode())
            # killed (timeout, the agent's own `kill -9 -1`) or not started: the relay may not
            # have cleaned up after the command
            self._dirty_processes |= code is None or code >= 126
        if code is None:
            return CommandResult(None, b"", timed_out=True)
        return CommandResult(code, output, False, truncated)

    def _remove(self) -> None:
        if self._container is not None:
            with contextlib.suppress(Exception):  # already gone
                self._container.remove(force=True)
            self._container = None
            self._fs = None

    def close(self) -> None:
        with self._lock:
            self._remove()
            spare, self._spare = self._spare, None
            if spare is not None:
                _remove_quietly(spare[1])
            self._background.shutdown(wait=True)
            self._session.close()  # removes anything still labelled with this host's session


def _remove_quietly(container: Any) -> None:
    """Remove a container (or the one a ``_start`` future yields); errors mean it is already gone."""
    with contextlib.suppress(Exception):
        if isinstance(container, Future):
            container = container.result()[0]
        container.remove(force=True)

"""Optional Docker backend: each host is a container of an image built from our Dockerfile.

For users who have a Docker engine and prefer it to the bubblewrap sandbox. One image per task
file system (``stateflow-intercode-bash:<fs>-<hash>``, built on first use from
``envs/bash/docker/Dockerfile`` with the same package list as the sandbox root); containers run
without network, with pids and memory caps. Reset is upstream's ``git reset --hard; git clean
-fd`` at ``/`` (so, as upstream, ignored system directories keep changes within a container's
life); switching file system recreates the container.

Timeouts: ``docker exec`` has none, so the exec runs in a helper thread; past the deadline its
process is killed from a second exec.
"""

from __future__ import annotations

import contextlib
import io
import secrets
import tarfile
import tempfile
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from envs.base import EnvironmentError_
from envs.bash.layers import GITIGNORE, FsSource
from envs.bash.rootfs import HOSTNAME, ROOT_PACKAGES
from envs.bash.sandbox import CommandResult, SandboxLimits

__all__ = ["DOCKERFILE", "DockerHost", "connect_docker"]

DOCKERFILE = Path(__file__).resolve().parent / "docker" / "Dockerfile"
IMAGE = "stateflow-intercode-bash"
_RESET = "git reset --hard -q; git clean -fdq"


def connect_docker() -> Any:
    """A docker SDK client with a reachable engine.

    Raises:
        EnvironmentError_: no engine (the message suggests the sandbox backend).
    """
    try:
        import docker

        client = docker.from_env()
        client.ping()
    except Exception as err:  # the SDK raises several unrelated types for "no engine"
        raise EnvironmentError_(
            f"no Docker engine reachable ({err}); use backend='sandbox' (the default) instead"
        ) from err
    return client


def _context_tar(source: FsSource) -> bytes:
    """The build context: Dockerfile, gitignore, fs.tar.gz."""
    fs = io.BytesIO()
    if source.tarball is not None:
        fs.write(source.tarball.read_bytes())
    else:
        with tarfile.open(fileobj=fs, mode="w:gz") as tar:
            if source.tree is not None and source.mount_at:
                tar.add(source.tree, arcname="." + source.mount_at)
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w") as ctx:
        for name, data in (
            ("Dockerfile", DOCKERFILE.read_bytes()),
            ("gitignore", GITIGNORE.encode()),
            ("fs.tar.gz", fs.getvalue()),
        ):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            ctx.addfile(info, io.BytesIO(data))
    return out.getvalue()


class DockerHost:
    """An execution host in a Docker container (see module docstring)."""

    def __init__(
        self, client: Any, sources: dict[str, FsSource], *, role: str, limits: SandboxLimits | None = None
    ) -> None:
        self._client = client
        self._sources = sources
        self._role = role
        self._limits = limits or SandboxLimits()
        self._container: Any = None
        self._fs: str | None = None

    def _image(self, fs_id: str) -> str:
        try:
            source = self._sources[fs_id]
        except KeyError:
            raise EnvironmentError_(f"no source for file system {fs_id!r}") from None
        tag = f"{IMAGE}:{fs_id}-{source.content_hash()}"
        try:
            self._client.images.get(tag)
        except Exception:
            with tempfile.TemporaryFile() as ctx:
                ctx.write(_context_tar(source))
                ctx.seek(0)
                try:
                    self._client.images.build(
                        fileobj=ctx,
                        custom_context=True,
                        tag=tag,
                        buildargs={"PACKAGES": " ".join(ROOT_PACKAGES)},
                        rm=True,
                    )
                except Exception as err:
                    raise EnvironmentError_(f"building docker image {tag} failed: {err}") from err
        return tag

    def reset(self, fs_id: str) -> None:
        if self._container is not None and self._fs == fs_id:
            code, out = self._container.exec_run(["/bin/bash", "-c", _RESET], workdir="/")
            if code != 0:
                raise EnvironmentError_(f"resetting container {self._container.name} failed: {out!r}")
            return
        self.close()
        image = self._image(fs_id)
        self._container = self._client.containers.run(
            image,
            detach=True,
            name=f"stateflow-bash-{self._role}-{secrets.token_hex(4)}",
            hostname=HOSTNAME,
            network_disabled=True,
            mem_limit=self._limits.memory_bytes,
            pids_limit=self._limits.processes,
            auto_remove=False,
        )
        self._fs = fs_id

    def run(self, argv: Sequence[str], *, cwd: str = "/", timeout: float | None = None) -> CommandResult:
        if self._container is None:
            raise EnvironmentError_("reset() the host before running commands")
        if any("\0" in a for a in argv):
            raise ValueError("NUL byte in command")
        api = self._client.api
        exec_id = api.exec_create(self._container.id, list(argv), workdir=cwd, stdout=True, stderr=True)["Id"]
        box: dict[str, bytes] = {}
        worker = threading.Thread(target=lambda: box.update(out=api.exec_start(exec_id)), daemon=True)
        worker.start()
        worker.join(self._limits.timeout_s if timeout is None else timeout)
        if worker.is_alive():
            pid = api.exec_inspect(exec_id).get("Pid")
            if pid:
                self._container.exec_run(["kill", "-9", str(pid)])
            return CommandResult(None, b"", timed_out=True)
        output = box.get("out", b"")
        truncated = len(output) > self._limits.output_bytes
        return CommandResult(
            api.exec_inspect(exec_id).get("ExitCode"), output[: self._limits.output_bytes], False, truncated
        )

    def close(self) -> None:
        if self._container is not None:
            with contextlib.suppress(Exception):  # already gone
                self._container.remove(force=True)
            self._container = None
            self._fs = None

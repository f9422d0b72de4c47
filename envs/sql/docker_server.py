"""The Docker backend: a MariaDB container per environment, reached over a bind-mounted socket.

Images (built locally, never pulled; see :mod:`stateflow.envs.docker_engine`):

* ``stateflow-mariadb:<hash>``: Debian's ``mariadb-server`` on the project's Debian root, with
  the embedded backend's server options (``envs/sql/docker/``);
* ``stateflow-sql-data:<hash>``: that image with a dump set loaded, committed once per
  (server image, dumps), so starting an environment is a container start (~1 s), not a load.

Isolation: the container has no network (``--network none``; the server also runs with
``skip-networking``) and is reached through its socket directory, bind-mounted from a private
host directory; it runs as the unprivileged ``mysql`` user with every capability dropped,
``no-new-privileges``, and memory, pids and CPU caps. Agents get the per-database SELECT-only
accounts every backend uses (:class:`~stateflow.envs.sql.server.SqlServer`).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import mysql.connector
from stateflow.envs.base import EnvironmentError_
from stateflow.envs.docker_engine import (
    DockerSession,
    _build_lock,
    _has_image,
    connect_engine,
    ensure_base_image,
    ensure_image,
)
from stateflow.envs.sql.dump import load_dump, read_dump
from stateflow.envs.sql.server import Endpoint, SqlServer, open_connection

from stateflow.paths import resource_path

__all__ = ["DATA_REPO", "SERVER_REPO", "DockerServer", "data_image", "server_image"]

_DIR = resource_path(__package__, "docker")
SERVER_REPO = "stateflow-mariadb"
DATA_REPO = "stateflow-sql-data"
_DATA_FORMAT = 1  # bump when the way dumps are loaded changes
_MYSQL_UID = 3306  # fixed in the Dockerfile
_SOCKET = "mysqld.sock"


def server_image(client: Any) -> str:
    """The MariaDB server image (built on first use)."""
    return ensure_image(
        client,
        SERVER_REPO,
        (_DIR / "Dockerfile").read_bytes(),
        {"server.cnf": (_DIR / "server.cnf").read_bytes()},
        {"BASE": ensure_base_image(client)},
    )


def _socket_dir(parent: Path) -> Path:
    """A fresh directory the container's mysql user may create its socket in."""
    path = parent / f"sock-{os.urandom(3).hex()}"
    path.mkdir()
    try:
        os.chown(path, _MYSQL_UID, _MYSQL_UID)
        path.chmod(0o700)
    except PermissionError:  # not root: the private parent (0700) still keeps others out
        path.chmod(0o777)
    return path


def _container_options(socket_dir: Path, memory_bytes: int) -> dict[str, Any]:
    return {
        "network_mode": "none",
        "cap_drop": ["ALL"],
        "security_opt": ["no-new-privileges"],
        "mem_limit": memory_bytes,
        "memswap_limit": memory_bytes,
        "pids_limit": 256,
        "nano_cpus": 1_000_000_000,
        "tmpfs": {"/tmp": "size=256m,mode=1777"},
        "volumes": {str(socket_dir): {"bind": "/run/mysqld", "mode": "rw"}},
    }


def _wait_ready(container: Any, endpoint: Endpoint, timeout: float) -> None:
    """Poll the socket until the server answers as root."""
    deadline = time.monotonic() + timeout
    last: Exception | None = None
    while time.monotonic() < deadline:
        if os.path.exists(str(endpoint.unix_socket)):
            try:
                open_connection(endpoint, "root", "", timeout=2).close()
                return
            except mysql.connector.Error as err:
                last = err
        container.reload()
        if container.status in ("exited", "dead"):
            tail = container.logs()[-1500:].decode(errors="replace")
            raise EnvironmentError_(f"the MariaDB container {container.name} exited: {tail}")
        time.sleep(0.05)
    raise EnvironmentError_(f"the MariaDB container {container.name} did not answer within {timeout:g} s ({last})")


def data_image(session: DockerSession, dumps: Sequence[Path], *, timeout: float = 300.0) -> str:
    """``stateflow-sql-data:<hash>``: the server image with ``dumps`` loaded (built on first use)."""
    client = session.client
    base = server_image(client)
    digest = hashlib.sha256(f"{_DATA_FORMAT}|{client.images.get(base).id}".encode())
    for dump in dumps:
        digest.update(hashlib.sha256(Path(dump).read_bytes()).hexdigest().encode())
    tag = f"{DATA_REPO}:{digest.hexdigest()[:16]}"
    if _has_image(client, tag):
        return tag
    with _build_lock(tag.replace(":", "-")):
        if _has_image(client, tag):
            return tag
        socket_dir = _socket_dir(session.run_dir())
        container = session.run(base, role="load", **_container_options(socket_dir, 2 * 2**30))
        try:
            endpoint = Endpoint(unix_socket=str(socket_dir / _SOCKET))
            _wait_ready(container, endpoint, 60)
            conn = open_connection(endpoint, "root", "", timeout=30)
            try:
                cur = conn.cursor()
                # anonymous accounts would shadow '%' accounts for local logins
                cur.execute("SELECT user, host FROM mysql.user WHERE user = ''")
                for user, host in cur.fetchall():
                    cur.execute(f"DROP USER '{user}'@'{host}'")
                cur.close()
                for dump in dumps:
                    load_dump(conn, read_dump(Path(dump)))
            finally:
                conn.close()
            container.stop(timeout=int(timeout))  # SIGTERM: a clean shutdown, nothing to recover
            container.commit(repository=DATA_REPO, tag=tag.split(":", 1)[1])
        finally:
            with contextlib.suppress(Exception):
                container.remove(force=True)
    return tag


class DockerServer(SqlServer):
    """A MariaDB container with the dataset loaded; ``close`` removes it.

    Args:
        dumps: dumps creating the dataset's databases.
        databases: the dataset's databases (lower-cased).
        memory_bytes: the container's memory cap.
        start_timeout: seconds to wait for the server.

    Raises:
        EnvironmentError_: no Docker engine, an image build failed, or the server did not come
            up; each message names the fix or shows the server log.
    """

    kind = "docker"

    def __init__(
        self,
        dumps: Sequence[Path],
        databases: frozenset[str],
        *,
        memory_bytes: int = 1 * 2**30,
        start_timeout: float = 60.0,
    ) -> None:
        super().__init__(databases)
        try:
            client = connect_engine()
        except EnvironmentError_ as err:
            raise EnvironmentError_(f"{err}; or use the default embedded backend or backend='dsn'") from err
        self._session = DockerSession(client, "sql")
        self._memory = memory_bytes
        self._timeout = start_timeout
        self._container: Any = None
        try:
            self._image = data_image(self._session, dumps)
            self._endpoint = self._launch()
        except BaseException:
            self._session.close()
            raise

    def _launch(self) -> Endpoint:
        socket_dir = _socket_dir(self._session.run_dir())
        self._container = self._session.run(self._image, role="server", **_container_options(socket_dir, self._memory))
        endpoint = Endpoint(unix_socket=str(socket_dir / _SOCKET))
        _wait_ready(self._container, endpoint, self._timeout)
        return endpoint

    @property
    def endpoint(self) -> Endpoint:
        return self._endpoint

    @property
    def container(self) -> Any:
        """The server's container (docker SDK object)."""
        return self._container

    def admin_login(self) -> tuple[str, str]:
        return "root", ""

    def _restart(self) -> None:
        with contextlib.suppress(Exception):  # already gone
            self._container.remove(force=True)
        self._endpoint = self._launch()

    def _shutdown(self) -> None:
        self._session.close()

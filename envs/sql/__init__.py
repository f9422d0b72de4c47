"""InterCode SQL on a real MariaDB/MySQL server.

Entry point: :func:`open_sql_env`. The reward is :func:`sql_reward`. Backends: a private
embedded MariaDB (default), a MariaDB Docker container, or an external server by DSN.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from stateflow.envs.sql.embedded import SHARED_EMBEDDED_POOL, EmbeddedServer, EmbeddedServerPool
from stateflow.envs.sql.env import ERROR_PREFIX, SqlEnv, SqlLimits
from stateflow.envs.sql.reward import sql_reward
from stateflow.envs.sql.server import DATABASE_SCOPES, DatabaseScope, SqlServer, check_scope
from stateflow.envs.sql.tasks import NAMED_DATASETS, SqlDataset, TaskFileError, load_task_file, resolve_dataset

__all__ = [
    "BACKENDS",
    "DATABASE_SCOPES",
    "ERROR_PREFIX",
    "NAMED_DATASETS",
    "DatabaseScope",
    "EmbeddedServer",
    "EmbeddedServerPool",
    "SqlDataset",
    "SqlEnv",
    "SqlLimits",
    "SqlServer",
    "TaskFileError",
    "load_task_file",
    "open_sql_env",
    "resolve_dataset",
    "sql_reward",
]

BACKENDS = ("embedded", "docker", "dsn")


def open_sql_env(
    dataset: str = "demo",
    *,
    backend: str = "embedded",
    dsn: str | None = None,
    data_dir: str | None = None,
    dumps: Sequence[str | Path] | None = None,
    limits: SqlLimits | None = None,
    database_scope: DatabaseScope = "benchmark",
    pool: EmbeddedServerPool | None = None,
    tcp: bool = False,
) -> SqlEnv:
    """Open an InterCode SQL environment.

    Args:
        dataset: "demo" (shipped), "spider" (1034 Spider-dev tasks), "spider-test" (23 tasks)
            or a JSON/CSV task file path.
        backend: "embedded" (private MariaDB child process, shared by the process's
            environments), "docker" (a MariaDB container,
            see :mod:`stateflow.envs.sql.docker_server`) or "dsn" (an external server).
        dsn: ``mysql://user:password@host:port`` for ``backend="dsn"``.
        data_dir: where InterCode's ``sql/`` files are (default: see ``stateflow.envs.datasets``).
        dumps: SQL dumps creating the databases (default: the dataset's own).
        limits: statement timeout and observation caps (default :class:`SqlLimits`).
        database_scope: ``"benchmark"`` (default, as upstream): the agent may read and ``USE``
            any dataset database and the gold query runs in the database the agent's session is
            in; ``"task"``: the agent is confined to the task's database (stricter than upstream).
        pool: embedded-server pool (default: the process-wide one).
        tcp: embedded only: also listen on a loopback port.

    Raises:
        ValueError: unknown backend or database scope, or ``dsn`` missing/malformed.
        TaskFileError: bad task file; DataNotFoundError: Spider data not found.
        EnvironmentError_: the server could not be started or reached (the message names
            the set-up script and the other backends).
    """
    if backend not in BACKENDS:
        raise ValueError(f"unknown SQL backend {backend!r}; choose one of {', '.join(BACKENDS)}")
    if backend == "dsn" and not dsn:
        raise ValueError("backend 'dsn' needs dsn='mysql://user:password@host:port'")
    if backend != "dsn" and dsn:
        raise ValueError(f"dsn= is only used with backend='dsn' (got backend={backend!r})")
    check_scope(database_scope)
    data = resolve_dataset(dataset, data_dir=data_dir, dumps=dumps)
    if backend == "embedded":
        chosen = pool or SHARED_EMBEDDED_POOL
        server = chosen.acquire(data.dumps, data.databases, tcp=tcp)
        return SqlEnv(
            data, server, limits=limits, database_scope=database_scope, on_close=lambda: chosen.release(server)
        )
    if backend == "docker":
        from stateflow.envs.sql.docker_server import DockerServer

        docker_server = DockerServer(data.dumps, data.databases)
        return SqlEnv(data, docker_server, limits=limits, database_scope=database_scope, on_close=docker_server.close)
    from stateflow.envs.sql.external import DsnServer

    dsn_server = DsnServer(dsn or "", data.dumps, data.databases)
    return SqlEnv(data, dsn_server, limits=limits, database_scope=database_scope, on_close=dsn_server.close)

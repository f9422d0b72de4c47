"""The per-process pool of managed servers: one server per model, shared by every flow and thread.

Why process-wide: a server holds a model in RAM (0.6-1.3 GB) and a prompt-state cache; a second
server for the same model in one process would double both and split the cache, so runs that share
a process must share servers. This is the one process-wide object of the local back-end: it is an
explicit :class:`LocalServerPool` with a lock, obtainable through :func:`default_pool`, and tests
or embedders may create their own pools instead.
"""

from __future__ import annotations

import atexit
import os
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import replace
from pathlib import Path
from typing import Any, Protocol, TypeVar

from stateflow.backends.local.catalog import model_spec
from stateflow.backends.local.errors import ServerStartError
from stateflow.backends.local.replicas import ReplicaSet, partition_cores
from stateflow.backends.local.server import ManagedServer, ServerConfig, cpu_cores
from stateflow.backends.local.store import ModelLocation, ModelStore
from stateflow.errors import ConfigError
from stateflow.profiles import ModelProfile
from stateflow.progress import say

T = TypeVar("T")

__all__ = ["LocalServerPool", "ServerHandle", "check_server", "default_pool", "resolve_endpoint", "start_servers"]


class ServerHandle(Protocol):
    """What a pool needs of a server: :class:`ManagedServer`, or one shared with other processes."""

    def ensure_running(self) -> str: ...

    def check(self) -> None: ...

    def alive(self) -> bool: ...

    def stop(self) -> None: ...


class LocalServerPool:
    """Starts servers lazily, one per model key, and stops them all at exit.

    Args:
        store: where models are found/assembled (default: the user cache).
        allow_network: whether a missing model may be downloaded from Hugging Face on first use.
        **server_options: :class:`ServerConfig` fields applied to every server (``n_ctx``,
            ``cache_bytes``, ``n_threads``, ``port``...).
    """

    def __init__(self, store: ModelStore | None = None, *, allow_network: bool = True, **server_options: Any):
        self.store = store or ModelStore()
        self.allow_network = allow_network
        self.server_options = server_options
        self._lock = threading.Lock()
        self._servers: dict[str, ManagedServer | ReplicaSet] = {}
        self._locations: dict[str, ModelLocation] = {}
        self._atexit_registered = False

    def server(
        self, local_model: str, alias: str | None = None, *, n_threads: int | None = None, replicas: int | None = None
    ) -> ManagedServer | ReplicaSet:
        """The (not necessarily running) server for ``local_model``, created on first request.

        Args:
            local_model: a catalogue key (``local``, ``local-small``) or a path to any GGUF file.
            alias: the model name to serve under (default: the catalogue alias / the file stem).
            n_threads: CPU threads of a server created now (default: the pool's option, else
                every core); a server that exists already must run with this count. With
                ``replicas`` > 1 each replica gets the threads of its own cores instead.
            replicas: serve the model from this many servers, each pinned to its share of the
                cores (:class:`~stateflow.backends.local.replicas.ReplicaSet`); ``None``: what
                exists already, else 1.

        Raises:
            ConfigError: unknown key; ``n_threads`` or ``replicas`` differs from what the model's
                server was created with (the message names both); more replicas than cores.
            ModelNotFoundError / ModelIntegrityError: see ModelStore.locate.
        """
        with self._lock:
            existing = self._servers.get(local_model)
            if existing is not None:
                have = len(existing) if isinstance(existing, ReplicaSet) else 1
                if replicas is not None and have != replicas:
                    raise ConfigError(
                        f"embedded model {local_model!r} is already served by {have} replica(s); a run asks "
                        f"for replicas={replicas}. Stop it first (LocalServerPool.discard) or ask for {have}"
                    )
                running = getattr(existing, "config", None)
                if n_threads is not None and running is not None and running.n_threads != n_threads and have == 1:
                    raise ConfigError(
                        f"embedded model {local_model!r} is already served with n_threads={running.n_threads}; "
                        f"a profile asks for n_threads={n_threads}. One server serves a model per process: "
                        "give every profile of this model the same n_threads"
                    )
                return existing
            groups = partition_cores(sorted(self._cores()), replicas) if replicas and replicas > 1 else None
            if local_model.endswith(".gguf") or "/" in local_model:
                location = self.store.locate(None, local_model)
                default_alias = Path(local_model).stem
            else:
                spec = model_spec(local_model)
                location = self.store.locate(spec, allow_network=self.allow_network)
                default_alias = spec.alias
            options = dict(self.server_options)
            if n_threads is not None:
                options["n_threads"] = n_threads
            config = replace(ServerConfig(model_path=location.path, alias=alias or default_alias), **options)
            server: ManagedServer | ReplicaSet = ReplicaSet(config, groups) if groups else ManagedServer(config)
            self._servers[local_model] = server
            self._locations[local_model] = location
            if not self._atexit_registered:
                atexit.register(self.close)
                self._atexit_registered = True
            return server

    @staticmethod
    def _cores() -> set[int]:
        try:
            return set(os.sched_getaffinity(0))
        except AttributeError:  # pragma: no cover - not Linux
            return set(range(cpu_cores()))

    def replicas(self, local_model: str) -> int | None:
        """How many servers serve ``local_model`` in this pool (``None``: none created yet)."""
        with self._lock:
            server = self._servers.get(local_model)
        if server is None:
            return None
        return len(server) if isinstance(server, ReplicaSet) else 1

    def discard(self, local_model: str) -> None:
        """Stop the server(s) of ``local_model`` and forget them (the next request starts anew)."""
        with self._lock:
            server = self._servers.pop(local_model, None)
        if server is not None:
            server.stop()

    def attach(self, local_model: str, server: ServerHandle) -> None:
        """Serve ``local_model`` from ``server`` instead of starting one in this process.

        For processes that share one server per machine (e.g. Ray workers on a node): requests
        for ``local_model`` then go to ``server``, and :meth:`close` calls its ``stop``.
        """
        with self._lock:
            self._servers[local_model] = server  # type: ignore[assignment]

    def endpoint(
        self, local_model: str, alias: str | None = None, *, n_threads: int | None = None, replicas: int | None = None
    ) -> str:
        """Base URL (with ``/v1``) of a running server for ``local_model``, starting it if needed.

        With replicas, the URL of the replica that serves the current
        :func:`~stateflow.backends.local.replicas.route_requests` block.
        """
        server = self.server(local_model, alias, n_threads=n_threads, replicas=replicas)
        return _announced_start(local_model, server, server.ensure_running)

    def location(self, local_model: str) -> ModelLocation | None:
        """Where the model file of a server in this pool came from."""
        return self._locations.get(local_model)

    def check(self, local_model: str) -> None:
        """Raise :class:`ServerCrashedError` if this pool's server for ``local_model`` died."""
        with self._lock:
            server = self._servers.get(local_model)
        if server is not None:
            server.check()

    def running(self) -> dict[str, ManagedServer | ReplicaSet]:
        """The servers whose process is alive, by model key."""
        with self._lock:
            return {k: s for k, s in self._servers.items() if s.alive()}

    def close(self) -> None:
        """Stop every server of this pool (idempotent; registered with ``atexit``)."""
        with self._lock:
            servers = list(self._servers.values())
            self._servers.clear()
        for server in servers:
            server.stop()


class _DefaultPool:
    """Holder of the process-wide pool, created on first use under a lock.

    A forked child gets a pool of its own: the parent's server processes are not its children
    (it could neither wait for nor stop them), and "one server per model per process" holds.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pool: LocalServerPool | None = None
        self._pid = os.getpid()

    def get(self) -> LocalServerPool:
        with self._lock:
            if self._pool is None or self._pid != os.getpid():
                self._pool = LocalServerPool()
                self._pid = os.getpid()
            return self._pool


_DEFAULT = _DefaultPool()


def default_pool() -> LocalServerPool:
    """The process-wide pool used by :func:`resolve_endpoint` (see the module docstring for why)."""
    return _DEFAULT.get()


def resolve_endpoint(profile: ModelProfile, pool: LocalServerPool | None = None) -> str:
    """Base URL (including ``/v1``) of a running managed server for a ``local`` profile.

    Starts the server on first use (thread-safe; concurrent callers share one start) and restarts
    it if it crashed since the last call; the URL stays the same across restarts whenever the old
    port is still free. Cheap when the server runs: call it before every request.

    Args:
        profile: a profile with ``provider="local"``; ``local_model`` is a catalogue key
            (``local``/``local-small``) or a path to a GGUF file; ``model`` is the served alias.
        pool: the pool to use (default: :func:`default_pool`).

    Raises:
        ConfigError: the profile is not a local one.
        ModelNotFoundError, ModelIntegrityError: the model file is missing or corrupt.
        RuntimeMissingError, ServerStartError: the runtime is missing or the server cannot start.
    """
    if profile.provider != "local" or not profile.local_model:
        raise ConfigError(
            f"profile {profile.name!r} (provider {profile.provider!r}) is not served by the embedded "
            "local LLM; only provider 'local' profiles have a managed endpoint"
        )
    return (pool or default_pool()).endpoint(
        profile.local_model, alias=profile.model, n_threads=profile.n_threads, replicas=profile.replicas
    )


def check_server(profile: ModelProfile, pool: LocalServerPool | None = None) -> None:
    """Turn a failed request into a clear error: raise if the profile's server has crashed.

    Call it when a request to a ``local`` profile's endpoint fails (e.g. ``openai.APIConnectionError``).
    The next :func:`resolve_endpoint` restarts the server.

    Raises:
        ServerCrashedError: the server died; the message gives the exit status/signal and log tail.
    """
    if profile.provider != "local" or not profile.local_model:
        return
    (pool or default_pool()).check(profile.local_model)


def start_servers(
    profiles: Iterable[ModelProfile],
    pool: LocalServerPool | None = None,
    *,
    warm: bool = True,
    replicas: int | None = None,
) -> dict[str, str]:
    """Make the managed server of every ``local`` profile in ``profiles`` ready now; others are skipped.

    A runner calls this before its first episode, so that no episode pays for (or is delayed
    by) starting a server and loading its model. Servers already running are left as they are.

    Args:
        profiles: the profiles a run will use.
        pool: the pool to use (default: :func:`default_pool`).
        warm: also send each server one 1-token request through the OpenAI client: the model's
            first inference (buffers allocated, weights paged in) and the client's lazy imports
            (~0.6 s) then happen here too.
        replicas: how many pinned servers serve a profile that does not set ``replicas`` itself
            (the runner passes :func:`~stateflow.backends.local.defaults.local_replicas` of its
            workers); ``None``: one server.

    Returns:
        ``{profile name: base URL}`` for the local profiles (with replicas: the first replica's).

    Raises:
        ConfigError, ModelNotFoundError, ModelIntegrityError, RuntimeMissingError,
        ServerStartError: as :func:`resolve_endpoint`; ServerStartError also when the warm-up
        request fails (the message names the profile and the error).
    """
    pool = pool or default_pool()
    urls: dict[str, str] = {}
    for p in profiles:
        if p.provider != "local" or not p.local_model or p.name in urls:
            continue
        # A run's default gives way to servers this process already runs (an earlier run's):
        # only a profile's own ``replicas`` insists (and fails on a mismatch).
        default = None if pool.replicas(p.local_model) is not None else replicas
        want = p.replicas if p.replicas is not None else default
        server = pool.server(p.local_model, alias=p.model, n_threads=p.n_threads, replicas=want)
        start = server.start_all if isinstance(server, ReplicaSet) else lambda s=server: [s.ensure_running()]
        members = _announced_start(p.local_model, server, start)
        urls[p.name] = members[0]
        if warm:
            for url in members:
                _first_request(p, url)
    return urls


def _announced_start(local_model: str, server: Any, start: Callable[[], T]) -> T:
    """``start()``, with a progress line before and after when it starts a server (a model load
    takes seconds: :mod:`stateflow.progress` prints where a person is watching)."""
    if server.alive():
        return start()
    say(f"starting the embedded model {local_model} (loading it takes a few seconds)...")
    began = time.monotonic()
    out = start()
    say(f"embedded model {local_model} ready after {time.monotonic() - began:.1f} s")
    return out


def _first_request(profile: ModelProfile, url: str) -> None:
    from openai import OpenAI, OpenAIError

    client = OpenAI(base_url=url, api_key="not-needed", max_retries=0, timeout=profile.timeout)
    try:
        client.chat.completions.create(
            model=profile.model, messages=[{"role": "user", "content": "Say OK."}], max_tokens=1, temperature=0.0
        )
    except OpenAIError as err:
        raise ServerStartError(
            f"the embedded model of profile {profile.name!r} started at {url} but its first request failed: "
            f"{type(err).__name__}: {err}"
        ) from err
    finally:
        client.close()

"""Where episodes run. The runner only needs :class:`EpisodeExecutor`; today's implementation
runs worker threads in this process, each with its own environment. A Ray implementation (one
actor per worker owning its environment) can replace it without touching the runner.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from stateflow.envs.base import Environment

if TYPE_CHECKING:
    from stateflow.profiles import ModelAssignment

__all__ = ["EpisodeExecutor", "ThreadExecutor"]

J = TypeVar("J")


class EpisodeExecutor(Protocol):
    """Runs ``work(env, job)`` for each job, one environment per worker, yielding results as
    they finish (any order). On the first Ctrl-C (or ``stop()``) it starts no new job, calls
    ``on_interrupt`` and keeps yielding the jobs in flight; a second Ctrl-C propagates.
    ``interrupted`` tells afterwards whether that happened."""

    interrupted: bool

    def start_models(self, models: ModelAssignment) -> None:
        """Start the embedded model servers the episodes will call, before any episode runs, so
        that loading a model is neither counted in nor delaying the first episode."""
        ...

    def run(
        self,
        jobs: Iterable[J],
        work: Callable[[Environment, J], dict[str, Any]],
        on_interrupt: Callable[[], None] | None = None,
    ) -> Iterator[dict[str, Any]]: ...

    def stop(self) -> None: ...

    def close(self) -> None: ...


class ThreadExecutor:
    """``workers`` threads in this process; each lazily opens its own environment.

    Args:
        workers: number of episodes run at once.
        make_env: opens one environment (called once per worker thread).
    """

    def __init__(self, workers: int, make_env: Callable[[], Environment]):
        if workers < 1:
            raise ValueError(f"workers must be >= 1, got {workers}")
        self.workers = workers
        self._make_env = make_env
        self._local = threading.local()
        self._envs: list[Environment] = []
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="episode")
        self.interrupted = False

    def start_models(self, models: ModelAssignment) -> None:
        """Start, in this process, the server of every ``local`` profile ``models`` assigns."""
        from stateflow.backends.local import start_servers

        start_servers(models.profiles[name] for name in dict.fromkeys(models.by_state.values()))

    def _env(self) -> Environment:
        env = getattr(self._local, "env", None)
        if env is None:
            env = self._make_env()
            self._local.env = env
            with self._lock:
                self._envs.append(env)
        return env

    def run(
        self,
        jobs: Iterable[J],
        work: Callable[[Environment, J], dict[str, Any]],
        on_interrupt: Callable[[], None] | None = None,
    ) -> Iterator[dict[str, Any]]:
        pending: set[Future[dict[str, Any]]] = set()
        queue = iter(jobs)

        def call(job: J) -> dict[str, Any]:
            return work(self._env(), job)

        def refill() -> None:
            while len(pending) < self.workers and not self._stopping.is_set():
                job = next(queue, None)
                if job is None:
                    return
                pending.add(self._pool.submit(call, job))

        refill()
        while pending:
            try:
                done, _ = wait(pending, return_when=FIRST_COMPLETED)
            except KeyboardInterrupt:
                if self._stopping.is_set():
                    raise
                self.interrupted = True
                self._stopping.set()
                if on_interrupt is not None:
                    on_interrupt()
                continue
            for fut in done:
                pending.discard(fut)
                yield fut.result()
            refill()

    def stop(self) -> None:
        self._stopping.set()

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)
        with self._lock:
            envs, self._envs = self._envs, []
        for env in envs:
            env.close()

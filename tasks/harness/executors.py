"""Where episodes run. The runner only needs :class:`EpisodeExecutor`; today's implementation
runs worker threads in this process, each with its own environment. A Ray implementation (one
actor per worker owning its environment) can replace it without touching the runner.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Hashable, Iterable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from stateflow.envs.base import Environment

if TYPE_CHECKING:
    from stateflow.profiles import ModelAssignment

__all__ = ["EpisodeExecutor", "LaneQueue", "ThreadExecutor"]

J = TypeVar("J")


class EpisodeExecutor(Protocol):
    """Runs ``work(env, job)`` for each job, one environment per worker, yielding results as
    they finish (any order). On the first Ctrl-C (or ``stop()``) it starts no new job, calls
    ``on_interrupt`` and keeps yielding the jobs in flight; a second Ctrl-C propagates.
    ``interrupted`` tells afterwards whether that happened. ``lane(job)`` (optional) names a
    job's context: an executor may use it to keep one context on one worker (:class:`LaneQueue`)
    or ignore it."""

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
        lane: Callable[[J], Hashable] | None = None,
    ) -> Iterator[dict[str, Any]]: ...

    def stop(self) -> None: ...

    def close(self) -> None: ...


class LaneQueue:
    """Jobs handed out so that parallel workers walk different contexts (lanes).

    The next job is the next of a lane no job in flight belongs to, preferring a lane already
    begun (its worker just finished one of its jobs) over a new one, lanes in the order of their
    first job; only when every remaining lane is in flight do two workers share one. With
    ``--order context`` and replicas routed by context, each worker then keeps its database on
    its own replica's prompt cache; plain FIFO would hand both workers the same database's tasks.
    Jobs of one lane keep their order.

    >>> q = LaneQueue([("a", 0), ("a", 1), ("b", 2)], lane=lambda j: j[0])
    >>> first, second = q.take(), q.take()
    >>> first, second
    (('a', 0), ('b', 2))
    >>> q.done(first); q.take()
    ('a', 1)
    """

    def __init__(self, jobs: Iterable[J], lane: Callable[[J], Hashable]):
        self._lanes: dict[Hashable, deque[Any]] = {}
        for job in jobs:
            self._lanes.setdefault(lane(job), deque()).append(job)
        self._lane = lane
        self._begun: set[Hashable] = set()
        self._flying: dict[Hashable, int] = {}

    def __len__(self) -> int:
        return sum(map(len, self._lanes.values()))

    def take(self) -> Any | None:
        """The next job (counted in flight until :meth:`done`), or ``None`` when none is left."""
        free = [k for k, q in self._lanes.items() if q and not self._flying.get(k)]
        begun = [k for k in free if k in self._begun]
        pick = (begun or free or [k for k, q in self._lanes.items() if q] or [None])[0]
        if pick is None:
            return None
        self._begun.add(pick)
        self._flying[pick] = self._flying.get(pick, 0) + 1
        return self._lanes[pick].popleft()

    def done(self, job: Any) -> None:
        """``job`` (from :meth:`take`) finished."""
        key = self._lane(job)
        self._flying[key] = max(0, self._flying.get(key, 0) - 1)


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
        """Start, in this process, the server of every ``local`` profile ``models`` assigns.

        A profile that sets no ``replicas`` gets the default for this executor's workers
        (:func:`stateflow.backends.local.defaults.local_replicas`).
        """
        from stateflow.backends.local import start_servers
        from stateflow.backends.local.defaults import local_replicas

        start_servers(
            (models.profiles[name] for name in dict.fromkeys(models.by_state.values())),
            replicas=local_replicas(self.workers),
        )

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
        lane: Callable[[J], Hashable] | None = None,
    ) -> Iterator[dict[str, Any]]:
        pending: dict[Future[dict[str, Any]], J] = {}
        lanes = LaneQueue(jobs, lane) if lane is not None and self.workers > 1 else None
        queue = iter(jobs) if lanes is None else iter(lanes.take, None)

        def call(job: J) -> dict[str, Any]:
            return work(self._env(), job)

        def refill() -> None:
            while len(pending) < self.workers and not self._stopping.is_set():
                job = next(queue, None)
                if job is None:
                    return
                pending[self._pool.submit(call, job)] = job

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
                job = pending.pop(fut)
                if lanes is not None:
                    lanes.done(job)
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

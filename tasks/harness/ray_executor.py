"""Episodes on a Ray cluster: the :class:`~stateflow.tasks.harness.executors.EpisodeExecutor` for many machines.

Each worker is a Ray actor that owns one environment (its own MariaDB / sandbox on the node it
was placed on) and runs one episode at a time. The driver keeps everything else: it hands out
jobs, collects the records as they finish and stays the single writer of ``results.jsonl`` (the
runner appends each record as the executor yields it), so resume, torn-line repair and
``--retry-errors`` work exactly as with :class:`~stateflow.tasks.harness.executors.ThreadExecutor`.

Models:

* an HTTP endpoint (OpenAI, vLLM, ...) is shared by every actor as it is: the profile's URL must
  be reachable from every node;
* the embedded model (``provider="local"``) is served once per node, by a named
  :class:`NodeModelServer` actor pinned to that node and owned by the driver; every episode actor
  on the node attaches its process's local-server pool to it instead of starting a llama.cpp
  server of its own (memory and cores are per node, not per actor).

Faults: an actor that dies mid-episode (its process crashed, or its node went away) is replaced,
and its episode is queued again for another actor, at most ``max_retries`` times (default once).
When several episodes were queued on the dead actor and more than one has no result, none is
blamed: each runs again alone, so a crash is only ever counted against the episode that caused it.
Records already yielded are on disk by then. An episode lost more often than that is reported
by :class:`EpisodesLostError` once every other episode has finished (re-running the command runs
just those). Exceptions raised by the episode code itself propagate as they do with threads.

Size (over ~400 lines, on purpose): the actor, its supervision and the loss accounting are one
protocol whose parts change together; the tests drive them as one (tests/tasks/test_ray_executor.py).
"""

from __future__ import annotations

import logging
import os
import time
from collections import deque
from collections.abc import Callable, Hashable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from stateflow.envs.base import Environment

from stateflow.errors import ConfigError, StateFlowError

__all__ = ["EpisodesLostError", "LocalModel", "NodeModelServer", "RayExecutor", "local_models", "ray_executor_factory"]

J = TypeVar("J")
log = logging.getLogger(__name__)

_NAMESPACE = "stateflow"


def _ray() -> Any:
    try:
        import ray
    except ImportError as err:
        raise ConfigError(
            "--executor ray needs the 'ray' package: pip install 'stateflow[ray]' (or pip install ray)"
        ) from err
    return ray


def _lost_errors() -> tuple[type[BaseException], ...]:
    """Failures that mean "the worker or its node is gone", not "the episode code raised"."""
    from ray import exceptions as rx

    return (rx.RayActorError, rx.WorkerCrashedError, rx.NodeDiedError, rx.ObjectLostError, rx.LocalRayletDiedError)


def _put(ray: Any, obj: object, what: str) -> Any:
    """``ray.put(obj)``, with a clear error when ``obj`` cannot be shipped to other processes."""
    try:
        return ray.put(obj)
    except TypeError as err:  # e.g. an in-process scripted model holding a lock
        raise ConfigError(
            f"{what} cannot be sent to Ray workers ({err}); in-process scripted models only run with the "
            "thread executor: serve their replies over HTTP (an OpenAI-compatible endpoint) for --executor ray"
        ) from err


class EpisodesLostError(StateFlowError):
    """Some episodes were lost with their worker more often than the retry budget allows.

    Attributes:
        jobs: the lost jobs (the runner's ``(method, task)`` pairs).
    """

    def __init__(self, jobs: Sequence[Any], reason: str):
        self.jobs = list(jobs)
        shown = ", ".join(map(str, self.jobs[:5])) + (" ..." if len(self.jobs) > 5 else "")
        super().__init__(
            f"{len(self.jobs)} episode(s) were lost with their Ray worker twice ({shown}); last cause: {reason}. "
            "Every finished episode is saved: re-run the same command to run the lost ones."
        )


@dataclass(frozen=True)
class LocalModel:
    """An embedded model to serve once per node: the pool key and the alias it is served under."""

    key: str
    alias: str


def local_models(assignment: Any) -> tuple[LocalModel, ...]:
    """The embedded models a :class:`~stateflow.profiles.ModelAssignment` uses (none: ``()``)."""
    out: dict[str, LocalModel] = {}
    for name in set(assignment.by_state.values()):
        p = assignment.profiles[name]
        if p.provider == "local" and p.local_model:
            out.setdefault(p.local_model, LocalModel(p.local_model, p.model))
    return tuple(out.values())


class NodeModelServer:
    """Owns the node's local-server pool: one llama.cpp server per model for the whole node.

    Created by the driver as a named actor pinned to one node (see :class:`RayExecutor`); episode
    actors on that node reach it through :class:`_NodeServerHandle`.
    """

    def __init__(self) -> None:
        from stateflow.backends.local import LocalServerPool

        self._pool = LocalServerPool()

    def endpoint(self, key: str, alias: str) -> str:
        """URL of the running server for ``key`` (started, or restarted after a crash, here)."""
        return self._pool.endpoint(key, alias)

    def check(self, key: str) -> None:
        self._pool.check(key)

    def alive(self, key: str) -> bool:
        return key in self._pool.running()

    def pid(self, key: str) -> int | None:
        """The server process id (tests check that a node's actors share one)."""
        server = self._pool.running().get(key)
        return server.pid if server is not None else None

    def close(self) -> None:
        self._pool.close()


class _NodeServerHandle:
    """Stands in an episode actor's local-server pool for the node's shared server."""

    def __init__(self, actor: Any, model: LocalModel):
        self._actor = actor
        self._model = model

    def ensure_running(self) -> str:
        ray = _ray()
        return ray.get(self._actor.endpoint.remote(self._model.key, self._model.alias))

    def check(self) -> None:
        _ray().get(self._actor.check.remote(self._model.key))

    def alive(self) -> bool:
        return bool(_ray().get(self._actor.alive.remote(self._model.key)))

    def stop(self) -> None:
        """The node's server outlives this actor: the driver stops it at the end of the run."""


class EpisodeWorker:
    """The body of an episode actor: one environment, opened on first use, one episode at a time."""

    def __init__(self, make_env: Callable[[], Environment]):
        self._make_env = make_env
        self._env: Environment | None = None
        self._work: Callable[[Environment, Any], dict[str, Any]] | None = None

    def node(self) -> str:
        """The id of the node this actor runs on (answers once the actor is placed and started)."""
        return _ray().get_runtime_context().get_node_id()

    def attach_models(self, server: Any, models: Sequence[LocalModel]) -> None:
        """Route this process's embedded-model requests to the node's shared server."""
        from stateflow.backends.local import default_pool

        pool = default_pool()
        for m in models:
            pool.attach(m.key, _NodeServerHandle(server, m))
            # Start the node's server now, before this actor's first episode (the first actor
            # on a node pays the model load here, not inside an episode).
            pool.endpoint(m.key, m.alias)

    def bind(self, work: Callable[[Environment, Any], dict[str, Any]]) -> None:
        self._work = work

    def run(self, job: Any) -> dict[str, Any]:
        if self._work is None:
            raise RuntimeError("EpisodeWorker.run before bind: the executor binds the work function first")
        if self._env is None:
            self._env = self._make_env()
        return self._work(self._env, job)

    def pid(self) -> int:
        return os.getpid()

    def close(self) -> None:
        env, self._env = self._env, None
        if env is not None:
            env.close()


@dataclass(frozen=True)
class _Pending:
    """An episode waiting for (or running on) an actor.

    ``attempt`` counts the deaths this episode is known to have caused. ``alone`` asks for an
    actor with nothing else queued: after a crash with several episodes in flight, the driver
    cannot always tell which one was running (a finished episode's result can die with the
    process before it is sent), so each suspect runs alone once and a crash then is its own.
    """

    job: Any
    attempt: int = 0
    alone: bool = False


@dataclass
class _Slot:
    """One actor as the driver sees it: starting (waiting for ``ready``), then running episodes.

    ``inflight`` maps each submitted episode's ObjectRef to its :class:`_Pending`, oldest first: an
    actor runs its calls in submission order, so the first is running and the rest wait.
    """

    actor: Any
    ready: Any | None  # ObjectRef of node() while starting
    node: str | None = None
    inflight: dict[Any, _Pending] = field(default_factory=dict)


class RayExecutor:
    """``workers`` Ray actors, each with its own environment, spread over the cluster's nodes.

    Args:
        workers: number of actors (episodes run at once).
        make_env: opens one environment; shipped to every actor (it must pickle with cloudpickle).
        address: ``None`` starts a local Ray instance for this executor and stops it in
            :meth:`close`; ``"auto"`` or ``"ray://HOST:PORT"`` (or a GCS address) joins an existing
            cluster, which is left running. If this process is already connected to Ray (tests,
            notebooks), that connection is used and kept.
        models: embedded models to serve once per node (see :func:`local_models`).
        num_cpus: Ray CPU resources each actor asks for (placement only; not a CPU limit).
        max_retries: how often an episode lost with its actor runs again elsewhere.
        start_timeout_s: how long to wait for at least one actor to start before giving up.
        prefetch: episodes queued on each actor at once (2 hides the driver round trip; a
            Ctrl-C takes back the ones that have not started).
    """

    def __init__(
        self,
        workers: int,
        make_env: Callable[[], Environment],
        *,
        address: str | None = None,
        models: Sequence[LocalModel] = (),
        num_cpus: float = 1.0,
        max_retries: int = 1,
        start_timeout_s: float = 300.0,
        prefetch: int = 2,
    ):
        if workers < 1:
            raise ValueError(f"workers must be >= 1, got {workers}")
        if prefetch < 1:
            raise ValueError(f"prefetch must be >= 1, got {prefetch}")
        if max_retries < 0:
            raise ValueError(f"max_retries must be >= 0, got {max_retries}")
        ray = _ray()
        self.workers = workers
        self.models = tuple(models)
        self.num_cpus = num_cpus
        self.max_retries = max_retries
        self.prefetch = prefetch
        self.start_timeout_s = start_timeout_s
        self.interrupted = False
        self.replaced = 0  # actors replaced after dying (for tests and logs)
        self.retried: list[Any] = []  # jobs sent again after their actor died (blamed or suspected)
        self.placements: list[str] = []  # node id of every actor that started, in start order
        self._stopping = False
        self._owns_ray = False
        if not ray.is_initialized():
            self._owns_ray = True
            if address is None:
                # A private instance for this run: loopback only, no dashboard, no usage report.
                os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
                ray.init(
                    # "local": never attach to another cluster this machine happens to run.
                    address="local",
                    num_cpus=max(1, int(workers * num_cpus + 0.999)),
                    include_dashboard=False,
                    _node_ip_address="127.0.0.1",
                    namespace=_NAMESPACE,
                    log_to_driver=False,
                    configure_logging=False,
                )
            else:
                ray.init(address=address, namespace=_NAMESPACE, log_to_driver=False)
        self._ray = ray
        self._actor_cls = ray.remote(EpisodeWorker)
        self._server_cls = ray.remote(NodeModelServer)
        self._env_ref = _put(ray, make_env, "the environment factory")
        self._slots: list[_Slot] = []
        self._servers: dict[str, Any] = {}  # node id -> NodeModelServer handle (owned by the driver)
        for _ in range(workers):
            self._slots.append(self._start_actor())

    # -- actors ---------------------------------------------------------------------------------

    def _start_actor(self) -> _Slot:
        actor = self._actor_cls.options(num_cpus=self.num_cpus, scheduling_strategy="SPREAD").remote(self._env_ref)
        return _Slot(actor, actor.node.remote())

    def _server_for(self, node: str) -> Any:
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        server = self._servers.get(node)
        if server is None:
            # Owned by the driver, not by an episode actor: it must outlive any single actor.
            job = self._ray.get_runtime_context().get_job_id()  # one per run: never another driver's
            server = self._server_cls.options(
                name=f"stateflow-llm-{job}-{node}",
                get_if_exists=True,
                num_cpus=0,
                scheduling_strategy=NodeAffinitySchedulingStrategy(node_id=node, soft=False),
            ).remote()
            self._servers[node] = server
        return server

    def _discard(self, slot: _Slot) -> None:
        self._slots.remove(slot)
        try:
            self._ray.kill(slot.actor, no_restart=True)
        except Exception as err:  # already gone with its node
            log.debug("kill of a dead actor failed: %s", err)

    def node_servers(self) -> dict[str, Any]:
        """The per-node model server actors started so far, by node id."""
        return dict(self._servers)

    # -- the run --------------------------------------------------------------------------------

    def start_models(self, models: Any) -> None:
        """Nothing to do in the driver: each node's model server is started when the first
        episode actor on that node attaches to it (:meth:`EpisodeWorker.attach_models`), before
        that actor's first episode. ``models`` were given at construction."""

    def run(
        self,
        jobs: Iterable[J],
        work: Callable[[Environment, J], dict[str, Any]],
        on_interrupt: Callable[[], None] | None = None,
        lane: Callable[[J], Hashable] | None = None,
    ) -> Iterator[dict[str, Any]]:
        del lane  # actors take jobs as they free up; each node's server has one cache anyway
        ray = self._ray
        lost_errors = _lost_errors()
        work_ref = _put(ray, work, "the episode function")
        queue: deque[_Pending] = deque(_Pending(job) for job in jobs)
        lost: list[J] = []
        last_cause = ""
        no_actor_since: float | None = None

        def dispatch() -> None:
            # Each actor holds up to ``prefetch`` episodes so it starts the next one without
            # waiting for a round trip to the driver; a suspect (``alone``) gets an idle actor.
            for slot in self._slots:
                while slot.ready is None and len(slot.inflight) < self.prefetch and queue and not self._stopping:
                    busy = bool(slot.inflight) and (queue[0].alone or next(iter(slot.inflight.values())).alone)
                    if busy:
                        break
                    pending = queue.popleft()
                    slot.inflight[slot.actor.run.remote(pending.job)] = pending
                    if pending.alone:
                        break

        def actor_died(slot: _Slot, err: BaseException) -> list[dict[str, Any]]:
            """Requeue a dead actor's episodes; returns the records of those that had finished.

            The driver may see the crash before it has read the results of calls that completed
            just before it (``ray.wait`` returns refs in no particular order), so each call is
            asked for its result first.
            """
            nonlocal last_cause
            last_cause = f"{type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}"
            finished: list[dict[str, Any]] = []
            unfinished: list[_Pending] = []
            for ref, pending in slot.inflight.items():
                try:
                    finished.append(ray.get(ref, timeout=30))
                except (*lost_errors, ray.exceptions.GetTimeoutError, ray.exceptions.TaskCancelledError):
                    unfinished.append(pending)
                except ray.exceptions.RayTaskError as task_err:  # that episode's own code raised
                    raise task_err.as_instanceof_cause() from None
            if len(unfinished) == 1:
                # The only episode without a result was running when the actor died: it uses up
                # an attempt.
                culprit = unfinished[0]
                if culprit.attempt + 1 <= self.max_retries:
                    queue.appendleft(_Pending(culprit.job, culprit.attempt + 1))
                    self.retried.append(culprit.job)
                else:
                    lost.append(culprit.job)
            else:
                # Several without a result: the first may have finished and lost its result with
                # the process, so none is blamed yet; each runs again alone.
                for pending in reversed(unfinished):  # keep their order at the queue's head
                    queue.appendleft(_Pending(pending.job, pending.attempt, alone=True))
                    self.retried.append(pending.job)
            slot.inflight.clear()
            self._discard(slot)
            if not self._stopping and queue:
                self._slots.append(self._start_actor())
                self.replaced += 1
            return finished

        def interrupt() -> None:
            self.interrupted = True
            self._stopping = True
            for slot in self._slots:  # episodes queued on an actor have not started: take them back
                for ref in list(slot.inflight)[1:]:
                    ray.cancel(ref)
            if on_interrupt is not None:
                on_interrupt()

        while True:
            dispatch()
            running = {ref: s for s in self._slots for ref in s.inflight}
            starting = {s.ready: s for s in self._slots if s.ready is not None} if not self._stopping else {}
            if not running and (self._stopping or not queue):
                break
            if not running and not starting:
                raise StateFlowError("no Ray worker left to run episodes")  # cannot happen: actor_died replaces
            if running:
                no_actor_since = None
            elif no_actor_since is None:
                no_actor_since = time.monotonic()
            elif time.monotonic() - no_actor_since > self.start_timeout_s:
                raise StateFlowError(
                    f"no Ray worker started within {self.start_timeout_s:.0f} s; does the cluster have a node "
                    f"with {self.num_cpus} free CPU(s)? (ray status shows the resources)"
                )
            try:
                # A short timeout keeps Ctrl-C responsive while waiting.
                done, _ = ray.wait([*running, *starting], num_returns=1, timeout=0.5)
            except KeyboardInterrupt:
                if self._stopping:
                    raise
                interrupt()
                continue
            for ref in done:
                if ref in starting:
                    slot = starting[ref]
                    slot.ready = None
                    try:
                        slot.node = ray.get(ref)
                        self.placements.append(slot.node)
                        if self.models:
                            ray.get(slot.actor.attach_models.remote(self._server_for(slot.node), self.models))
                        ray.get(slot.actor.bind.remote(work_ref))
                    except lost_errors as err:
                        if getattr(err, "actor_init_failed", False):  # would fail the same way everywhere
                            raise StateFlowError(f"a Ray episode worker could not start: {err}") from err
                        actor_died(slot, err)  # nothing was submitted to it yet
                    continue
                slot = running[ref]
                if ref not in slot.inflight:  # already requeued with its dead actor
                    continue
                try:
                    record = ray.get(ref)
                except ray.exceptions.TaskCancelledError:
                    slot.inflight.pop(ref)  # taken back after Ctrl-C: the next run does it
                    continue
                except lost_errors as err:
                    yield from actor_died(slot, err)
                    continue
                except ray.exceptions.RayTaskError as err:
                    raise err.as_instanceof_cause() from None
                slot.inflight.pop(ref)
                yield record
        if lost:
            raise EpisodesLostError(lost, last_cause)

    def stop(self) -> None:
        self._stopping = True

    def close(self) -> None:
        """Close every actor's environment, stop the node model servers, release Ray."""
        ray = self._ray
        slots, self._slots = self._slots, []
        closing = [s.actor.close.remote() for s in slots if s.ready is None]
        if closing:
            ray.wait(closing, num_returns=len(closing), timeout=60)
        servers, self._servers = list(self._servers.values()), {}
        if servers:
            ray.wait([s.close.remote() for s in servers], num_returns=len(servers), timeout=60)
        for handle in [s.actor for s in slots] + servers:
            try:
                ray.kill(handle, no_restart=True)
            except Exception as err:
                log.debug("kill at close failed: %s", err)
        if self._owns_ray:
            ray.shutdown()
            self._owns_ray = False


def ray_executor_factory(
    address: str | None, assignment: Any | None = None, **options: Any
) -> Callable[[int, Callable[[], Environment]], RayExecutor]:
    """The ``executor_factory`` for :func:`stateflow.tasks.harness.runner.evaluate` (``stateflow run --executor ray``).

    Args:
        address: see :class:`RayExecutor` (``None``: a local Ray instance for the run).
        assignment: the run's models; its embedded models are served once per node (``None``
            for the oracle policy, which uses no model).
        **options: further :class:`RayExecutor` arguments (``num_cpus``, ``max_retries`` ...).
    """
    models = local_models(assignment) if assignment is not None else ()

    def factory(workers: int, make_env: Callable[[], Environment]) -> RayExecutor:
        return RayExecutor(workers, make_env, address=address, models=models, **options)

    return factory

"""Threads that serve awaited run after run: :class:`RunThreads`.

:func:`~stateflow.live.arun` runs each run on an OS thread (AutoGen 0.14's reply path is
synchronous; see :mod:`stateflow.live`). Starting a thread costs the event loop's thread about
0.1 ms of CPU under the interpreter lock, and a new thread's start-up more; with 50 runs awaited at
once that was about a tenth of their CPU (py-spy ``--gil``, ``scripts/bench_live.py``). Runs
that share pools (``http=``) therefore take an idle thread kept by the pools, as they take idle
agents (:mod:`stateflow.episode.pool`), and a thread goes back to waiting when its run ends.

Guarantees:

* a thread runs one run at a time; there is no limit on how many run at once (a run waiting for
  its model holds its thread, as before), so no run ever waits for a thread;
* the threads are daemon threads, as a run's own thread was, and one that waited ``idle_s``
  seconds without a run ends: nothing outlives the pools for long;
* while it serves a run a thread is named ``stateflow-run-...`` (as a run's own thread is), and
  ``stateflow-idle`` while it waits, so leak checks still see a run that did not end.

The pool is a dependency, not run state: it lives in the shared
:class:`~stateflow.backends.http.HttpClients` (``HttpClients.shared``).

Example:
    >>> import threading
    >>> threads = RunThreads()
    >>> done = threading.Event()
    >>> threads.submit(done.set, name="stateflow-run-example")
    >>> done.wait(5)
    True
    >>> threads.started
    1
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable

__all__ = ["IDLE_NAME", "RunThreads"]

IDLE_NAME = "stateflow-idle"  # the name of a thread waiting for its next run


class _Worker:
    """One thread: runs the jobs handed to it, then waits in its owner's idle list."""

    def __init__(self, owner: RunThreads):
        self._owner = owner
        self.jobs: queue.SimpleQueue[tuple[Callable[[], None], str]] = queue.SimpleQueue()
        self.thread = threading.Thread(target=self._serve, name=IDLE_NAME, daemon=True)

    def _serve(self) -> None:
        owner = self._owner
        job = self.jobs.get()
        while True:
            fn, name = job
            self.thread.name = name
            try:
                fn()
            finally:
                self.thread.name = IDLE_NAME
                # An idle thread keeps no reference to its last run (or to that run's result).
                job = fn = None  # type: ignore[assignment]
            with owner.lock:
                owner.idle.append(self)
            try:
                job = self.jobs.get(timeout=owner.idle_s)
            except queue.Empty:
                with owner.lock:
                    if self in owner.idle:  # nobody took it: end
                        owner.idle.remove(self)
                        return
                # Taken just as the wait ran out: its job is being handed over.
                job = self.jobs.get()


class RunThreads:
    """Idle daemon threads for runs; thread-safe.

    Args:
        idle_s: how long a thread waits for another run before it ends.

    Attributes:
        started: threads started so far (a run found none idle).
        idle: the threads waiting now (guarded by ``lock``).
    """

    def __init__(self, idle_s: float = 30.0):
        self.idle_s = idle_s
        self.started = 0
        self.idle: list[_Worker] = []
        self.lock = threading.Lock()

    def submit(self, fn: Callable[[], None], *, name: str) -> None:
        """Run ``fn()`` on an idle thread, or on a new one when none is idle.

        Args:
            fn: the job; it must not raise (an error would end its thread: ``_Run`` keeps
                every error for its consumer).
            name: the thread's name while it runs ``fn``.
        """
        with self.lock:
            worker = self.idle.pop() if self.idle else None
            if worker is None:
                self.started += 1
        if worker is None:
            worker = _Worker(self)
            worker.jobs.put((fn, name))
            worker.thread.start()
        else:
            worker.jobs.put((fn, name))

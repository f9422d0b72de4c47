"""kill -9 at random moments: every continued thread ends exactly as an uninterrupted run, and
no model call that finished before the thread's last checkpoint is ever sent again.

The flow has every output type, a deferred ``Human`` among them: a thread pauses on its
question, and the next process answers it (``resume``), so kills land before the question,
while the thread is paused (the answering process dies before or while recording the answer)
and after the answer (the model call that reads it)."""

from __future__ import annotations

import contextlib
import functools
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import pytest
from stateflow.sf_agent import SFAgentView

from stateflow.checkpoint import Checkpoint, MemoryCheckpointer, SQLiteCheckpointer
from stateflow.runtime import resume, run
from stateflow.testing.fake_openai import FakeOpenAIServer
from tests.core.durable.child import PAUSED
from tests.core.durable.flows import fake_profile, long_flow, request_key, responder

ROOT = Path(__file__).resolve().parents[3]
KILLS_PER_VIEW = 20
# Each process is killed at a random moment measured in progress, not in seconds (which depend on
# the machine's load): after a random number of model calls answered (0 to all of a run's), plus
# a random delay of up to KILL_JITTER_S, so kills land in calls, in tools, in checkpoint writes.
KILL_JITTER_S = 0.08
LATENCY_S = 0.03
CALLS_BEFORE_QUESTION = 10  # Draft, 3 x Edit, 3 x (Review + its judge); Polish follows the answer


def _answer(thread: str) -> str:
    return f"approved for {thread}"


class _Log:
    """When the fake server answered each call (just before sending the reply), by request key;
    and how many calls it has received (each is answered LATENCY_S later)."""

    def __init__(self) -> None:
        self.lock = threading.Condition()
        self.answered: list[tuple[float, str]] = []
        self.asked = 0
        self.what: dict[str, str] = {}

    def responder(self, model, messages, body):
        with self.lock:
            self.asked += 1
            self.lock.notify_all()
        time.sleep(LATENCY_S)  # a model that takes its time: kills land in calls
        reply = responder(model, messages, body)
        key = request_key(body)
        with self.lock:
            self.what[key] = f"{model} {len(messages)} {json.dumps(messages[-2:])[-300:]}"
            self.answered.append((time.time(), key))
            self.lock.notify_all()
        return reply

    def wait_for(self, count: int, running) -> None:
        """Until ``count`` calls have been answered in all, or ``running()`` is false."""
        with self.lock:
            while len(self.answered) < count and running():
                self.lock.wait(0.01)

    def wait_asked(self, count: int, running) -> None:
        """Until ``count`` calls have been received in all, or ``running()`` is false."""
        with self.lock:
            while self.asked < count and running():
                self.lock.wait(0.01)


class _Zygote:
    """The process that forks one process per job (tests/core/durable/child.py)."""

    def __init__(self, stderr: Path) -> None:
        self.stderr = stderr
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.core.durable.child"],
            cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=stderr.open("w"),
            text=True,
        )
        assert self.proc.stdout.readline().strip() == "ready", self.errors()
        self.exits: dict[int, int] = {}
        self._started: list[int] = []
        self._lines = threading.Condition()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            word, pid, *code = line.split()
            with self._lines:
                if word == "started":
                    self._started.append(int(pid))
                else:
                    self.exits[int(pid)] = int(code[0])
                self._lines.notify_all()

    def errors(self) -> str:
        return self.stderr.read_text()

    def start(self, **job: str) -> int:
        """Fork a process for ``job``; its pid."""
        self.proc.stdin.write(json.dumps(job) + "\n")
        self.proc.stdin.flush()
        with self._lines:
            assert self._lines.wait_for(lambda: self._started, timeout=60), self.errors()
            return self._started.pop()

    def wait(self, pid: int, timeout: float = 120) -> int:
        with self._lines:
            assert self._lines.wait_for(lambda: pid in self.exits, timeout=timeout), self.errors()
            return self.exits[pid]

    def close(self) -> None:
        self.proc.stdin.close()
        self.proc.wait(timeout=30)


def _latest(db: Path, thread: str) -> Checkpoint | None:
    store = SQLiteCheckpointer(db)
    try:
        return store.latest(thread)
    finally:
        store.close()


def _phase(latest: Checkpoint | None) -> str:
    """Where a killed thread stood: before its question, paused on it, or after the answer."""
    if latest is not None and latest.status.value == "paused":
        return "paused"
    if latest is not None and any(m["kind"] == "human" for m in latest.payload["history"]):
        return "answered"
    return "before the question"


def _uninterrupted(url: str, view: str, thread: str):
    """The same thread run in one process: to the question, then answered at once."""
    cp, flow = MemoryCheckpointer(), long_flow(url, defer=True, approve_first=True)
    common = {"models": fake_profile(url), "view": SFAgentView() if view == "sf_agent" else None, "telemetry": False}
    paused = run(flow, thread, checkpointer=cp, thread_id=thread, **common)
    assert paused.status == "paused" and paused.pending.state == "Approve"
    return resume(thread, _answer(thread), checkpointer=cp, flow=flow, **common)


@pytest.mark.parametrize("view", ["stateflow", "sf_agent"])
def test_threads_killed_at_random_moments_resume_to_the_uninterrupted_result(tmp_path, view) -> None:
    log = _Log()
    rng = random.Random(f"kill-{view}")
    db = tmp_path / "threads.db"
    threads: list[str] = []
    kills, killed_at, phases = 0, [], Counter()
    saved: list[tuple[float, set[str]]] = []  # per process: the last checkpoint's time, the calls before it
    with FakeOpenAIServer(log.responder) as srv:
        zygote = _Zygote(tmp_path / "zygote.err")
        try:

            def job(thread: str) -> int:
                return zygote.start(url=srv.url, db=str(db), view=view, thread=thread, answer=_answer(thread))

            while kills < KILLS_PER_VIEW:
                if not threads or ((latest := _latest(db, threads[-1])) and latest.status.value == "finished"):
                    threads.append(f"T{len(threads)}")
                    latest = None
                pid = job(threads[-1])
                running = functools.partial(lambda p: p not in zygote.exits, pid)
                if latest is not None and latest.status.value == "paused":
                    # the answering process records the answer, then makes the one call that follows:
                    # kill it early (the answer maybe not yet saved) or while that call is answered
                    if rng.random() < 0.5:
                        log.wait_asked(log.asked + 1, running)
                        time.sleep(rng.uniform(0.0, LATENCY_S))
                    else:
                        time.sleep(rng.uniform(0.0, KILL_JITTER_S))
                else:
                    log.wait_for(len(log.answered) + rng.randint(0, CALLS_BEFORE_QUESTION), running)
                    time.sleep(rng.uniform(0.0, KILL_JITTER_S))
                if pid not in zygote.exits:
                    with contextlib.suppress(ProcessLookupError):  # it may end (and be reaped) just now
                        os.kill(pid, signal.SIGKILL)
                code = zygote.wait(pid)
                assert code in (0, PAUSED, -signal.SIGKILL), zygote.errors()
                latest = _latest(db, threads[-1])
                if code == -signal.SIGKILL:
                    kills += 1
                    killed_at.append(-1 if latest is None else latest.step)
                    phases[_phase(latest)] += 1
                if latest is not None:  # calls answered before the last checkpoint must never be sent again
                    saved.append((latest.created_at, {key for at, key in log.answered if at <= latest.created_at}))
            while (latest := _latest(db, threads[-1])) is None or latest.status.value != "finished":
                assert zygote.wait(job(threads[-1])) in (0, PAUSED), zygote.errors()
        finally:
            zygote.close()
        times, sent = [at for at, _ in log.answered], [key for _, key in log.answered]
        log.answered.clear()
        expected = {t: _uninterrupted(srv.url, view, t) for t in threads}
        reference = [key for _, key in log.answered]
    answered = list(zip(times, sent, strict=True))
    repeated = [key for when, before in saved for at, key in answered if at > when and key in before]
    assert repeated == [], f"{len(repeated)} finished calls were sent again: {[log.what[k] for k in repeated]}"
    extra = [log.what.get(k, k) for k in set(sent) - set(reference)]
    missing = [log.what.get(k, k) for k in set(reference) - set(sent)]
    # the reference runs' calls and no other (some sent twice after kills)
    assert set(sent) == set(reference), (extra, missing)
    for thread, result in expected.items():
        done = _latest(db, thread)
        assert done.status.value == "finished" and result.status == "finished", thread
        history = [(m["name"], m["state"], m["content"]) for m in done.payload["history"]]
        assert history == [(m.name, m.state, m.content) for m in result.history], thread
        assert ("editor", "Approve", _answer(thread)) in history  # the next process's answer, read by Polish
        assert [t["target"] for t in done.payload["transitions"]] == result.path[1:]
    # the kills landed at several different points of the runs, not all before a first step, and
    # before the question, while paused and after the answer
    assert len({step for step in killed_at if step >= 0}) >= 3, killed_at
    assert set(phases) == {"before the question", "paused", "answered"}, phases
    print(
        f"\n{view}: {kills} kills over {len(threads)} threads at steps {killed_at} ({dict(phases)}); "
        f"{len(sent)} calls sent for {len(reference)} needed; finished calls re-sent: 0"
    )

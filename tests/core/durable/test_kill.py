"""kill -9 at random moments: every continued thread ends exactly as an uninterrupted run, and
no model call that finished before the thread's last checkpoint is ever sent again."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from stateflow.sf_agent import SFAgentView

from stateflow.checkpoint import Checkpoint, SQLiteCheckpointer
from stateflow.runtime import run
from stateflow.testing.fake_openai import FakeOpenAIServer
from tests.core.durable.flows import fake_profile, long_flow, request_key, responder

ROOT = Path(__file__).resolve().parents[3]
KILLS_PER_VIEW = 10  # two views: 20 kills in all
# Each child is killed at a random moment measured in progress, not in seconds (which depend on
# the machine's load): after a random number of model calls answered (0 to all of a run's), plus
# a random delay of up to KILL_JITTER_S, so kills land in calls, in tools, in checkpoint writes.
KILL_JITTER_S = 0.08


class _Log:
    """When the fake server answered each call (just before sending the reply), by request key."""

    def __init__(self) -> None:
        self.lock = threading.Condition()
        self.answered: list[tuple[float, str]] = []
        self.what: dict[str, str] = {}

    def responder(self, model, messages, body):
        reply = responder(model, messages, body)
        key = request_key(body)
        with self.lock:
            self.what[key] = f"{model} {len(messages)} {json.dumps(messages[-2:])[-300:]}"
            self.answered.append((time.time(), key))
            self.lock.notify_all()
        return reply

    def wait_for(self, count: int, child: subprocess.Popen) -> None:
        """Until ``count`` calls have been answered in all, or the child has exited."""
        with self.lock:
            while len(self.answered) < count and child.poll() is None:
                self.lock.wait(0.05)


def _child(url: str, db: Path, view: str, thread: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "tests.core.durable.child", url, str(db), view, thread],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _latest(db: Path, thread: str) -> Checkpoint | None:
    store = SQLiteCheckpointer(db)
    try:
        return store.latest(thread)
    finally:
        store.close()


@pytest.mark.parametrize("view", ["stateflow", "sf_agent"])
def test_threads_killed_at_random_moments_resume_to_the_uninterrupted_result(tmp_path, view) -> None:
    log = _Log()
    rng = random.Random(f"kill-{view}")
    db = tmp_path / "threads.db"
    threads: list[str] = []
    kills, killed_at = 0, []
    saved: list[tuple[float, set[str]]] = []  # per kill: the last checkpoint's time, the calls before it
    with FakeOpenAIServer(log.responder, latency_s=0.03) as srv:
        while kills < KILLS_PER_VIEW:
            if not threads or ((latest := _latest(db, threads[-1])) and latest.status.value == "finished"):
                threads.append(f"T{len(threads)}")
            child = _child(srv.url, db, view, threads[-1])
            assert child.stdout.readline().strip() == "ready", child.stderr.read()
            log.wait_for(len(log.answered) + rng.randint(0, 11), child)
            time.sleep(rng.uniform(0.0, KILL_JITTER_S))
            if child.poll() is None:
                os.kill(child.pid, signal.SIGKILL)
                kills += 1
            _, err = child.communicate()
            assert child.returncode in (0, -signal.SIGKILL), err
            latest = _latest(db, threads[-1])
            if child.returncode != 0:
                killed_at.append(-1 if latest is None else latest.step)
            if latest is not None:  # calls answered before the last checkpoint must never be sent again
                saved.append((latest.created_at, {key for at, key in log.answered if at <= latest.created_at}))
        if (latest := _latest(db, threads[-1])) is None or latest.status.value != "finished":
            last = _child(srv.url, db, view, threads[-1])
            _, err = last.communicate(timeout=120)
            assert last.returncode == 0, err
        times, sent = [at for at, _ in log.answered], [key for _, key in log.answered]
        log.answered.clear()
        expected = {
            t: run(
                long_flow(srv.url),
                t,
                models=fake_profile(srv.url),
                view=SFAgentView() if view == "sf_agent" else None,
                telemetry=False,
            )
            for t in threads
        }
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
        assert done.status.value == "finished", thread
        history = [(m["name"], m["state"], m["content"]) for m in done.payload["history"]]
        assert history == [(m.name, m.state, m.content) for m in result.history], thread
        assert [t["target"] for t in done.payload["transitions"]] == result.path[1:]
    # the kills landed at several different points of the runs, not all before a first step
    assert len({step for step in killed_at if step >= 0}) >= 3, killed_at
    print(
        f"\n{view}: {kills} kills over {len(threads)} threads at steps {killed_at}; "
        f"{len(sent)} calls sent for {len(reference)} needed; finished calls re-sent: 0"
    )

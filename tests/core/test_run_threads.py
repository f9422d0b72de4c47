"""RunThreads reuses idle threads without ever making a run wait, names them by what they do and
ends them when idle; arun on shared pools runs on them."""

from __future__ import annotations

import asyncio
import gc
import threading
import time
import weakref

from stateflow import LLM, Flow, ModelProfile, Prompt, State, Transition
from stateflow.backends.http import HttpClients
from stateflow.live import arun
from stateflow.run_threads import IDLE_NAME, RunThreads
from stateflow.testing.fake_openai import FakeOpenAIServer


def _wait_until(check, timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while not check() and time.monotonic() < deadline:
        time.sleep(0.01)
    return check()


def test_jobs_one_after_another_share_one_thread_named_by_its_job():
    threads = RunThreads()
    seen: list[tuple[threading.Thread, str]] = []
    for i in range(3):
        done = threading.Event()

        def job(i: int = i, done: threading.Event = done) -> None:
            seen.append((threading.current_thread(), threading.current_thread().name))
            done.set()

        threads.submit(job, name=f"stateflow-run-job{i}")
        assert done.wait(5)
        assert _wait_until(lambda: len(threads.idle) == 1)  # back to waiting
    assert threads.started == 1
    assert len({t for t, _ in seen}) == 1
    assert [name for _, name in seen] == ["stateflow-run-job0", "stateflow-run-job1", "stateflow-run-job2"]
    assert seen[0][0].name == IDLE_NAME and seen[0][0].daemon


def test_no_job_waits_for_a_thread_and_idle_threads_end():
    threads = RunThreads(idle_s=0.2)
    together = threading.Barrier(6, timeout=5)  # six jobs that only finish when all six run
    used: list[threading.Thread] = []
    for i in range(6):
        threads.submit(lambda: (used.append(threading.current_thread()), together.wait()), name=f"stateflow-run-{i}")
    assert _wait_until(lambda: len(threads.idle) == 6)
    assert threads.started == 6 and not together.broken
    assert _wait_until(lambda: not any(t.is_alive() for t in used))  # 0.2 s idle: they end
    assert threads.idle == []
    done = threading.Event()
    threads.submit(done.set, name="stateflow-run-after")  # a new thread after they ended
    assert done.wait(5) and threads.started == 7


def test_awaited_runs_on_shared_pools_reuse_threads_and_leave_no_run_thread():
    ask = State("Ask", Prompt("Hi."), LLM())
    end = State("End", final=True)
    flow = Flow("hi", initial=ask, transitions=[Transition(ask, end)])

    async def batch(url: str, http: HttpClients, tag: str) -> list:
        profile = ModelProfile(name="p", model="m", base_url=url, api_key_env=None)
        return await asyncio.gather(*[arun(flow, f"{tag}{i}", models=profile, http=http) for i in range(4)])

    with FakeOpenAIServer(lambda m, msgs, b: "hello", latency_s=0.2) as srv, HttpClients() as http:
        first = asyncio.run(batch(srv.url, http, "a"))
        threads = http.shared(RunThreads, RunThreads)
        assert _wait_until(lambda: len(threads.idle) == 4)
        second = asyncio.run(batch(srv.url, http, "b"))
        assert threads.started == 4  # the second batch ran on the first batch's threads
    assert [r.history[0].content for r in first + second] == [f"a{i}" for i in range(4)] + [f"b{i}" for i in range(4)]
    assert _wait_until(lambda: not [t for t in threading.enumerate() if t.name.startswith("stateflow-run-")])


def test_an_idle_thread_keeps_nothing_of_its_last_run():
    class Result:
        pass

    threads = RunThreads()
    result = Result()
    kept = weakref.ref(result)
    done = threading.Event()
    threads.submit(lambda r=result: done.set(), name="stateflow-run-kept")
    del result
    assert done.wait(5) and _wait_until(lambda: len(threads.idle) == 1)
    gc.collect()
    assert kept() is None  # the waiting thread holds neither the job nor what it referenced

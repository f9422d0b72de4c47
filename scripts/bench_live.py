#!/usr/bin/env python
"""Benchmark streamed runs, asyncio and ``stateflow serve`` (issue #44).

Usage::

    .venv/bin/python scripts/bench_live.py [--part all|events|asyncio|floor|serve|soak|ttft] [--runs 50]
    .venv/bin/python scripts/bench_live.py --part serve --postgres auto --servers 2   # docs/deploy.md
        [--latency 0.2] [--clients 50] [--requests 500] [--model local-small] [--json FILE]
        [--soak-runs 5000] [--soak-clients 8] [--soak-warmup 500] [--soak-a2a-every 5]
        [--soak-max-finished-tasks N]
    # the embedded-model part needs the shared model lock:
    flock /work/model.lock .venv/bin/python scripts/bench_live.py --part ttft

What it measures (every ratio is against a baseline measured in the same process):

* **events**: the cost of the event stream per transition. A scripted (in-process, no HTTP) flow
  of 200 transitions is run alternately with and without an ``on_event`` sink that keeps every
  event; reported: (median with - median without) / transitions, in ms (target < 0.2).
* **asyncio**: ``--runs`` runs of a two-state flow against the fake OpenAI server (in its own
  process) with ``--latency`` seconds per call. Interleaved ``reps`` times: one ``arun`` (on warm
  pools), then ``asyncio.gather`` of ``--runs`` ``arun`` calls on four kinds of pools:
  ``unshared`` (AutoGen's client and the agents built for every run), ``no_agent_pool`` (the
  client shared between runs, the agents built per run: before the agent pool),
  ``cold_pool`` (new pools after one warm-up run: the client is built and one agent set waits,
  so the other runs build theirs) and ``warm_pool`` (the pools of an earlier batch: every run
  takes a prepared agent set, see stateflow.episode.pool); and ``warm_pool_events_to_loop``, the
  warm pool with each run's events handed to the event loop (``astream``, which is how ``arun``
  read its result before it kept the events on the run's thread); and ``warm_pool_baseline``,
  warm shared pools as they were before 2026-11-28 (one httpcore connection pool per endpoint
  instead of stateflow.backends.sharded_transport, a new OS thread per ``arun`` instead of
  stateflow.run_threads), so the day's changes are measured against it in the same process.
  Reported: medians, their ratio to one ``arun``, the process CPU per run of each batch; then
  the same runs one after another (``run``) and on one OS thread each, on the warm pools, as
  ratios to the warm batch, with their process CPU per run; the peak
  number of OS threads during an asyncio batch (``arun`` holds one thread per run in flight:
  AutoGen 0.14 has no asynchronous model client; see stateflow.live); the load average.
* **floor**: the same chat request sent ``--runs`` times at once with no flow at all, by the lean
  client on a thread each (how ``arun`` sends them) and by ``httpx.AsyncClient`` on the event
  loop, interleaved with one request alone; reported: ratios to one, process CPU per call, the
  fake server's CPU per request. What ``asyncio`` cannot go below in one Python process.
* **serve**: ``stateflow serve``'s application under uvicorn on 127.0.0.1, the model the fake
  server (no latency); ``--clients`` concurrent AG-UI clients (httpx, each reading its SSE stream
  to the end) post ``--requests`` runs on new threads in total. Reported: requests per second,
  median and p95 request time, the server process's peak RSS (it runs in a child process, so the
  client's memory is not counted).
* **soak** (not part of ``all``): ``--soak-runs`` runs through the ``stateflow serve`` command
  itself (its own process, a SQLite store, the fake server as its model), ``--soak-clients`` at
  once, every ``--soak-a2a-every``-th an A2A ``message/send``, the rest AG-UI streams. Reported:
  the server's resident memory after ``--soak-warmup`` runs and at the end (target: growth <=
  10 %), its samples and peak, the server's CPU per run after warm-up, failures, the load average.
* **ttft**: the embedded model (``--model``, default ``local-small``): a one-state flow whose LLM
  writes up to 48 tokens, with and without a grammar; each variant run ``--ttft-reps`` times
  alternately streamed (time to the first ``TokenDelta``) and not streamed (the reply's latency).

``--client lean`` runs the asyncio part on ``ModelProfile(client="lean")`` (LeanChatClient).
Last measured (2026-11-28, four runs, load 1.2-3.2): warm pool 1.31-1.56x one ``arun`` at
1.6-2.8 ms CPU per run, against 1.52-1.71x at 2.6-3.9 ms for the baseline pools interleaved in
the same process (lean; 1.34x against 1.59x at load 1.2-1.4); see docs/live.md.
Soak (2026-11-29, 5,000 runs, 8 clients, pinned to one core with ``taskset -c 1``, load 3.1-7.9):
server RSS 211.6 -> 216.9 MiB after 500 warm-up runs (+2.5 %, all 1,000 A2A tasks kept), 18.0 ms
server CPU per run; with ``--soak-max-finished-tasks 100`` 211.8 -> 212.3 MiB (+0.2 %), 15.8 ms;
0 failures; docs/live.md, "Soak".
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import multiprocessing
import os
import socket
import statistics
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

from stateflow import (
    LLM,
    Flow,
    MemoryCheckpointer,
    ModelProfile,
    PostgresCheckpointer,
    Prompt,
    State,
    Tool,
    ToolResult,
    Transition,
    run,
)
from stateflow.backends.http import HttpClients
from stateflow.backends.scripted import ScriptedLLM
from stateflow.conditions import meta_is
from stateflow.emitter import Emitter
from stateflow.episode.pool import AgentPool
from stateflow.events import RunFinished, StepRecorded, TokenDelta
from stateflow.live import arun, astream
from stateflow.run_threads import RunThreads
from stateflow.testing.fake_openai import FakeOpenAIServer

ROOT = Path(__file__).resolve().parent.parent


def _two_state() -> Flow:
    ask = State("Ask", Prompt("Answer."), LLM())
    done = State("Done", final=True)
    return Flow("bench", initial=ask, transitions=[Transition(ask, done)])


def _fake_profile(url: str, client: str = "auto") -> ModelProfile:
    return ModelProfile(name="fake", model="m", base_url=url, api_key_env=None, client=client)


def _reply_done(model: str, messages: list, body: dict) -> str:
    return "done"


def _reply_served(model: str, messages: list, body: dict) -> str:
    return "a served reply of a few words"


def _fake_child(responder: Any, latency: float, urls: Any, stop: Any) -> None:
    with FakeOpenAIServer(responder, latency_s=latency) as srv:
        urls.put(srv.url)
        stop.wait()


class _FakeProcess:
    """The fake OpenAI server in its own process, so its request handling does not share the
    benchmarked process's interpreter lock (a real model server is another process too)."""

    def __init__(self, responder: Any, latency: float = 0.0):
        ctx = multiprocessing.get_context("spawn")
        urls, self._stop = ctx.Queue(), ctx.Event()
        self._proc = ctx.Process(target=_fake_child, args=(responder, latency, urls, self._stop), daemon=True)
        self._proc.start()
        self.url: str = urls.get(timeout=60)

    def __enter__(self) -> _FakeProcess:
        return self

    def cpu_s(self) -> float:
        """The server process's CPU seconds so far (user + system, from /proc)."""
        fields = Path(f"/proc/{self._proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._proc.join(10)


# -- the HTTP floor ------------------------------------------------------------------------------


def bench_floor(runs: int, latency: float, reps: int = 5) -> dict[str, Any]:
    """What 50 concurrent model calls cost with no flow at all: the floor under ``--part asyncio``.

    The same chat request as a run's (system + user message) sent ``runs`` times at once, three
    ways, interleaved ``reps`` times, each against one request alone: the lean client on one
    thread per call (how ``arun`` sends them, on ``HttpClients``' shared pool), and
    ``httpx.AsyncClient`` on the event loop (no threads: what an asynchronous model client would
    give). Reported: medians, ratios to one call, process CPU per call.
    """
    from concurrent.futures import ThreadPoolExecutor

    from stateflow.backends.lean_openai import LeanChatClient

    params = {
        "model": "m",
        "messages": [{"role": "system", "content": "Answer."}, {"role": "user", "content": "q"}],
        "temperature": 0.0,
        "max_tokens": 512,
    }
    with _FakeProcess(_reply_done, latency) as srv, HttpClients() as http:
        lean = LeanChatClient({"model": "m", "base_url": srv.url}, http_client=http.get(srv.url, 60.0))
        url = srv.url + "/chat/completions"

        def threads(n: int) -> None:
            with ThreadPoolExecutor(n) as pool:
                list(pool.map(lambda _: lean.create(dict(params)), range(n)))

        async def on_loop(client: httpx.AsyncClient, n: int) -> None:
            replies = await asyncio.gather(*[client.post(url, json=params) for _ in range(n)])
            assert all(r.status_code == 200 for r in replies)

        def timed(fn: Any) -> tuple[float, float]:
            c0, t0 = time.process_time(), time.perf_counter()
            fn()
            return time.perf_counter() - t0, time.process_time() - c0

        served: list[float] = []  # the server's CPU per call of each threaded batch

        rows: dict[str, list[tuple[float, float]]] = {"one": [], "threads": [], "async": []}
        limits = httpx.Limits(max_connections=runs, max_keepalive_connections=runs)

        async def loop_part(n: int) -> tuple[float, float]:
            async with httpx.AsyncClient(limits=limits, timeout=60.0) as client:
                await on_loop(client, n)  # warm the connections
                c0, t0 = time.process_time(), time.perf_counter()
                await on_loop(client, n)
                return time.perf_counter() - t0, time.process_time() - c0

        threads(runs)  # warm the shared pool's connections
        for _ in range(reps):
            rows["one"].append(timed(lambda: lean.create(dict(params))))
            s0 = srv.cpu_s()
            rows["threads"].append(timed(lambda: threads(runs)))
            served.append((srv.cpu_s() - s0) * 1000 / runs)
            rows["async"].append(asyncio.run(loop_part(runs)))
    one = statistics.median(w for w, _ in rows["one"])
    out: dict[str, Any] = {"runs": runs, "latency_s": latency, "one_call_s": round(one, 4)}
    for kind in ("threads", "async"):
        wall = statistics.median(w for w, _ in rows[kind])
        cpu = statistics.median(c for _, c in rows[kind]) * 1000 / runs
        out[kind] = {"wall_s": round(wall, 4), "ratio_to_one": round(wall / one, 2), "cpu_ms_per_call": round(cpu, 2)}
    # the fake server is Python too: its own CPU per request, serialised under its interpreter
    # lock, is part of the floor (50 x this, on the other core)
    out["server_cpu_ms_per_call"] = round(statistics.median(served), 2)
    out["load_average_after"] = [round(x, 2) for x in os.getloadavg()]
    return out


# -- events --------------------------------------------------------------------------------------


def _count(ctx) -> ToolResult:
    n = ctx.vars.get("n", 0) + 1
    ctx.vars["n"] = n
    return ToolResult(f"n={n}", {"ok": True, "done": n >= ctx.vars["limit"]})


def bench_events(transitions: int = 200, reps: int = 15) -> dict[str, Any]:
    step = State("Step", Prompt("Go."), LLM(), Tool(_count, "count"))
    end = State("End", final=True)
    flow = Flow(
        "events",
        initial=step,
        transitions=[Transition(step, end, when=meta_is("done")), Transition(step, step)],
        max_transitions=transitions + 5,
    )
    profile = ModelProfile(name="s", model="s", provider="scripted", api_key_env=None)

    def once(sink: Any) -> float:
        script = ScriptedLLM(lambda messages, params: "ok")
        t0 = time.perf_counter()
        r = run(flow, "t", models=profile, scripts={"s": script}, vars={"limit": transitions}, on_event=sink)
        elapsed = time.perf_counter() - t0
        assert len(r.transitions) == transitions, (len(r.transitions), r.error)
        return elapsed

    once(None)  # warm-up
    plain, streamed = [], []
    kept: list[Any] = []
    for _ in range(reps):
        plain.append(once(None))
        kept.clear()
        streamed.append(once(kept.append))
    events = len(kept)
    # End to end, the difference is within the run-to-run noise of a shared machine: the
    # fastest of many interleaved runs is compared, and the event path is also timed alone on
    # the records of a real run (what the emitter does per transition: its steps, the
    # transition, the state entered).
    delta_ms = (min(streamed) - min(plain)) * 1000 / transitions
    kept.clear()
    script = ScriptedLLM(lambda messages, params: "ok")
    r = run(flow, "t", models=profile, scripts={"s": script}, vars={"limit": transitions})
    emitter = Emitter(kept.append, r.path[0])
    rounds = 20
    t0 = time.perf_counter()
    for _ in range(rounds):
        for st in r.steps:
            emitter.step(st)
        for tr in r.transitions:
            emitter.transition(tr)
    alone_ms = (time.perf_counter() - t0) * 1000 / (rounds * len(r.transitions))
    return {
        "transitions": transitions,
        "events_per_run": events,
        "run_s_without_min": round(min(plain), 4),
        "run_s_with_min": round(min(streamed), 4),
        "run_s_without_median": round(statistics.median(plain), 4),
        "run_s_with_median": round(statistics.median(streamed), 4),
        "overhead_ms_per_transition_end_to_end": round(delta_ms, 4),
        "event_path_ms_per_transition": round(alone_ms, 4),
        "target_ms": 0.2,
    }


# -- asyncio -------------------------------------------------------------------------------------


class _Unshared(HttpClients):
    """Pools that build AutoGen's client and the agents for every run (as before either was
    shared)."""

    def shared(self, key: Any, build: Any) -> Any:
        return build()


class _Unpooled(HttpClients):
    """Pools that share AutoGen's client between runs but build every run's agents (no
    :class:`~stateflow.episode.pool.AgentPool`: each run gets an empty one of its own)."""

    def shared(self, key: Any, build: Any) -> Any:
        return build() if key is AgentPool else super().shared(key, build)


class _NewThreads(RunThreads):
    """A new thread for every run (how ``arun`` ran before runs on shared pools reused threads)."""

    def submit(self, fn: Any, *, name: str) -> None:
        threading.Thread(target=fn, name=name, daemon=True).start()


class _Baseline(HttpClients):
    """Shared pools as before 2026-11-28: one httpcore pool per endpoint (no ShardedTransport)
    and a new thread per awaited run; the client and the agent pool are shared as usual."""

    def _transport(self) -> dict[str, Any]:
        return {"limits": self._limits}

    def shared(self, key: Any, build: Any) -> Any:
        return super().shared(key, _NewThreads if key is RunThreads else build)


async def _via_astream(flow: Flow, task: str, **kwargs: Any) -> Any:
    """A run's result read from its ``astream`` events (how ``arun`` got it before it kept its
    events on the run's thread)."""
    result = None
    async for event in astream(flow, task, tokens=False, **kwargs):
        if isinstance(event, RunFinished):
            result = event.result
    return result


def _batch(
    flow: Flow, profile: ModelProfile, pools: HttpClients, runs: int, tag: str, how: Any = arun
) -> tuple[float, float]:
    """``runs`` concurrent ``how`` (``arun``) on ``pools``: (wall seconds, process CPU ms per run)."""

    async def gather() -> list[Any]:
        return await asyncio.gather(*[how(flow, f"{tag}{i}", models=profile, http=pools) for i in range(runs)])

    c0, t0 = time.process_time(), time.perf_counter()
    results = asyncio.run(gather())
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    assert all(r.exit_state == "Done" for r in results)
    return wall, cpu * 1000 / runs


def bench_asyncio(runs: int, latency: float, reps: int = 5, client: str = "auto") -> dict[str, Any]:
    flow = _two_state()
    load_before = [round(x, 2) for x in os.getloadavg()]
    with _FakeProcess(_reply_done, latency) as srv, HttpClients() as http, _Baseline() as baseline:
        profile = _fake_profile(srv.url, client)
        run(flow, "warm-up", models=profile, http=http)
        _batch(flow, profile, baseline, runs, "b")  # the baseline's warm agent sets and connections
        peak = [0]
        stop = threading.Event()

        def watch() -> None:
            while not stop.is_set():
                peak[0] = max(peak[0], threading.active_count())
                time.sleep(0.005)

        before = threading.active_count()
        watcher = threading.Thread(target=watch, daemon=True)
        watcher.start()
        _batch(flow, profile, http, runs, "w")  # leaves ``runs`` agent sets in http's pool
        stop.set()
        watcher.join()

        # Interleaved, ``reps`` times: one arun on the warm pools, then a batch on each kind of
        # pools: nothing shared; AutoGen's client shared but no agent pool (before this change);
        # a cold agent pool (new pools given one warm-up run: the client is built and one agent
        # set waits, so the other runs build theirs); the warm pool (every run finds a set).
        one: list[float] = []
        kinds = (
            "unshared",
            "no_agent_pool",
            "cold_pool",
            "warm_pool",
            "warm_pool_events_to_loop",
            "warm_pool_baseline",
        )
        walls: dict[str, list[float]] = {k: [] for k in kinds}
        cpus: dict[str, list[float]] = {k: [] for k in walls}
        for rep in range(reps):
            t0 = time.perf_counter()
            asyncio.run(arun(flow, f"one{rep}", models=profile, http=http))
            one.append(time.perf_counter() - t0)
            for kind, pools in (
                ("unshared", _Unshared()),
                ("no_agent_pool", _Unpooled()),
                ("cold_pool", HttpClients()),
            ):
                with pools:
                    run(flow, "warm-up", models=profile, http=pools)
                    wall, cpu = _batch(flow, profile, pools, runs, f"{kind}{rep}-")
                walls[kind].append(wall)
                cpus[kind].append(cpu)
            for kind, pools, how in (
                ("warm_pool", http, arun),
                ("warm_pool_events_to_loop", http, _via_astream),
                ("warm_pool_baseline", baseline, arun),
            ):
                wall, cpu = _batch(flow, profile, pools, runs, f"{kind}{rep}-", how)
                walls[kind].append(wall)
                cpus[kind].append(cpu)

        c0, t0 = time.process_time(), time.perf_counter()
        for i in range(runs):
            run(flow, f"s{i}", models=profile, http=http)
        t_seq, cpu_seq = time.perf_counter() - t0, (time.process_time() - c0) * 1000 / runs

        out: list[Any] = []
        c0, t0 = time.process_time(), time.perf_counter()
        threads = [threading.Thread(target=lambda i=i: out.append(run(flow, f"p{i}", models=profile, http=http)))
                   for i in range(runs)]  # fmt: skip
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        t_threads, cpu_threads = time.perf_counter() - t0, (time.process_time() - c0) * 1000 / runs
        assert len(out) == runs
        pool = http.shared(AgentPool, AgentPool)
    t_one = statistics.median(one)
    report: dict[str, Any] = {
        "runs": runs,
        "latency_s": latency,
        "reps": reps,
        "one_arun_s_median": round(t_one, 3),
    }
    for kind in walls:
        wall = statistics.median(walls[kind])
        report[f"asyncio_{kind}_s_median"] = round(wall, 3)
        report[f"asyncio_{kind}_over_one_arun"] = round(wall / t_one, 2)
        report[f"asyncio_{kind}_cpu_ms_per_run_median"] = round(statistics.median(cpus[kind]), 2)
    warm = statistics.median(walls["warm_pool"])
    report.update(
        {
            "sequential_s": round(t_seq, 3),
            "threads_s": round(t_threads, 3),
            "sequential_cpu_ms_per_run": round(cpu_seq, 2),
            "threads_cpu_ms_per_run": round(cpu_threads, 2),
            "sequential_over_warm_asyncio": round(t_seq / warm, 1),
            "threads_over_warm_asyncio": round(t_threads / warm, 2),
            "agent_sets_built": pool.stats.built,
            "agent_sets_reused": pool.stats.reused,
            "os_threads_before": before,
            "os_threads_peak_during_asyncio": peak[0],
            "load_average_before": load_before,
            "load_average_after": [round(x, 2) for x in os.getloadavg()],
        }
    )
    return report


# -- serve ---------------------------------------------------------------------------------------


def _serve_child(port: int, model_url: str, ready: Any, store: str | None = None) -> None:
    import uvicorn

    from stateflow.serve import FlowService, build_app

    http = HttpClients(max_connections=128)
    checkpointer = MemoryCheckpointer() if store is None else PostgresCheckpointer(store)
    service = FlowService(_two_state(), checkpointer, models=_fake_profile(model_url), http=http)
    app = build_app(service, base_url=f"http://127.0.0.1:{port}")
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", backlog=256)
    server = uvicorn.Server(config)
    threading.Thread(target=lambda: (time.sleep(0.2), ready.set()), daemon=True).start()
    server.run()


@contextmanager
def _postgres(dsn: str) -> Iterator[str]:
    if dsn != "auto":
        yield dsn
        return
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from tests.core.checkpoint.pg_server import PgServer

    server = PgServer()
    try:
        server.start()
        server.create_database("bench")
        yield f"postgresql://stateflow@/bench?host={server.root}&port=5432"
    finally:
        server.destroy()


def _rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):  # peak resident set size
            return int(line.split()[1])
    return 0


def bench_serve(clients: int, requests: int, servers: int = 1, store: str | None = None) -> dict[str, Any]:
    """``clients`` AG-UI clients at once making ``requests`` runs in all, spread round-robin over
    ``servers`` server processes sharing ``store`` (a PostgreSQL DSN; ``None``: one server with a
    memory store). Requests per second, median and p95 per run, and the servers' CPU per run."""
    if servers > 1 and store is None:
        raise SystemExit("several servers need a shared store: give --postgres DSN (or --postgres auto)")
    ports = []
    for _ in range(servers):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            ports.append(s.getsockname()[1])
    with _FakeProcess(_reply_served) as srv:
        ctx = multiprocessing.get_context("spawn")
        children, events = [], []  # the events stay referenced until the children have started
        for port in ports:
            events.append(ctx.Event())
            child = ctx.Process(target=_serve_child, args=(port, srv.url, events[-1], store), daemon=True)
            child.start()
            children.append(child)
        bases = [f"http://127.0.0.1:{port}" for port in ports]
        for base in bases:
            deadline = time.monotonic() + 60
            while True:
                try:
                    if httpx.get(f"{base}/health").status_code == 200:
                        break
                except httpx.TransportError:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.1)
        rss_idle = sum(_rss_kib(c.pid or 0) for c in children)
        times: list[float] = []
        failures = [0]

        async def client_loop(client: httpx.AsyncClient, ids: list[int]) -> None:
            for i in ids:
                body = {
                    "threadId": f"b{i}-{os.getpid()}-{time.monotonic_ns()}",
                    "runId": f"r{i}",
                    "messages": [{"id": "1", "role": "user", "content": f"task {i}"}],
                    "tools": [],
                    "context": [],
                    "forwardedProps": {},
                }
                t0 = time.perf_counter()
                last = ""
                async with client.stream("POST", f"{bases[i % len(bases)]}/agui", json=body) as r:
                    async for line in r.aiter_lines():
                        if line.startswith("data: "):
                            last = line
                if '"RUN_FINISHED"' not in last:
                    failures[0] += 1
                times.append(time.perf_counter() - t0)

        async def main() -> tuple[float, float]:
            limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
            async with httpx.AsyncClient(timeout=120, limits=limits) as client:
                shards = [list(range(k, requests, clients)) for k in range(clients)]
                await asyncio.gather(*[client_loop(client, [i + 10**6 for i in range(len(bases))])])  # warm-up
                times.clear()
                cpu0 = sum(_proc_cpu_s(c.pid or 0) for c in children)
                t0 = time.perf_counter()
                await asyncio.gather(*[client_loop(client, ids) for ids in shards])
                return time.perf_counter() - t0, sum(_proc_cpu_s(c.pid or 0) for c in children) - cpu0

        wall, cpu = asyncio.run(main())
        rss_peak = sum(_rss_kib(c.pid or 0) for c in children)
        for child in children:
            child.terminate()
            child.join(10)
    times.sort()
    return {
        "servers": servers,
        "store": "memory" if store is None else "postgres",
        "clients": clients,
        "requests": requests,
        "failed": failures[0],
        "wall_s": round(wall, 2),
        "requests_per_s": round(requests / wall, 1),
        "median_request_s": round(statistics.median(times), 3),
        "p95_request_s": round(times[int(0.95 * (len(times) - 1))], 3),
        "server_cpu_ms_per_run": round(1000 * cpu / requests, 1),
        "server_rss_idle_mib": round(rss_idle / 1024, 1),
        "server_rss_peak_mib": round(rss_peak / 1024, 1),
    }


# -- soak: memory and CPU of the command-line server over thousands of runs -------------------------

_SOAK_FLOWS = """
from stateflow import LLM, Flow, Prompt, State, Transition

ask = State("Ask", Prompt("Answer."), LLM())
FLOW = Flow("soak", initial=ask, transitions=[Transition(ask, State("Done", final=True))])
"""


def _proc_status(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    return 0


def _proc_cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _agui_body(thread: str, text: str) -> dict[str, Any]:
    return {
        "threadId": thread,
        "runId": f"r-{thread}",
        "messages": [{"id": "1", "role": "user", "content": text}],
        "tools": [],
        "context": [],
        "forwardedProps": {},
    }


def _a2a_body(context: str, text: str) -> dict[str, Any]:
    message = {
        "role": "user",
        "parts": [{"kind": "text", "text": text}],
        "messageId": f"m-{context}",
        "contextId": context,
        "kind": "message",
    }
    return {"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": {"message": message}}


def bench_soak(
    runs: int, clients: int, warmup: int, samples: int, a2a_every: int, serve_args: tuple[str, ...] = ()
) -> dict[str, Any]:
    """``runs`` runs through ``stateflow serve`` itself (the command, in its own process, a SQLite
    store in a temporary folder, the fake server as its model, in its own process): ``clients``
    clients at once, each run on a new thread, every ``a2a_every``-th one an A2A ``message/send``
    (0: none), the others AG-UI streams read to the end. The server's resident memory (VmRSS) is
    read after ``warmup`` runs and then ``samples`` times; reported: RSS after warm-up, at the end,
    its growth, the peak, the server's CPU per run after warm-up (and the fake server's), failures.
    ``serve_args``: more options for the command (e.g. ``--max-finished-tasks 100``)."""
    import subprocess
    import tempfile

    with tempfile.TemporaryDirectory(prefix="sf-soak-") as tmp, _FakeProcess(_reply_served) as srv:
        project = Path(tmp)
        (project / "flows.py").write_text(_SOAK_FLOWS)
        (project / "models.toml").write_text(
            f'[profiles.fake]\nmodel = "m"\nprovider = "openai"\nbase_url = "{srv.url}"\napi_key_env = ""\n'
            '[models]\ndefault = "fake"\n'
        )
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(project), str(ROOT), env.get("PYTHONPATH", "")) if p)
        env.pop("STATEFLOW_SERVE_TOKEN", None)
        cmd = [sys.executable, "-m", "stateflow.cli.main", "serve", "flows:FLOW", "--config", "models.toml"]
        cmd += ["--checkpoints", str(project / "threads.db"), "--port", str(port), *serve_args]
        server = subprocess.Popen(cmd, cwd=project, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        base = f"http://127.0.0.1:{port}"
        try:
            deadline = time.monotonic() + 120
            while True:
                try:
                    if httpx.get(f"{base}/health").status_code == 200:
                        break
                except httpx.TransportError:
                    if server.poll() is not None or time.monotonic() > deadline:
                        raise RuntimeError(f"stateflow serve did not start: {server.stderr.read()!r}") from None  # type: ignore[union-attr]
                    time.sleep(0.1)
            pid = server.pid
            rss_start = _proc_status(pid, "VmRSS")
            marks: list[tuple[int, float, int, float, float]] = []  # (runs done, wall, RSS KiB, CPU s, fake CPU s)
            done = [0]
            failures: list[str] = []
            every = max(1, (runs - warmup) // max(1, samples))

            def mark() -> None:
                marks.append((done[0], time.perf_counter(), _proc_status(pid, "VmRSS"), _proc_cpu_s(pid), srv.cpu_s()))

            async def one(client: httpx.AsyncClient, i: int) -> None:
                if a2a_every and i % a2a_every == 0:
                    r = await client.post(f"{base}/a2a/", json=_a2a_body(f"soak-{i}", f"task {i}"))
                    state = r.json().get("result", {}).get("status", {}).get("state") if r.status_code == 200 else None
                    if state != "completed":
                        failures.append(f"a2a {r.status_code} {state}")
                else:
                    last = ""
                    async with client.stream("POST", f"{base}/agui", json=_agui_body(f"soak-{i}", f"task {i}")) as r:
                        async for line in r.aiter_lines():
                            if line.startswith("data: "):
                                last = line
                    if '"RUN_FINISHED"' not in last:
                        failures.append(f"agui {r.status_code} {last[:80]}")
                done[0] += 1
                if done[0] == warmup or (done[0] > warmup and (done[0] - warmup) % every == 0):
                    mark()

            async def main() -> None:
                limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
                async with httpx.AsyncClient(timeout=120, limits=limits) as client:
                    queue = iter(range(runs))

                    async def worker() -> None:
                        for i in queue:
                            await one(client, i)

                    await asyncio.gather(*[worker() for _ in range(clients)])

            t0 = time.perf_counter()
            asyncio.run(main())
            wall = time.perf_counter() - t0
            rss_peak = _proc_status(pid, "VmHWM")
        finally:
            server.terminate()
            server.wait(30)
    first, last = marks[0], marks[-1]
    measured = last[0] - first[0]
    return {
        "runs": runs,
        "clients": clients,
        "a2a_every": a2a_every,
        "serve_args": list(serve_args),
        "warmup_runs": warmup,
        "failed": len(failures),
        "failures_sample": failures[:3],
        "wall_s": round(wall, 1),
        "server_rss_idle_mib": round(rss_start / 1024, 1),
        "server_rss_after_warmup_mib": round(first[2] / 1024, 1),
        "server_rss_end_mib": round(last[2] / 1024, 1),
        "server_rss_growth_after_warmup_pct": round(100 * (last[2] - first[2]) / first[2], 1),
        "server_rss_peak_mib": round(rss_peak / 1024, 1),
        "server_rss_samples_mib": [(n, round(rss / 1024, 1)) for n, _, rss, _, _ in marks],
        "server_cpu_ms_per_run": round(1000 * (last[3] - first[3]) / measured, 2) if measured else None,
        "fake_model_cpu_ms_per_run": round(1000 * (last[4] - first[4]) / measured, 2) if measured else None,
        "runs_per_s_after_warmup": round(measured / (last[1] - first[1]), 1) if measured else None,
    }


# -- time to first token on the embedded model -----------------------------------------------------


def bench_ttft(model: str, reps: int) -> dict[str, Any]:
    from stateflow.profiles import BUILTIN_PROFILES

    profile = dataclasses.replace(BUILTIN_PROFILES[model], max_tokens=48, temperature=0.0)
    grammar = r'root ::= "Answer: " [a-zA-Z ,]{1,200} "."'
    out: dict[str, Any] = {"model": model, "max_tokens": 48}
    for label, g in (("free", None), ("grammar", grammar)):
        ask = State("Ask", Prompt("Describe the colour of the sky in one sentence."), LLM(grammar=g))
        end = State("End", final=True)
        flow = Flow("ttft", initial=ask, transitions=[Transition(ask, end)])
        run(flow, "warm-up", models=profile)  # starts the server, fills the prompt cache
        ttft, streamed_total, plain_total, tokens = [], [], [], []
        for i in range(reps):
            task = f"Question {i}."  # a new prompt tail each time, as in a real run
            marks: dict[str, float] = {}

            def sink(event: Any, marks: dict[str, float] = marks) -> None:
                now = time.perf_counter()
                if isinstance(event, StepRecorded) and event.step.output == "prompt":
                    marks["asked"] = now  # the model call starts right after the prompt step
                elif isinstance(event, TokenDelta) and "first" not in marks:
                    marks["first"] = now
                elif isinstance(event, StepRecorded) and event.step.output == "llm":
                    marks["end"] = now

            run(flow, task, models=profile, on_event=sink)
            ttft.append(marks["first"] - marks["asked"])
            streamed_total.append(marks["end"] - marks["asked"])
            r = run(flow, task + " ", models=profile)
            llm = next(s for s in r.steps if s.output == "llm")
            plain_total.append(llm.latency_s)
            tokens.append(llm.usage.completion_tokens if llm.usage else 0)
        out[label] = {
            "reps": reps,
            "ttft_s_median": round(statistics.median(ttft), 3),
            "streamed_reply_s_median": round(statistics.median(streamed_total), 3),
            "non_streamed_reply_s_median": round(statistics.median(plain_total), 3),
            "ttft_over_non_streamed": round(statistics.median(ttft) / statistics.median(plain_total), 3),
            "completion_tokens_median": statistics.median(tokens),
        }
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--part", default="all", choices=["all", "events", "asyncio", "floor", "serve", "soak", "ttft"])
    ap.add_argument("--runs", type=int, default=50)
    ap.add_argument("--latency", type=float, default=0.2)
    ap.add_argument("--clients", type=int, default=50)
    ap.add_argument("--requests", type=int, default=500)
    ap.add_argument("--model", default="local-small")
    ap.add_argument("--ttft-reps", type=int, default=5)
    ap.add_argument("--json", type=Path)
    # --part serve on a shared store: 1..N servers on one PostgreSQL database (DSN, or "auto": a
    # throwaway server from the test helpers, tests/core/checkpoint/pg_server.py)
    ap.add_argument("--postgres", help="PostgreSQL DSN for --part serve, or auto")
    ap.add_argument("--servers", type=int, default=2, help="with --postgres: measure 1..SERVERS servers")
    # --part soak (not in "all": it takes minutes)
    ap.add_argument("--soak-runs", type=int, default=5000)
    ap.add_argument("--soak-clients", type=int, default=8)
    ap.add_argument("--soak-warmup", type=int, default=500)
    ap.add_argument("--soak-samples", type=int, default=10)
    ap.add_argument("--soak-a2a-every", type=int, default=5, help="every Nth soak run is an A2A message (0: none)")
    ap.add_argument("--soak-max-finished-tasks", type=int, help="the server's --max-finished-tasks (default: its own)")
    # the HTTP client of the fake server's profile (ModelProfile.client) for --part asyncio
    ap.add_argument("--client", default="auto", choices=["auto", "openai", "lean"])
    args = ap.parse_args(argv)
    report: dict[str, Any] = {"cpus": os.cpu_count(), "load_average_before": [round(x, 2) for x in os.getloadavg()]}
    parts = ["events", "asyncio", "serve"] if args.part == "all" else [args.part]
    for part in parts:
        if part == "events":
            report["events"] = bench_events()
        elif part == "asyncio":
            report["asyncio"] = bench_asyncio(args.runs, args.latency, client=args.client)
        elif part == "floor":
            report["floor"] = bench_floor(args.runs, args.latency)
        elif part == "serve":
            if args.postgres is None:
                report["serve"] = bench_serve(args.clients, args.requests)
            else:
                with _postgres(args.postgres) as dsn:
                    report["serve"] = [
                        bench_serve(args.clients, args.requests, n, dsn) for n in range(1, args.servers + 1)
                    ]
        elif part == "soak":
            report["soak"] = bench_soak(
                args.soak_runs,
                args.soak_clients,
                args.soak_warmup,
                args.soak_samples,
                args.soak_a2a_every,
                ("--max-finished-tasks", str(args.soak_max_finished_tasks)) if args.soak_max_finished_tasks else (),
            )
            report["load_average_after"] = [round(x, 2) for x in os.getloadavg()]
        elif part == "ttft":
            report["ttft"] = bench_ttft(args.model, args.ttft_reps)
        print(json.dumps({part: report[part]}, indent=2), flush=True)
    if args.json:
        args.json.write_text(json.dumps(report, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

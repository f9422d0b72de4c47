#!/usr/bin/env python3
"""Benchmark the InterCode SQL environment (embedded MariaDB backend).

Prints: server start (template cached), reset latency, step latency versus a raw
mysql-connector round trip on the same query and server (ratio), a full gold replay of the
Spider tasks when the data is present (wall time including server start, reward-1 count), and
4 worker threads sharing one server versus one server each.

Usage: .venv/bin/python scripts/bench_sql.py [--dataset spider|demo] [--repeat N] [--skip-threads]
"""

from __future__ import annotations

import argparse
import statistics
import threading
import time
from collections.abc import Callable

from stateflow.envs.datasets import DataNotFoundError
from stateflow.envs.sql import EmbeddedServerPool, open_sql_env, resolve_dataset
from stateflow.envs.sql.server import open_connection


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.3f} ms"


def _median_time(fn: Callable[[], object], repeat: int) -> float:
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def bench_start(dataset: str, rounds: int) -> None:
    resolve_dataset(dataset)  # parse outside the timing
    times = []
    for _ in range(rounds):
        pool = EmbeddedServerPool()
        start = time.perf_counter()
        env = open_sql_env(dataset, pool=pool)
        env.reset(0)
        times.append(time.perf_counter() - start)
        env.close()
    print(f"server start + first reset (template cached), median of {rounds}: {_ms(statistics.median(times))}")


def bench_reset_and_step(dataset: str, repeat: int) -> None:
    pool = EmbeddedServerPool()
    with open_sql_env(dataset, pool=pool) as env:
        indices = list(range(min(len(env), 200)))
        for i in indices:  # create every database's account once
            env.reset(i)
        start = time.perf_counter()
        rounds = max(1, repeat // len(indices))
        for _ in range(rounds):
            for i in indices:
                env.reset(i)
        per_reset = (time.perf_counter() - start) / (rounds * len(indices))
        print(f"reset: {_ms(per_reset)} (mean over {rounds * len(indices)})")

        # the same queries, same account, same session settings, through the raw driver
        task = env.task(0)
        database = task.context.lower()
        env.reset(0)
        user, password = env.server.reader(database)
        raw = open_connection(env.server.endpoint, user, password, database)
        cur = raw.cursor()
        cur.execute(env.server.session_setup_sql(env.limits.statement_timeout))
        cur.execute("SHOW TABLES")
        tables = [r[0] for r in cur.fetchall()]
        queries = {"SHOW TABLES": "SHOW TABLES", "DESC": f"DESC `{tables[0]}`", "gold": task.gold}

        def raw_run(q: str) -> object:  # upstream's way: one cursor, execute, fetchall
            cur.execute(q)
            return cur.fetchall() if cur.description is not None else None

        print(f"step vs raw mysql-connector ({database}, median of {repeat}, interleaved):")
        for label, query in queries.items():
            assert env.step(query)[0] == raw_run(query), label
            step_t = []
            raw_t = []
            for _ in range(repeat):
                t0 = time.perf_counter()
                env.step(query)
                t1 = time.perf_counter()
                raw_run(query)
                t2 = time.perf_counter()
                step_t.append(t1 - t0)
                raw_t.append(t2 - t1)
            s, r = statistics.median(step_t), statistics.median(raw_t)
            print(f"  {label:12s} step {_ms(s)}  raw {_ms(r)}  ratio {s / r:.2f}x   [{query[:60]}]")
        raw.close()


def _replay(env, indices) -> int:  # type: ignore[no-untyped-def]
    ones = 0
    for i in indices:
        env.reset(i)
        env.step(env.task(i).gold)
        ones += env.step("submit")[1] == 1.0
    return ones


def bench_replay(dataset: str) -> None:
    pool = EmbeddedServerPool()
    start = time.perf_counter()
    with open_sql_env(dataset, pool=pool) as env:
        ready = time.perf_counter()
        ones = _replay(env, range(len(env)))
        total = len(env)
    end = time.perf_counter()
    print(
        f"gold replay {dataset}: {ones}/{total} reward 1, wall {end - start:.2f} s "
        f"(server start {ready - start:.2f} s, replay {end - ready:.2f} s)"
    )


def _threaded_replay(dataset: str, workers: int, shared: bool) -> tuple[float, float, int]:
    """Replay split across ``workers`` threads; returns wall time, slowest open, reward-1 count."""
    shared_pool = EmbeddedServerPool()
    results = [0] * workers
    opened = [0.0] * workers

    def work(slot: int) -> None:
        pool = shared_pool if shared else EmbeddedServerPool()
        t = time.perf_counter()
        with open_sql_env(dataset, pool=pool) as env:
            opened[slot] = time.perf_counter() - t
            results[slot] = _replay(env, range(slot, len(env), workers))

    start = time.perf_counter()
    threads = [threading.Thread(target=work, args=(s,)) for s in range(workers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return time.perf_counter() - start, max(opened), sum(results)


def bench_threads(dataset: str, workers: int) -> None:
    for shared in (True, False):
        wall, slowest, ones = _threaded_replay(dataset, workers, shared)
        mode = "one shared server" if shared else "one server per env"
        print(f"{workers} threads, {mode}: wall {wall:.2f} s, slowest open {slowest:.2f} s, reward-1 {ones}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataset", default=None, help="spider (default when present) or demo")
    parser.add_argument("--repeat", type=int, default=300)
    parser.add_argument("--skip-threads", action="store_true")
    args = parser.parse_args()
    dataset = args.dataset
    if dataset is None:
        try:
            resolve_dataset("spider")
            dataset = "spider"
        except DataNotFoundError:
            dataset = "demo"
            print("Spider data not found: benchmarking the demo dataset")
    EmbeddedServerPool().close_all()
    with open_sql_env(dataset, pool=EmbeddedServerPool()):  # build/cached template outside timings
        pass
    bench_start(dataset, 5)
    bench_reset_and_step(dataset, args.repeat)
    bench_replay(dataset)
    if not args.skip_threads:
        bench_threads(dataset, 4)


if __name__ == "__main__":
    main()

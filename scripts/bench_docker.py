#!/usr/bin/env python3
"""Benchmark the Docker backends side by side with the default ones, and against upstream's design.

In one run, on the same machine and data:

* step latency, reset latency and environment start: SQL docker vs embedded, bash docker vs
  sandbox (medians of ``--n`` repetitions);
* full gold replay (Spider dev 1034 tasks, NL2Bash 200 tasks; ``--workers`` environments in
  threads for bash, one environment for SQL, the same for both backends);
* upstream InterCode's design, simulated with the same images: a fresh container per episode,
  a 3 s sleep after starting it (upstream waits that long for the container), the gold command
  through ``exec_run``, then the container removed. It is run for ``--upstream-sample`` episodes
  per benchmark and extrapolated to the full set (printed as such), since running it in full
  would take ~1 h for Spider alone.

Usage: .venv/bin/python scripts/bench_docker.py [--n 30] [--workers 4] [--upstream-sample 5] [--no-replay]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from stateflow.envs.bash import open_bash_env
from stateflow.envs.sql import open_sql_env

UPSTREAM_SLEEP_S = 3.0


def timed(fn: Callable[[], object], n: int) -> list[float]:
    """Milliseconds of ``n`` calls."""
    out = []
    for _ in range(n):
        start = time.perf_counter()
        fn()
        out.append((time.perf_counter() - start) * 1000)
    return out


def row(label: str, ours: float, docker: float, unit: str = "ms") -> None:
    ratio = docker / ours if ours else float("inf")
    print(f"{label:<44} {ours:10.2f} {unit:<2} {docker:10.2f} {unit:<2}   docker/default x{ratio:.2f}")


def once_ms(fn: Callable[[], object]) -> tuple[float, object]:
    start = time.perf_counter()
    value = fn()
    return (time.perf_counter() - start) * 1000, value


def _sql_numbers(backend: str, n: int) -> dict[str, float]:
    ms, env = once_ms(lambda: open_sql_env("demo", backend=backend))
    with env:  # type: ignore[attr-defined]
        env.reset(0)  # type: ignore[attr-defined]
        counter = iter(range(10**9))  # a new statement each time: no cache on any layer can answer it
        step = statistics.median(timed(lambda: env.step(f"SELECT count(*) + {next(counter)} FROM book"), n))  # type: ignore[attr-defined]
        reset = statistics.median(timed(lambda: env.reset(1), n))  # type: ignore[attr-defined]
    return {"open": ms, "step": step, "reset": reset}


def sql_latency(n: int) -> None:
    print(f"\n== SQL: embedded vs docker (demo, n={n}) ==")
    print(f"{'':<44} {'embedded':>13} {'docker':>13}")
    results = {backend: _sql_numbers(backend, n) for backend in ("embedded", "docker")}
    row("open environment (server start)", results["embedded"]["open"], results["docker"]["open"])
    row("step('SELECT count(*) + k FROM book') median", results["embedded"]["step"], results["docker"]["step"])
    row("reset(i) median", results["embedded"]["reset"], results["docker"]["reset"])


def bash_latency(n: int) -> None:
    print(f"\n== Bash: sandbox vs docker (demo, n={n}) ==")
    print(f"{'':<44} {'sandbox':>13} {'docker':>13}")
    results: dict[str, dict[str, float]] = {}
    for backend in ("sandbox", "docker"):
        env = open_bash_env("demo", backend=backend)
        with env:
            ms, _ = once_ms(lambda e=env: e.reset(0))
            r = results.setdefault(backend, {"open": ms})
            r["step"] = statistics.median(timed(lambda e=env: e.step("echo hi"), n))
            r["reset"] = statistics.median(timed(lambda e=env: e.reset(1), n))

            def dirty(e: object = env) -> None:
                e.step("touch /tmp/x")  # type: ignore[attr-defined]

            samples = []
            for _ in range(max(3, n // 3)):
                dirty()
                samples.append(timed(lambda e=env: e.reset(1), 1)[0])
                time.sleep(0.5)  # let the docker backend's background spare start, as between episodes
            r["dirty"] = statistics.median(samples)
    row("first reset (host start)", results["sandbox"]["open"], results["docker"]["open"])
    row("step('echo hi') median", results["sandbox"]["step"], results["docker"]["step"])
    row("reset(i), nothing written, median", results["sandbox"]["reset"], results["docker"]["reset"])
    row("reset(i) after a write, median", results["sandbox"]["dirty"], results["docker"]["dirty"])


def replay_sql(dataset: str, backend: str) -> tuple[float, int, int]:
    start = time.perf_counter()
    ones = 0
    with open_sql_env(dataset, backend=backend) as env:
        for i in range(len(env)):
            env.reset(i)
            env.step(env.task(i).gold)
            ones += env.step("submit")[1] == 1.0
        total = len(env)
    return time.perf_counter() - start, ones, total


def replay_bash(dataset: str, backend: str, workers: int) -> tuple[float, int, int]:
    with open_bash_env(dataset, backend=backend) as probe:
        total = len(probe)

    def part(indices: list[int]) -> int:
        ones = 0
        with open_bash_env(dataset, backend=backend) as env:
            for i in indices:
                env.reset(i)
                env.step(env.task(i).gold)
                ones += env.step("submit")[1] == 1.0
        return ones

    start = time.perf_counter()
    with ThreadPoolExecutor(max_workers=workers) as pool:
        ones = sum(pool.map(part, [list(range(k, total, workers)) for k in range(workers)]))
    return time.perf_counter() - start, ones, total


def upstream_bash(dataset: str, sample: int) -> float:
    """Seconds per episode of upstream's design: fresh container + 3 s sleep + gold via exec_run."""
    from stateflow.envs.bash.docker_backend import bash_image, connect_docker, container_options
    from stateflow.envs.bash.sandbox import SandboxLimits
    from stateflow.envs.bash.tasks import load_bash_dataset
    from stateflow.envs.docker_engine import DockerSession

    data = load_bash_dataset(dataset, None)
    client = connect_docker()
    session = DockerSession(client, "bench")
    step = max(1, len(data.tasks) // sample)
    costs = []
    try:
        for task in data.tasks[::step][:sample]:
            image = bash_image(client, data.sources[task.context])  # built before timing
            start = time.perf_counter()
            container = session.run(image, role="upstream", **container_options(SandboxLimits()))
            time.sleep(UPSTREAM_SLEEP_S)
            container.exec_run(["/bin/bash", "-c", task.gold], workdir="/")
            container.exec_run(["git", "status", "--short"], workdir="/")
            container.remove(force=True)
            costs.append(time.perf_counter() - start)
    finally:
        session.close()
    return statistics.fmean(costs)


def upstream_sql(dataset: str, sample: int) -> float:
    """Seconds per episode of upstream's design: fresh server container + 3 s sleep + gold query."""
    from stateflow.envs.sql.docker_server import DockerServer
    from stateflow.envs.sql.env import SqlEnv
    from stateflow.envs.sql.tasks import resolve_dataset

    data = resolve_dataset(dataset)
    DockerServer(data.dumps, data.databases).close()  # data image built before timing
    step = max(1, len(data.tasks) // sample)
    costs = []
    for index in range(0, len(data.tasks), step)[:sample]:
        start = time.perf_counter()
        server = DockerServer(data.dumps, data.databases)
        time.sleep(UPSTREAM_SLEEP_S)
        env = SqlEnv(data, server, on_close=server.close)
        env.reset(index)
        env.step(env.task(index).gold)
        env.step("submit")
        env.close()
        costs.append(time.perf_counter() - start)
    return statistics.fmean(costs)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=30, help="repetitions per latency measurement")
    parser.add_argument("--workers", type=int, default=4, help="bash replay: environments in parallel threads")
    parser.add_argument("--sql-dataset", default="spider")
    parser.add_argument("--bash-dataset", default="nl2bash")
    parser.add_argument("--upstream-sample", type=int, default=5, help="episodes of the simulated upstream design")
    parser.add_argument("--no-replay", action="store_true", help="latencies only")
    args = parser.parse_args()

    sql_latency(args.n)
    bash_latency(args.n)
    if args.no_replay:
        return 0

    print(f"\n== full gold replay (SQL: 1 environment; bash: {args.workers} environments in threads) ==")
    print(f"{'':<44} {'default':>13} {'docker':>13}")
    sql = {b: replay_sql(args.sql_dataset, b) for b in ("embedded", "docker")}
    bash = {b: replay_bash(args.bash_dataset, b, args.workers) for b in ("sandbox", "docker")}
    row(f"SQL {args.sql_dataset} replay wall time", sql["embedded"][0], sql["docker"][0], "s")
    row(f"bash {args.bash_dataset} replay wall time", bash["sandbox"][0], bash["docker"][0], "s")
    for name, res in (("SQL embedded", sql["embedded"]), ("SQL docker", sql["docker"])):
        print(f"  {name}: {res[1]} of {res[2]} scored 1")
    for name, res in (("bash sandbox", bash["sandbox"]), ("bash docker", bash["docker"])):
        print(f"  {name}: {res[1]} of {res[2]} scored 1")

    print(f"\n== upstream's design, simulated ({args.upstream_sample} episodes each, extrapolated) ==")
    for label, per_episode, ours in (
        (f"SQL {args.sql_dataset}", upstream_sql(args.sql_dataset, args.upstream_sample), sql["docker"]),
        (f"bash {args.bash_dataset}", upstream_bash(args.bash_dataset, args.upstream_sample), bash["docker"]),
    ):
        full = per_episode * ours[2]
        workers = args.workers if label.startswith("bash") else 1
        print(
            f"{label:<20} upstream {per_episode:5.2f} s/episode -> {full / workers:7.0f} s for {ours[2]} tasks "
            f"with {workers} worker(s); ours (docker) {ours[0]:6.1f} s: x{full / workers / ours[0]:.1f} faster"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

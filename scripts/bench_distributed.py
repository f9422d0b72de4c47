#!/usr/bin/env python3
"""Thread executor vs Ray executor: throughput and per-episode dispatch overhead, in one process.

Configurations (same tasks, same method ``stateflow``, the runner's ``evaluate``):

* ``thread``: W worker threads in this process (the baseline);
* ``ray 1 node``: a local Ray instance with W CPUs, W actors;
* ``ray N nodes``: a ``ray.cluster_utils.Cluster`` of N nodes with W CPUs each, N*W actors
  (simulated nodes: real raylets and worker processes, all on this machine's cores).

Workloads:

1. the gold-replay oracle on Spider (all 1,034 tasks by default; CPU-bound: simulated nodes share
   the same cores, so no scaling is expected there, only the overhead shows);
2. a fake OpenAI-compatible server answering after a fixed latency with a gold-replaying policy
   (model-bound: near-linear scaling with nodes is the target).

Overhead per episode = (wall time x actors - sum of the episodes' own ``wall_s``) / episodes: worker
time spent outside ``run_episode`` (dispatch, result transfer, environment start-up, idle slots).

Usage: .venv/bin/python scripts/bench_distributed.py [--workers 2] [--nodes 3]
       [--oracle-tasks all] [--llm-tasks 0:48] [--latency 0.5]
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from stateflow.envs.datasets import DataNotFoundError, locate_intercode_dir
from stateflow.tasks.harness.executors import ThreadExecutor
from stateflow.tasks.harness.ray_executor import ray_executor_factory
from stateflow.tasks.harness.runner import RunSpec, evaluate, open_env
from stateflow.tasks.kit.episode_record import EpisodeRecord
from stateflow.tasks.sql.benchmark import INTERCODE_SQL

from stateflow import ModelAssignment, ModelProfile
from stateflow.testing.fake_openai import FakeOpenAIServer

Factory = Callable[..., Any]


class _Timed:
    """Wraps an executor and notes when each record reaches the driver (for steady-state rates)."""

    def __init__(self, inner: Any):
        self.inner = inner
        self.arrivals: list[float] = []

    @property
    def interrupted(self) -> bool:
        return self.inner.interrupted

    def run(self, jobs: Any, work: Any, on_interrupt: Any = None) -> Any:
        for record in self.inner.run(jobs, work, on_interrupt):
            self.arrivals.append(time.perf_counter())
            yield record

    def stop(self) -> None:
        self.inner.stop()

    def close(self) -> None:
        self.inner.close()


def _measure(spec: RunSpec, factory: Factory, actors: int) -> dict[str, Any]:
    made: list[_Timed] = []

    def timed(workers: int, make_env: Any) -> _Timed:
        made.append(_Timed(factory(workers, make_env)))
        return made[-1]

    with tempfile.TemporaryDirectory() as out:
        t = time.perf_counter()
        s = evaluate(
            RunSpec(**{**spec.__dict__, "out": Path(out), "workers": actors}), executor_factory=timed, progress=False
        )
        wall = time.perf_counter() - t
    rewards = {(r["method"], r["task"]): r["reward_raw"] for r in s.records}
    inside = sum(r["wall_s"] for r in s.records)
    n = len(s.records)
    times = made[0].arrivals
    # Steady state: from the arrival of the actors-th record (every worker has started and opened
    # its environment) to the last one; start-up is reported separately.
    k = min(actors, n - 1)
    return {
        "records": s.records,
        "n": n,
        "wall": wall,
        "rate": 60 * n / wall,
        "steady": 60 * (n - k) / (times[-1] - times[k - 1]) if k >= 1 else float("nan"),
        "first_s": times[0] - t,
        "overhead_ms": 1000 * (wall * actors - inside) / n,
        "episode_ms": 1000 * inside / n,
        "solved": sum(r["success"] for r in s.records),
        "rewards": rewards,
    }


def _driver_append(records: list[EpisodeRecord], n: int = 300) -> None:
    """The driver's own cost per record (JSON + one write + fsync): its ceiling in records/s."""
    from stateflow.tasks.harness.records import ResultsFile

    with tempfile.TemporaryDirectory() as out:
        results = ResultsFile(Path(out) / "results.jsonl")
        t = time.perf_counter()
        for i in range(n):
            results.append(records[i % len(records)])
        per = (time.perf_counter() - t) / n
    size = sum(len(json.dumps(r.to_dict(), default=str)) for r in records) / len(records)
    print(
        f"driver: results.jsonl append {1000 * per:.2f} ms/record ({size / 1024:.1f} KiB each) "
        f"= {1 / per:.0f} records/s"
    )


def _row(label: str, m: dict[str, Any], base: float | None) -> str:
    ratio = f"{m['rate'] / base:5.2f}x" if base else "  1.00x"
    return (
        f"{label:24} {m['n']:5d} episodes in {m['wall']:7.1f} s = {m['rate']:7.1f} episodes/min ({ratio}); "
        f"steady {m['steady']:7.1f}/min; first record after {m['first_s']:5.1f} s; "
        f"episode {m['episode_ms']:7.1f} ms, overhead {m['overhead_ms']:7.1f} ms/episode; solved {m['solved']}"
    )


def _gold_responder(golds: dict[str, str]) -> Callable[[str, list[dict], dict], str]:
    def reply(model: str, messages: list[dict], body: dict) -> str:
        question = next(m["content"] for m in messages if m["role"] == "user").removeprefix("Question: ")
        action = f"execute[{golds[question]}]"
        seen = [i for i, m in enumerate(messages) if action in str(m.get("content") or "")]
        if seen and any(m.get("name") == "environment" for m in messages[seen[0] + 1 :]):
            return "Thought: done\nAction: submit"
        return f"Thought: run it\nAction: {action}"

    return reply


def _compare(title: str, spec: RunSpec, workers: int, nodes: int) -> dict[str, dict[str, Any]]:
    import ray
    from ray.cluster_utils import Cluster

    print(f"\n== {title} ==", flush=True)
    results: dict[str, dict[str, Any]] = {}
    results["thread"] = _measure(spec, ThreadExecutor, workers)
    print(_row(f"thread x{workers}", results["thread"], None), flush=True)
    base = results["thread"]["rate"]
    models = None if spec.oracle else spec.models
    ray.init(
        address="local", num_cpus=workers, include_dashboard=False, _node_ip_address="127.0.0.1", log_to_driver=False
    )
    try:
        results["ray1"] = _measure(spec, ray_executor_factory(None, models), workers)
    finally:
        ray.shutdown()
    print(_row(f"ray 1 node x{workers}", results["ray1"], base), flush=True)
    cluster = Cluster(
        initialize_head=True,
        head_node_args={"num_cpus": workers, "include_dashboard": False, "node_ip_address": "127.0.0.1"},
    )
    try:
        for _ in range(nodes - 1):
            cluster.add_node(num_cpus=workers, node_ip_address="127.0.0.1")
        cluster.wait_for_nodes()
        ray.init(address=cluster.address, log_to_driver=False, _node_ip_address="127.0.0.1")
        results["rayN"] = _measure(spec, ray_executor_factory(None, models), workers * nodes)
    finally:
        ray.shutdown()
        cluster.shutdown()
    print(_row(f"ray {nodes} nodes x{workers}", results["rayN"], base), flush=True)
    for key in ("rate", "steady"):
        r1, rn, th = results["ray1"][key], results["rayN"][key], results["thread"][key]
        print(
            f"{'whole run' if key == 'rate' else 'steady state'}: ray 1 node / thread: {r1 / th:.3f}; "
            f"ray {nodes} nodes / ray 1 node: {rn / r1:.2f} (linear: {nodes})",
            flush=True,
        )
    for key in ("ray1", "rayN"):
        a, b = results["thread"]["rewards"], results[key]["rewards"]
        differ = sorted(k for k in a.keys() | b.keys() if a.get(k) != b.get(k))
        print(f"{key}: rewards identical to threads on {len(a)} episodes: {not differ} {differ[:10]}", flush=True)
    return results


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workers", type=int, default=2, help="threads / actors per node")
    ap.add_argument("--nodes", type=int, default=3, help="simulated nodes for the multi-node case")
    ap.add_argument("--oracle-tasks", default="all", help="Spider tasks for the oracle workload")
    ap.add_argument("--llm-tasks", default="0:48", help="Spider tasks for the fake-model workload")
    ap.add_argument("--latency", type=float, default=0.5, help="seconds per fake model call")
    ap.add_argument("--skip-oracle", action="store_true")
    args = ap.parse_args()
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    # Simulated nodes stay on loopback (read when ray is imported: before any import of it).
    os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
    try:
        locate_intercode_dir(need="sql")
        dataset = "spider"
    except DataNotFoundError:
        dataset = "demo"
        print("note: ../shared/data is absent: using the 20 demo SQL tasks")
    print(f"machine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} at start")
    oracle = RunSpec(
        INTERCODE_SQL,
        ("stateflow",),
        ModelAssignment.of("local"),
        "oracle",
        Path("."),
        dataset=dataset,
        tasks=args.oracle_tasks,
        oracle=True,
    )
    if not args.skip_oracle:
        _compare(f"oracle, {dataset} tasks {args.oracle_tasks}", oracle, args.workers, args.nodes)
    env = open_env(oracle)
    golds = {env.task(i).query: env.task(i).gold for i in range(len(env))}
    env.close()
    with FakeOpenAIServer(_gold_responder(golds), latency_s=args.latency) as srv:
        prof = ModelProfile(name="fake", model="fake", base_url=srv.url, api_key_env=None)
        llm = RunSpec(
            INTERCODE_SQL,
            ("stateflow",),
            ModelAssignment.of(prof),
            "default=fake",
            Path("."),
            dataset=dataset,
            tasks=args.llm_tasks,
        )
        llm_results = _compare(
            f"fake model {args.latency * 1000:.0f} ms/call, {dataset} tasks {args.llm_tasks}",
            llm,
            args.workers,
            args.nodes,
        )
    _driver_append(llm_results["thread"]["records"])
    print(f"load average {os.getloadavg()[0]:.1f} at the end (2 cores shared with other work)")


if __name__ == "__main__":
    main()

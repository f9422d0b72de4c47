#!/usr/bin/env python3
"""Benchmark the bash sandbox: per-command latency, reset time, and a gold replay.

Prints medians (and means) of real measurements next to a baseline run in the same process
(plain ``bash -c`` on the host, no sandbox) and the issue's targets (command <= 15 ms,
reset <= 25 ms, 200-task replay <= 60 s).

Usage: .venv/bin/python scripts/bench_bash.py [--n 50] [--dataset nl2bash] [--workers 1] [--data DIR]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from stateflow.envs.bash import BashEnv, open_bash_env
from stateflow.envs.bash.idmap import MappingChoice, sandbox_id_mapping
from stateflow.envs.bash.rootfs import build_base_root, locate_base_root
from stateflow.envs.bash.sandbox import Sandbox


def timed(fn: Callable[[], object], n: int) -> list[float]:
    out = []
    for _ in range(n):
        start = time.perf_counter()
        fn()
        out.append((time.perf_counter() - start) * 1000)
    return out


def show(label: str, ms: list[float], *, baseline: float | None = None, target: float | None = None) -> None:
    med = statistics.median(ms)
    line = f"{label:<38} median {med:7.1f} ms   mean {statistics.fmean(ms):7.1f} ms   n={len(ms)}"
    if baseline:
        line += f"   x{med / baseline:.1f} vs host bash"
    if target:
        line += f"   target <= {target:.0f} ms: {'ok' if med <= target else 'MISSED'}"
    print(line)


def replay(dataset: str, data_dir: str | None, indices: list[int]) -> list[tuple[int, float, dict]]:
    out = []
    with open_bash_env(dataset, data_dir=data_dir) as env:
        for i in indices:
            env.reset(i)
            env.step(env.task(i).gold)
            _, reward, _, info = env.step("submit")
            out.append((i, reward, info))
    return out


def uid_ab(n: int) -> None:
    """As root: sandbox root as the mapped unprivileged uid vs as host root (the fallback), interleaved.

    Both sandboxes run on the same base root content (shifted copy vs original) in one process,
    alternating command by command, so the ratio is not skewed by load changing between runs.
    """
    if os.geteuid() != 0 or sandbox_id_mapping() is None:
        print("\n(no mapped-uid vs host-root comparison: needs root and a usable id mapping)")
        return
    print(f"\n== sandbox root: mapped uid vs host root (fallback), interleaved, n={n} ==")
    fallback = MappingChoice(None, "host root (benchmark baseline)")
    with (
        Sandbox([locate_base_root().path]) as mapped,
        Sandbox([build_base_root(quiet=True).path], ids=fallback) as host_root,
    ):
        times: dict[str, list[float]] = {"mapped uid": [], "host root": []}
        for _ in range(n):
            for name, box in (("mapped uid", mapped), ("host root", host_root)):
                times[name] += timed(lambda box=box: box.run(["/bin/sh", "-c", "echo hi"]), 1)
        for name, ms in times.items():
            show(f"run('echo hi') as {name}", ms)
        ratio = statistics.median(times["mapped uid"]) / statistics.median(times["host root"])
        print(f"ratio mapped / host root (medians): {ratio:.2f}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=50, help="repetitions per latency measurement")
    parser.add_argument("--dataset", default="nl2bash", help="replay set (nl2bash, demo, fs_1, ...; 'none' to skip)")
    parser.add_argument("--workers", type=int, default=1, help="environments replaying in parallel threads")
    parser.add_argument("--data", default=None, help="InterCode data directory")
    args = parser.parse_args()

    print(f"== latency (n={args.n}) ==")
    host = timed(lambda: subprocess.run(["/bin/bash", "-c", "echo hi"], capture_output=True, check=True), args.n)
    base = statistics.median(host)
    show("host: subprocess bash -c 'echo hi'", host)
    env: BashEnv
    with open_bash_env("demo") as env:
        start = time.perf_counter()
        env.reset(0)
        first = (time.perf_counter() - start) * 1000
        print(f"{'first reset (sandbox start)':<38} {first:7.1f} ms")
        show("step('echo hi')", timed(lambda: env.step("echo hi"), args.n), baseline=base, target=15)
        show("step('ls -R /demo | wc -l')", timed(lambda: env.step("ls -R /demo | wc -l"), args.n), baseline=base)
        show("reset(i)", timed(lambda: env.reset(1), args.n), baseline=base, target=25)
        env.step("submit")  # warm up the gold sandbox and scikit-learn
        show(
            "reset + gold + submit (demo 8)",
            timed(lambda: (env.reset(8), env.step(env.task(8).gold), env.step("submit")), max(5, args.n // 5)),
        )

    uid_ab(args.n)
    if args.dataset == "none":
        return 0
    with open_bash_env(args.dataset, data_dir=args.data) as probe:
        total = len(probe)
    print(f"\n== gold replay: {args.dataset}, {total} tasks, {args.workers} worker(s) ==")
    chunks = [list(range(k, total, args.workers)) for k in range(args.workers)]
    start = time.perf_counter()
    with ThreadPoolExecutor(max_workers=args.workers) as pool:
        results = [r for part in pool.map(lambda c: replay(args.dataset, args.data, c), chunks) for r in part]
    wall = time.perf_counter() - start
    ones = sum(1 for _, reward, _ in results if reward == 1.0)
    verdict = "ok" if wall <= 60 else "MISSED"
    print(f"wall {wall:.1f} s ({wall / total * 1000:.0f} ms/task), target <= 60 s for 200 tasks: {verdict}")
    print(f"reward 1: {ones} of {total}")
    for i, reward, info in sorted(results):
        if reward != 1.0:
            print(
                f"  task {i}: reward {reward:.2f} parts {info['reward']} miss {info['diff_miss']} "
                f"extra {info['diff_extra']}"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

#!/usr/bin/env python3
"""Benchmark pdoctor's synthesis and oracle: seconds per request, and how much of it is Z3.

For each number of actions, synthesizes N requests and reports the median and mean synthesis
time per request and the Z3 part of it (the paper reports ~0.07 s per request, Z3 < 0.03 s).
Baseline in the same process: a brute-force satisfiability check of the same final constraint
sets over every order (feasible up to ~8 actions), and the oracle's time to judge a valid log.

Also: "chance" = the fraction of all orders meeting every constraint (a random agent's success
rate), "listed order" = requests solved by calling the tools in the order the request lists them.

Usage: .venv/bin/python scripts/bench_pdoctor.py [--n 30] [--actions 3:8] [--sentences 2:6] [--extended]
"""

from __future__ import annotations

import argparse
import itertools
import math
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from stateflow.envs.pdoctor import MockToolkit, SynthesisConfig, judge, parse_range, synthesize
from stateflow.envs.pdoctor.solver import satisfiable, witness_order


def brute_force(n: int, pairs: list[tuple[int, int]]) -> bool:
    for perm in itertools.permutations(range(n)):
        pos = {a: i for i, a in enumerate(perm)}
        if all(pos[a] < pos[b] for a, b in pairs):
            return True
    return False


def chance(n: int, pairs: list[tuple[int, int]]) -> float:
    """The fraction of all orders that meet every constraint: a random agent's success rate."""
    ok = 0
    for perm in itertools.permutations(range(n)):
        pos = {a: i for i, a in enumerate(perm)}
        ok += all(pos[a] < pos[b] for a, b in pairs)
    return ok / math.factorial(n)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=30, help="requests per number of actions")
    ap.add_argument("--actions", default="3:8")
    ap.add_argument("--sentences", default="2:6")
    ap.add_argument("--extended", action="store_true")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    lo, hi = parse_range(args.actions, "--actions")
    sentences = parse_range(args.sentences, "--sentences")
    print(
        f"{'actions':>7} {'synth median':>13} {'synth mean':>11} {'Z3 mean':>9} {'Z3 share':>8} "
        f"{'sat check':>10} {'brute force':>12} {'oracle':>9} {'chance':>7} {'listed order':>12}"
    )
    all_synth, all_z3 = [], []
    for k in range(lo, hi + 1):
        config = SynthesisConfig(n=args.n, actions=(k, k), sentences=sentences, seed=args.seed, extended=args.extended)
        synth, z3s, sat_s, brute_s, oracle_s, luck, listed = [], [], [], [], [], [], []
        for i in range(args.n):
            r = synthesize(config, i)
            synth.append(r.stats.synthesis_s)
            z3s.append(r.stats.z3_s)
            pairs = [(o.first, o.then) for o in r.orders]
            t = time.perf_counter()
            satisfiable(k, r.orders, r.bounds, r.durations, r.day_start)
            sat_s.append(time.perf_counter() - t)
            if not args.extended:
                t = time.perf_counter()
                brute_force(k, pairs)
                brute_s.append(time.perf_counter() - t)
                luck.append(chance(k, pairs))
                listed.append(all(a < b for a, b in pairs))  # calling the tools in the order the request lists them
            order = witness_order(k, r.orders, r.bounds, r.durations, r.day_start) or []
            kit = MockToolkit(r)
            for a in order:
                kit.call(r.tools[a] + (f"(start={r.day_start // 60:02d}:00)" if args.extended else ""))
            t = time.perf_counter()
            judge(r, kit.calls)
            oracle_s.append(time.perf_counter() - t)
        all_synth += synth
        all_z3 += z3s
        brute = f"{statistics.fmean(brute_s) * 1000:9.1f}ms" if brute_s else f"{'-':>11}"
        print(
            f"{k:>7} {statistics.median(synth):12.4f}s {statistics.fmean(synth):10.4f}s {statistics.fmean(z3s):8.4f}s "
            f"{100 * sum(z3s) / sum(synth):7.0f}% {statistics.fmean(sat_s) * 1000:8.1f}ms {brute} "
            f"{statistics.fmean(oracle_s) * 1000:7.1f}ms "
            + (f"{100 * statistics.fmean(luck):6.1f}% {100 * statistics.fmean(listed):11.0f}%" if luck else "")
        )
    print(
        f"overall: {statistics.fmean(all_synth):.4f} s per request (median {statistics.median(all_synth):.4f} s), "
        f"Z3 {statistics.fmean(all_z3):.4f} s; paper: ~0.07 s per request, Z3 < 0.03 s"
    )


if __name__ == "__main__":
    main()

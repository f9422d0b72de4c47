#!/usr/bin/env python
"""Benchmark ``Parallel``: one state fanning out to N slow branches against the same branches run
one after the other, in this process.

Usage::

    .venv/bin/python scripts/bench_parallel.py [--branches 4] [--seconds 0.5] [--repeats 3]

Each branch is a model call to the scripted test double with ``latency_s`` (a slow model) or a
tool that sleeps (a slow service), alternating. (a) **parallel**: one state
``Parallel(b1, ..., bN, merge=...)``; (b) **sequential**: the same output functions as N output
functions of one state. Prints the median wall time of each run and the ratio parallel /
sequential (ideal: 1/N; what is above it is the fan-out's overhead: threads, AutoGen agents
per branch, the merge step). No model server or network is used.
"""

from __future__ import annotations

import argparse
import statistics
import time

from stateflow import LLM, Flow, ModelProfile, Parallel, Prompt, State, Tool, Transition, run
from stateflow.backends.scripted import ScriptedLLM


def _branches(n: int, seconds: float) -> list:
    def sleeper(i: int) -> Tool:
        def nap(ctx) -> str:
            time.sleep(seconds)
            return f"service {i}"

        return Tool(nap, f"service{i}")

    return [LLM() if i % 2 == 0 else sleeper(i) for i in range(n)]


def _flow(outputs: list, parallel: bool) -> Flow:
    def merge(ctx, results) -> str:
        return "\n".join(r.content for r in results)

    body = [Parallel(*outputs, merge=merge)] if parallel else outputs
    work, end = State("Work", Prompt("Go."), *body), State("End", final=True)
    return Flow("bench-parallel", initial=work, transitions=[Transition(work, end)])


def _wall(flow: Flow, seconds: float) -> float:
    profile = ModelProfile(name="slow", model="slow-model", provider="scripted", api_key_env=None)
    script = ScriptedLLM(["reply"], latency_s=seconds, cycle=True)
    t0 = time.perf_counter()
    result = run(flow, "bench", models=profile, scripts={"slow": script}, telemetry=False)
    assert result.stop_reason == "final", result.error
    return time.perf_counter() - t0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--branches", type=int, default=4)
    parser.add_argument("--seconds", type=float, default=0.5)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    outputs = _branches(args.branches, args.seconds)
    par = statistics.median(_wall(_flow(outputs, True), args.seconds) for _ in range(args.repeats))
    seq = statistics.median(_wall(_flow(outputs, False), args.seconds) for _ in range(args.repeats))
    print(f"{args.branches} branches of {args.seconds:g}s, median of {args.repeats}:")
    print(f"  sequential {seq:6.3f}s   parallel {par:6.3f}s   ratio {par / seq:5.3f} (ideal {1 / args.branches:5.3f})")


if __name__ == "__main__":
    main()

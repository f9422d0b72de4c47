"""Benchmark `verify`: time and explored product size against graph size and bound (issue 60).

Usage: .venv/bin/python scripts/bench_verify.py [--repeat R] [--seed S]

Random flows with 5 to 50 working states (each with three conditional rules to random states, an
``ANY`` rule to End and an unconditional rule to the next state) are checked against "End only at
the end", which every path keeps, so the whole product is explored (the worst case). Bounds 10
to 50. Then the paper's SQL flow against each property spec of ``tasks/kit/specs``. Prints
Markdown tables; each time is the median of ``--repeat`` runs.
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
import warnings
from collections.abc import Callable
from pathlib import Path

from stateflow import ANY, LLM, Flow, State, Transition, last_contains
from stateflow.spec import AgentSpec
from stateflow.spec.verify import Verdict, verify

ROOT = Path(__file__).resolve().parents[1]


def random_flow(rng: random.Random, states: int) -> Flow:
    work = [State(f"S{i}", LLM()) for i in range(states)]
    end = State("End", final=True)
    conditions = [last_contains(w) for w in ("a", "b", "c")]
    rules = [Transition(ANY, end, when=last_contains("submit"))]
    for st in work:
        for cond in conditions:
            rules.append(Transition(st, rng.choice(work), cond))
        rules.append(Transition(st, work[(work.index(st) + 1) % states]))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return Flow(f"random-{states}", initial=work[0], states=[*work, end], transitions=rules)


def end_last(states: int) -> AgentSpec:
    names = " ".join(f"S{i}" for i in range(states))
    return AgentSpec.from_text(f"(define end-last (:states {names} End) (:behavior (until (or {names}) End)))")


def timed(repeat: int, fn: Callable[[], Verdict]) -> tuple[float, Verdict]:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - started)
    return statistics.median(times), out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--seed", type=int, default=60)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    print("| states | bound | product states | verify (ms) |")
    print("|---:|---:|---:|---:|")
    for states in (5, 10, 20, 50):
        flow, spec = random_flow(rng, states), end_last(states)
        for bound in (10, 20, 50):
            seconds, verdict = timed(args.repeat, lambda f=flow, s=spec, b=bound: verify(f, s, bound=b))
            assert verdict.holds
            print(f"| {states} | {bound} | {verdict.explored} | {seconds * 1000:.1f} |")
    from stateflow.tasks.sql.flow import sql_flow

    print()
    print("| spec (paper's SQL flow, bound 40) | verdict | product states | verify (ms) |")
    print("|---|---|---:|---:|")
    flow = sql_flow()
    for path in sorted((ROOT / "tasks" / "kit" / "specs").glob("*.lisp")):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            spec = AgentSpec.from_file(path)
        cut_off = "complete" if path.stem == "ends-within-bound" else "prefix"
        seconds, verdict = timed(args.repeat, lambda s=spec, c=cut_off: verify(flow, s, cut_off=c))
        shown = "holds" if verdict.holds else "violated"
        print(f"| `{path.stem}` | {shown} | {verdict.explored} | {seconds * 1000:.2f} |")


if __name__ == "__main__":
    main()

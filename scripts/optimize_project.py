#!/usr/bin/env python
"""Project what a search space will cost before running it: candidates, rungs, model-hours.

Usage::

    .venv/bin/python scripts/optimize_project.py SPACE.toml [ARCHIVE.jsonl ...] [--front-extra 2]

No model runs. Every candidate of the space (exactly as ``stateflow optimize`` expands it) is
priced in model-seconds per episode from archived records of the same flow (matched by the
flow fingerprint in their identity, so ``sf_agent_hint+values+question_last+answer_vote`` finds
``sf_agent_vote_question_last``'s records) and the same models. A candidate with no record is
priced from its neighbours, and the table says so:

* a mixed assignment: the mean of its recipe's two pure assignments;
* a ``prefix_first`` recipe: its recipe without ``prefix_first`` divided by 1.74 (docs/results.md,
  "Throughput on the embedded model": 1.74-1.80x more episodes per hour at equal success);
* anything else: the mean of the priced candidates on the same default profile.

The search is then walked rung by rung with halving alone (``ceil(n / eta)`` go on, plus
``--front-extra`` candidates kept for the front): no racing, which is the expensive case when
the candidates are close, as tuned variants of one flow are. Each rung's episodes are priced at
the mean of all candidates (which survives is not known in advance).
"""

from __future__ import annotations

import argparse
import math
from collections import defaultdict
from pathlib import Path

from stateflow.tasks.agents.methods import resolve_method
from stateflow.tasks.cli.run import _assignment
from stateflow.tasks.harness.archive import RecordArchive
from stateflow.tasks.harness.identity import flow_fingerprint
from stateflow.tasks.harness.registry import default_registry
from stateflow.tasks.kit.levers import RECIPE_SEPARATOR
from stateflow.tasks.optimize.search import episode_cost, rung_sizes
from stateflow.tasks.optimize.space import SearchPlan, expand, load_space

_SQL = [Path("docs/data/paper/intercode-sql/local-small.jsonl"), Path("docs/data/paper/intercode-sql/local.jsonl")]
_SQL += [Path("docs/data/levers/intercode-sql/local.jsonl"), Path("docs/data/levers/intercode-sql/local-small.jsonl")]
_BASH = [Path("docs/data/paper/intercode-bash/local-small.jsonl"), Path("docs/data/paper/intercode-bash/local.jsonl")]
PREFIX_FIRST_SPEEDUP = 1.74


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    ap.add_argument("space", type=Path)
    ap.add_argument("archives", nargs="*", type=Path)
    ap.add_argument("--front-extra", type=int, default=2, help="candidates kept per rung for the front")
    ap.add_argument("--pool", type=int, default=100, help="tasks in the searched pool (dev: SQL 100, Bash 50)")
    ap.add_argument("--heldout", type=int, default=100, help="tasks in the held-out sample")
    args = ap.parse_args()
    space = load_space(args.space)
    bench = default_registry().get(space.benchmark)
    models, _ = _assignment([], None)
    plan = expand(space, bench, models, where=str(args.space))
    archives = args.archives or (_SQL if space.benchmark == "intercode-sql" else _BASH)
    measured: dict[tuple[str, str], list[float]] = defaultdict(list)
    for path in archives:
        for r in RecordArchive(path).load():
            if r.identity and r.sample != "heldout":
                measured[(r.identity["flow_sha256"], r.models)].append(episode_cost(r, "model_seconds"))

    def fingerprint(method: str) -> str:
        return flow_fingerprint(resolve_method(bench, method).build(True))

    def recorded(method: str, label: str) -> float | None:
        costs = measured.get((fingerprint(method), label))
        return sum(costs) / len(costs) if costs else None

    prices: dict[str, tuple[float | None, str]] = {}
    for c in plan.candidates:
        found = recorded(c.method, c.models_label)
        prices[c.key] = (found, "recorded") if found is not None else (None, "")
    for c in plan.candidates:
        if prices[c.key][0] is not None:
            continue
        profiles = sorted({p for _, p in c.models})
        parts = c.method.split(RECIPE_SEPARATOR)
        if "prefix_first" in parts:
            plain = RECIPE_SEPARATOR.join(p for p in parts if p != "prefix_first")
            base = recorded(plain, c.models_label)
            if base is None and len(profiles) == 2:
                pure = [recorded(plain, f"default={p}") for p in profiles]
                base = sum(pure) / 2 if None not in pure else None  # type: ignore[operator]
            if base is not None:
                prices[c.key] = (base / PREFIX_FIRST_SPEEDUP, "recipe without prefix_first / 1.74")
                continue
        if len(profiles) == 2:
            pure = [recorded(c.method, f"default={p}") for p in profiles]
            if None not in pure:
                prices[c.key] = (sum(pure) / 2, "mean of the two pure assignments")  # type: ignore[arg-type]
    for c in plan.candidates:
        if prices[c.key][0] is None:
            default = dict(c.models)["default"]
            same = [
                p
                for k, (p, how) in prices.items()
                if p is not None and not how.startswith("mean of the priced") and default in k_label(plan, k)
            ]
            prices[c.key] = (sum(same) / len(same), f"mean of the priced {default} candidates")
    print(
        f"{args.space}: {len(plan.candidates)} candidates ({plan.skipped_sets} lever sets skipped, "
        f"{plan.duplicates} duplicate flows)\n"
    )
    print("| candidate | model-s / episode | priced from |\n|---|---:|---|")
    for c in plan.candidates:
        p, how = prices[c.key]
        print(f"| `{c.label}` | {p:.1f} | {how} |")
    mean = sum(p for p, _ in prices.values()) / len(prices)  # type: ignore[misc]
    exhaustive = sum(p * args.pool for p, _ in prices.values())  # type: ignore[misc]
    sizes = rung_sizes(space.search.first_rung, space.search.eta, args.pool)
    alive, done, spent = len(plan.candidates), 0, 0.0
    print("\n| rung | tasks | candidates | new episodes | model-s |\n|---:|---:|---:|---:|---:|")
    for r, n in enumerate(sizes):
        episodes = alive * (n - done)
        spent += episodes * mean
        print(f"| {r} | {n} | {alive} | {episodes} | {episodes * mean:,.0f} |")
        done = n
        alive = min(alive, math.ceil(alive / space.search.eta) + args.front_extra)
    held = args.heldout * mean
    print(
        f"\nmean {mean:.1f} model-s per episode; exhaustive {exhaustive:,.0f} model-s ({exhaustive / 3600:.1f} h); "
        f"projected search {spent:,.0f} model-s ({spent / 3600:.1f} h, ratio {spent / exhaustive:.2f}); "
        f"budget {space.budget.limit:,.0f} ({space.budget.limit / exhaustive:.2f} of exhaustive"
        + (f", capped at a share of {space.budget.share:.2f}" if space.budget.share else "")
        + "); "
        f"+ held-out ~{held:,.0f} model-s ({held / 60:.0f} min)"
    )


def k_label(plan: SearchPlan, key: str) -> str:
    return next(c.models_label for c in plan.candidates if c.key == key).split(",")[0]


if __name__ == "__main__":
    main()

#!/usr/bin/env python
"""Replay ``stateflow optimize``'s strategy over archived records: what would it have spent?

Usage::

    .venv/bin/python scripts/optimize_replay.py [ARCHIVE.jsonl ...] [--prefix sf_agent,oneshot]
        [--first-rung 10] [--eta 2] [--alpha 0.05]

Every (method, model profile) of the archives (default: the SQL paper archive of both embedded
models, ``docs/data/paper/intercode-sql/``) with a record on every task of the common pool is a
candidate; the rungs, cuts and pool order are exactly the optimizer's
(:func:`stateflow.tasks.optimize.racing.next_rung`, :func:`stateflow.tasks.optimize.search.rung_sizes`,
the space's default seed). No model runs: each episode costs what its archived record measured
(model-seconds), so this prints the search's cost against the exhaustive one, which candidates
survive, and whether the best by the full pool is among them.
"""

from __future__ import annotations

import argparse
import random
from collections import defaultdict
from pathlib import Path

from stateflow.tasks.harness.archive import RecordArchive
from stateflow.tasks.kit.episode_record import EpisodeRecord
from stateflow.tasks.optimize.racing import Standing, next_rung
from stateflow.tasks.optimize.search import episode_cost, rung_sizes
from stateflow.tasks.optimize.space import SearchSettings

_DEFAULT = [Path("docs/data/paper/intercode-sql/local-small.jsonl"), Path("docs/data/paper/intercode-sql/local.jsonl")]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    ap.add_argument("archives", nargs="*", type=Path, default=_DEFAULT)
    ap.add_argument("--prefix", default="sf_agent,oneshot", help="methods starting with one of these")
    ap.add_argument("--first-rung", type=int, default=10)
    ap.add_argument("--eta", type=int, default=2)
    ap.add_argument("--alpha", type=float, default=0.05)
    args = ap.parse_args()
    prefixes = tuple(p.strip() for p in args.prefix.split(",") if p.strip())
    cands: dict[str, dict[int, EpisodeRecord]] = defaultdict(dict)
    for path in args.archives:
        for r in RecordArchive(path).load():
            if (not prefixes or r.method.startswith(prefixes)) and r.sample != "heldout":
                cands[f"{r.method} | {r.models}"][r.task] = r
    pool_sets = [set(v) for v in cands.values()]
    common = set.intersection(*pool_sets) if pool_sets else set()
    cands = {k: v for k, v in cands.items() if common <= set(v)}
    pool = sorted(common)
    random.Random(SearchSettings().seed).shuffle(pool)
    alive, spent, done = list(cands), 0.0, defaultdict(set)
    for n in rung_sizes(args.first_rung, args.eta, len(pool)):
        tasks = pool[:n]
        for c in alive:
            for t in tasks:
                if t not in done[c]:
                    done[c].add(t)
                    spent += episode_cost(cands[c][t], "model_seconds")
        if n == len(pool):  # as the search: the whole pool run, nothing left to cut for
            print(f"rung of {n:3d} tasks: {len(alive):2d} candidates ran the whole pool")
            break
        standings = [
            Standing(
                c,
                {t: cands[c][t].success for t in tasks},
                sum(episode_cost(cands[c][t], "model_seconds") for t in tasks) / n,
            )
            for c in alive
        ]
        kept = {v.key for v in next_rung(standings, eta=args.eta, alpha=args.alpha) if v.kept}
        print(f"rung of {n:3d} tasks: {len(alive):2d} candidates -> {len(kept)}")
        alive = [c for c in alive if c in kept]
    exhaustive = sum(episode_cost(r, "model_seconds") for c in cands for t, r in cands[c].items() if t in common)
    best = max(cands, key=lambda c: sum(cands[c][t].success for t in common))
    print(
        f"{len(cands)} candidates on {len(pool)} tasks: spent {spent:.0f} model-s, exhaustive {exhaustive:.0f} "
        f"model-s, ratio {spent / exhaustive:.2f}"
    )
    print("left:", "; ".join(alive))
    print(
        f"best on the whole pool: {best} ({sum(cands[best][t].success for t in common)} solved), "
        f"{'kept' if best in alive else 'NOT kept'} by the search"
    )


if __name__ == "__main__":
    main()

#!/usr/bin/env python
"""Episodes per hour on the embedded model: prompts laid out for reuse and tasks ordered by database,
against today's layout in index order, interleaved in one run (issue 49).

Usage (wrap it in the shared model lock; pieces can run one after another into one --out)::

    flock /work/model.lock .venv/bin/python scripts/bench_throughput.py --methods oneshot,vote \\
        --workers 1,2 [--tasks dev|N] [--chunks 8] [--budget-min 30] [--model local] [--out DIR] [--order-arm oneshot]
    .venv/bin/python scripts/bench_throughput.py --report --out DIR   # the table only, no model
    .venv/bin/python scripts/bench_throughput.py --simulate --methods oneshot,vote --out DIR  # no model

Arms, per method pair (``oneshot``: ``oneshot_direct_question_last`` -> ``oneshot_direct_prefix_first``;
``vote``: ``sf_agent_vote_question_last`` -> ``sf_agent_vote_prefix_first``, the best preset):

* ``old``: today's method (the question is the first message) in index order (``--order method``);
* ``new``: the ``prefix_first`` layout in ``--order context`` (tasks grouped by database);
* ``new_index`` (``--order-arm PAIR``): the new layout in index order, to separate the two parts.

Each arm of each chunk starts with a freshly started server (an empty prompt cache), so no arm
finds another arm's prompts cached; what it reuses, it reused within its own chunk.

Interleaving: the selected tasks (the ``dev`` sample, or its first N) are cut into ``--chunks``
chunks of whole databases; for each chunk every arm runs the chunk's tasks, the arms' order
alternating from chunk to chunk (ABBA...). Load from other processes on the machine then falls on
all arms alike, and the new arm's grouping is the same as on the whole sample (a database is never
split between chunks). Every arm runs through :func:`stateflow.tasks.harness.runner.evaluate`
against one embedded server (the default pool's: prompt-state cache, n_threads = cores), with the
response grammar on, as ``stateflow run`` uses the embedded model.

Measured per arm: wall seconds (episodes per hour), evaluated / sent prompt tokens from the
records (the server's ``cached_tokens`` per request) and from the server's own running totals
(``GET /stateflow/stats`` before and after), success; the server's resident memory and cache size.
Paired: tasks won and lost by ``new`` against ``old`` with the exact McNemar p, and how many
rewards differ between arms that send identical prompts (``new`` vs ``new_index``; workers 1 vs 2).

Every chunk's timing is appended to ``OUT/timings.jsonl`` and its episodes to the arm's results
directory, so an interrupted bench resumes with the next chunk (a chunk cut short is re-timed
only for the episodes it still runs: its line is written when it completes).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from stateflow.tasks.harness.records import ResultsFile, latest_records
from stateflow.tasks.harness.runner import RunSpec, evaluate
from stateflow.tasks.kit.benchmark import EnvOptions
from stateflow.tasks.kit.episode_record import EpisodeRecord
from stateflow.tasks.kit.samples import sample_of
from stateflow.tasks.kit.stats import mcnemar_exact_p
from stateflow.tasks.reports.metrics import evaluated_share
from stateflow.tasks.sql.benchmark import INTERCODE_SQL

from stateflow import ModelAssignment

DATASET = "spider"
PAIRS = {
    "oneshot": ("oneshot_direct_question_last", "oneshot_direct_prefix_first"),
    "vote": ("sf_agent_vote_question_last", "sf_agent_vote_prefix_first"),
}


@dataclass(frozen=True)
class Arm:
    name: str
    method: str
    order: str


@dataclass(frozen=True)
class CoreConfig:
    """How the two cores serve the ``new`` arm (part 4 of issue 49)."""

    name: str
    workers: int
    replicas: int
    what: str


CONFIGS = {
    c.name: c
    for c in (
        CoreConfig("w1", 1, 1, "workers 1, one server with a thread per core"),
        CoreConfig("w2", 2, 1, "workers 2, one server with a thread per core (requests queue)"),
        CoreConfig("w2r2", 2, 2, "workers 2, one pinned 1-thread server per core, routed by database"),
    )
}


def arms(pair: str, order_arm: bool) -> list[Arm]:
    old, new = PAIRS[pair]
    out = [Arm("old", old, "method"), Arm("new", new, "context")]
    if order_arm:
        out.append(Arm("new_index", new, "method"))
    return out


def chunks_of_databases(tasks: list[tuple[int, str]], k: int) -> list[list[int]]:
    """``k`` chunks of about equal size, each made of whole databases (in order of first index)."""
    groups: dict[str, list[int]] = {}
    for i, ctx in sorted(tasks):
        groups.setdefault(ctx, []).append(i)
    target = len(tasks) / k
    out: list[list[int]] = [[]]
    for members in groups.values():
        if len(out[-1]) >= target and len(out) < k:
            out.append([])
        out[-1].extend(members)
    return [sorted(c) for c in out if c]


def server_snapshot(model: str) -> dict[str, Any]:
    """The server's (or the replicas' summed) running totals and resident memory."""
    from stateflow.backends.local import default_pool
    from stateflow.backends.local.replicas import ReplicaSet

    server = default_pool().server(model)
    stats = server.stats()
    pids = server.pids if isinstance(server, ReplicaSet) else [server.pid] if server.pid else []
    rss = 0
    for pid in pids:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                rss += int(line.split()[1]) * 1024
    return stats | {"rss_bytes": rss}


def fresh_servers(model: str, replicas: int) -> None:
    """Stop the model's server(s) and start ``replicas`` new ones (empty prompt caches), warmed."""
    from stateflow.backends.local import default_pool, start_servers
    from stateflow.profiles import BUILTIN_PROFILES

    pool = default_pool()
    pool.discard(model)
    pool.server(model, replicas=replicas)
    start_servers([BUILTIN_PROFILES[model]], pool, replicas=replicas)


@dataclass(frozen=True)
class TimedArm:
    """One arm's evaluation of one chunk, timed against the server's own running totals."""

    finished: int
    wall_s: float
    before: dict[str, Any]
    after: dict[str, Any]

    def line(self, **fields: Any) -> dict[str, Any]:
        """The timings.jsonl line: ``fields`` (which arm, which chunk) then what was measured."""
        return fields | {
            "ran": self.finished,
            "wall_s": round(self.wall_s, 2),
            "server_sent": self.after["prompt_tokens"] - self.before["prompt_tokens"],
            "server_evaluated": self.after["evaluated_prompt_tokens"] - self.before["evaluated_prompt_tokens"],
            "server_requests": self.after["requests"] - self.before["requests"],
            "rss_bytes": self.after["rss_bytes"],
            "cache_bytes": self.after["cache_bytes"],
            "cache_entries": self.after["cache_entries"],
            "load1": os.getloadavg()[0],
        }


def chunk_spec(model: str, method: str, out: Path, chunk: list[int], workers: int, order: str) -> RunSpec:
    """One arm's run of one chunk: ``method`` on the chunk's Spider tasks, the response grammar on
    (as ``stateflow run`` uses the embedded model), every state on ``model``."""
    return RunSpec(
        INTERCODE_SQL,
        (method,),
        models=ModelAssignment.of(model),
        models_label=f"default={model}",
        out=out,
        dataset=DATASET,
        tasks=",".join(map(str, chunk)),
        workers=workers,
        grammar=True,
        order=order,  # type: ignore[arg-type]
    )


def timed_arm(spec: RunSpec, model: str) -> TimedArm:
    """Evaluate ``spec`` (no progress bar) between two snapshots of ``model``'s server(s)."""
    before = server_snapshot(model)
    started = time.perf_counter()
    summary = evaluate(spec, progress=False)
    wall = time.perf_counter() - started
    return TimedArm(summary.finished, wall, before, server_snapshot(model))


def append_line(timings: Path, line: dict[str, Any]) -> None:
    with timings.open("a") as fh:
        fh.write(json.dumps(line) + "\n")


def warm_databases(chunk: list[int]) -> None:
    """Reset the environment once on every task of ``chunk``, untimed: the first arm of a chunk
    would otherwise pay for preparing its databases (seconds per database on a loaded machine;
    in a trial the first arm's episodes took 25-50 s against 5 s for the same tasks later)."""
    env = INTERCODE_SQL.open_env(EnvOptions(dataset=DATASET, backend="embedded"))
    try:
        for i in chunk:
            env.reset(i)
    finally:
        env.close()


def run_configs(args: argparse.Namespace) -> None:
    """The ``new`` arm of each method under each core configuration, interleaved by chunk."""
    chunks = selected_chunks(args)
    timings = args.out / "timings.jsonl"
    args.out.mkdir(parents=True, exist_ok=True)
    done = {
        (t["pair"], t.get("config"), t["chunk"])
        for t in map(json.loads, timings.read_text().splitlines() if timings.exists() else [])
    }
    new_chunks = 0
    for c, chunk in enumerate(chunks):
        if c < args.first_chunk:
            continue
        if args.chunk_limit and new_chunks >= args.chunk_limit:
            break
        todo = [(p, k) for p in args.methods for k in args.configs if (p, k, c) not in done]
        if not todo:
            continue
        new_chunks += 1
        warm_databases(chunk)
        # rotate the configurations' order from chunk to chunk: load falls on all alike
        shift = c % len(args.configs)
        order = args.configs[shift:] + args.configs[:shift]
        for pair in args.methods:
            for name in order:
                if (pair, name, c) in done:
                    continue
                cfg = CONFIGS[name]
                method = PAIRS[pair][1]
                fresh_servers(args.model, cfg.replicas)
                spec = chunk_spec(args.model, method, args.out / f"{pair}-{name}", chunk, cfg.workers, "context")
                timed = timed_arm(spec, args.model)
                line = timed.line(
                    pair=pair,
                    config=name,
                    arm="new",
                    method=method,
                    order="context",
                    workers=cfg.workers,
                    replicas=cfg.replicas,
                    chunk=c,
                    tasks=len(chunk),
                    task_ids=chunk,
                )
                append_line(timings, line)
                print(
                    f"chunk {c} {pair} {name}: {timed.finished} episodes in {timed.wall_s:.0f} s, "
                    f"server eval/sent {line['server_evaluated'] / max(1, line['server_sent']):.2f}, "
                    f"RSS {line['rss_bytes'] / 2**30:.2f} GiB",
                    flush=True,
                )
    from stateflow.backends.local import default_pool

    default_pool().discard(args.model)


def _config_records(out: Path, pair: str, name: str) -> dict[int, EpisodeRecord]:
    path = out / f"{pair}-{name}" / "results.jsonl"
    if not path.exists():
        return {}
    return {r.task: r for r in latest_records(ResultsFile(path).load().records)}


def report_configs(out: Path) -> str:
    """Episodes per hour of each core configuration on the chunks every configuration finished."""
    lines = [json.loads(x) for x in (out / "timings.jsonl").read_text().splitlines()]
    # a chunk cut short (the bench stopped by its time limit) covers fewer tasks than the others
    lines = [t for t in lines if t.get("config") and t["ran"] == t["tasks"]]
    rows = [
        "| method | config | workers | replicas | chunks | episodes | wall s | episodes/h | x w1 | "
        "eval/sent (server) | SR % | won / lost vs w1 | McNemar p | server RSS GiB |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for pair in sorted({t["pair"] for t in lines}):
        mine = [t for t in lines if t["pair"] == pair]
        names = [n for n in CONFIGS if any(t["config"] == n for t in mine)]
        common = set.intersection(*({t["chunk"] for t in mine if t["config"] == n} for n in names))
        rate: dict[str, float] = {}
        for n in names:
            ts = [t for t in mine if t["config"] == n and t["chunk"] in common]
            rate[n] = sum(t["ran"] for t in ts) / max(1e-9, sum(t["wall_s"] for t in ts)) * 3600
        base = _config_records(out, pair, "w1")
        for n in names:
            ts = [t for t in mine if t["config"] == n and t["chunk"] in common]
            wanted = {i for t in ts for i in t["task_ids"]}
            recs = {i: r for i, r in _config_records(out, pair, n).items() if i in wanted}
            _, won, lost, p = _paired({i: r for i, r in base.items() if i in wanted}, recs)
            sent = sum(t["server_sent"] for t in ts)
            cfg = CONFIGS[n]
            rows.append(
                f"| {PAIRS[pair][1]} | {n} | {cfg.workers} | {cfg.replicas} | {len(common)} | "
                f"{sum(t['ran'] for t in ts)} | {sum(t['wall_s'] for t in ts):.0f} | {rate[n]:.0f} | "
                f"{rate[n] / rate['w1'] if rate.get('w1') else 0:.2f} | "
                f"{sum(t['server_evaluated'] for t in ts) / sent if sent else 0:.2f} | "
                f"{100 * sum(r.success for r in recs.values()) / max(1, len(recs)):.1f} | "
                f"{won} / {lost} | {p:.3f} | {max(t['rss_bytes'] for t in ts) / 2**30:.2f} |"
            )
    return "\n".join(rows)


def selected_chunks(args: argparse.Namespace) -> list[list[int]]:
    """The chunks of whole databases of the selected dev tasks."""
    env = INTERCODE_SQL.open_env(EnvOptions(dataset=DATASET, backend="embedded"))
    try:
        tasks = [env.task(i) for i in range(len(env))]
    finally:
        env.close()
    dev = list(sample_of("dev", DATASET, tasks).indices)
    chosen = dev if args.tasks == "dev" else dev[: int(args.tasks)]
    return chunks_of_databases([(i, tasks[i].context) for i in chosen], args.chunks)


def simulate_layout(args: argparse.Namespace) -> str:
    """Evaluated / sent prompt words per arm against a fake server with an unbounded prefix cache.

    No model runs: every reply is one fixed statement, so this only shows what the prompt layout
    and the order let a prefix cache reuse (in words, not tokens; an unbounded cache, where the
    real one holds about 1 GiB of states). For the one-shot the prompt does not depend on any
    reply, so its shares are those the real server would see with a large enough cache; for the
    vote only each episode's first call is the real prompt. Timings here mean nothing.
    """
    from stateflow import ModelProfile
    from stateflow.testing.fake_openai import FakeOpenAIServer

    chunks = selected_chunks(args)
    rows = ["| method | arm | order | episodes | eval/sent (words, unbounded cache) |", "|---|---|---|---|---|"]
    for pair in args.methods:
        for arm in arms(pair, True):
            with FakeOpenAIServer(lambda *a: "Action: execute[SELECT 1]", prefix_cache=True) as srv:
                profile = ModelProfile(name="fake", model="m", provider="llamacpp", base_url=srv.url, api_key_env=None)
                for chunk in chunks:  # one server per arm: arms do not share a cache
                    evaluate(
                        RunSpec(
                            INTERCODE_SQL,
                            (arm.method,),
                            models=ModelAssignment.of(profile),
                            models_label="default=fake",
                            out=args.out / "simulated" / f"{pair}-{arm.name}",
                            dataset=DATASET,
                            tasks=",".join(map(str, chunk)),
                            grammar=True,
                            order=arm.order,  # type: ignore[arg-type]
                        ),
                        progress=False,
                    )
            sent = sum(p for p, _ in srv.cached_counts)
            cached = sum(c for _, c in srv.cached_counts)
            episodes = sum(map(len, chunks))
            rows.append(f"| {arm.method} | {arm.name} | {arm.order} | {episodes} | {(sent - cached) / sent:.2f} |")
    return "\n".join(rows)


def run_bench(args: argparse.Namespace) -> None:
    from stateflow.backends.local import default_pool

    chunks = selected_chunks(args)
    timings = args.out / "timings.jsonl"
    args.out.mkdir(parents=True, exist_ok=True)
    done = {
        (t["pair"], t["arm"], t["workers"], t["chunk"])
        for t in map(json.loads, timings.read_text().splitlines() if timings.exists() else [])
    }
    default_pool().server(args.model, n_threads=None).ensure_running()
    began = time.monotonic()
    new_chunks = 0
    for c, chunk in enumerate(chunks):
        if c < args.first_chunk:
            continue
        if args.budget_min and time.monotonic() - began > 60 * args.budget_min:
            print(f"time budget of {args.budget_min} min spent: stopping before chunk {c}", flush=True)
            break
        if args.chunk_limit and new_chunks >= args.chunk_limit:
            break
        todo = [(p, a.name, w) for p in args.methods for w in args.workers for a in arms(p, p in args.order_arm)]
        if all((p, a, w, c) in done for p, a, w in todo):
            continue
        new_chunks += 1
        for pair in args.methods:
            for workers in args.workers:
                plan = arms(pair, pair in args.order_arm)
                if c % 2:  # ABBA: the arm that ran first runs last in the next chunk
                    plan = plan[::-1]
                for arm in plan:
                    key = (pair, arm.name, workers, c)
                    if key in done:
                        continue
                    # A fresh server (empty prompt cache) for every arm: arms that send identical
                    # prompts (new / new_index, workers 1 / 2) would otherwise find each other's
                    # whole prompts cached. Restarting takes a few seconds, outside the timing.
                    server = default_pool().server(args.model)
                    server.stop()
                    server.ensure_running()
                    out = args.out / f"{pair}-{arm.name}-w{workers}"
                    spec = chunk_spec(args.model, arm.method, out, chunk, workers, arm.order)
                    timed = timed_arm(spec, args.model)
                    line = timed.line(
                        pair=pair,
                        arm=arm.name,
                        method=arm.method,
                        order=arm.order,
                        workers=workers,
                        chunk=c,
                        tasks=len(chunk),
                        task_ids=chunk,
                    )
                    append_line(timings, line)
                    print(
                        f"chunk {c} {pair} {arm.name} w{workers}: {timed.finished} episodes in {timed.wall_s:.0f} s, "
                        f"server eval/sent {line['server_evaluated'] / max(1, line['server_sent']):.2f}",
                        flush=True,
                    )


def _records(out: Path, pair: str, arm: str, workers: int) -> dict[int, EpisodeRecord]:
    path = out / f"{pair}-{arm}-w{workers}" / "results.jsonl"
    if not path.exists():
        return {}
    return {r.task: r for r in latest_records(ResultsFile(path).load().records)}


def _paired(a: dict[int, EpisodeRecord], b: dict[int, EpisodeRecord]) -> tuple[int, int, int, float]:
    common = sorted(set(a) & set(b))
    won = sum(b[i].success and not a[i].success for i in common)
    lost = sum(a[i].success and not b[i].success for i in common)
    return len(common), won, lost, mcnemar_exact_p(won, lost)


def report(out: Path) -> str:
    path = out / "timings.jsonl"
    if not path.exists():
        return f"{path}: nothing measured yet (run the bench first)"
    lines = [json.loads(x) for x in path.read_text().splitlines()]
    by: dict[tuple[str, str, int], list[dict[str, Any]]] = defaultdict(list)
    for t in lines:
        by[(t["pair"], t["arm"], t["workers"])].append(t)
    rows = [
        "| method | arm | workers | chunks | episodes | wall s | episodes/h | x old | eval/sent (records) | "
        "eval/sent (server) | SR % | server RSS GiB | cache MiB |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    rate: dict[tuple[str, str, int], float] = {}
    # only chunks every arm of a (method, workers) cell finished count: the arms cover the same tasks
    common: dict[tuple[str, int], set[int]] = {}
    for (pair, _, w), ts in by.items():
        done = {t["chunk"] for t in ts}
        common[(pair, w)] = common.get((pair, w), done) & done
    for (pair, arm, w), ts in sorted(by.items()):
        ts = [t for t in ts if t["chunk"] in common[(pair, w)]]
        ran = sum(t["ran"] for t in ts)
        wall = sum(t["wall_s"] for t in ts)
        rate[(pair, arm, w)] = ran / wall * 3600 if wall else 0.0
    arm_rank = {"old": 0, "new": 1, "new_index": 2}
    for (pair, arm, w), ts in sorted(by.items(), key=lambda kv: (kv[0][0], kv[0][2], arm_rank[kv[0][1]])):
        both = common[(pair, w)]
        ts = [t for t in ts if t["chunk"] in both]
        wanted = {i for t in ts for i in t["task_ids"]}
        recs = {i: r for i, r in _records(out, pair, arm, w).items() if i in wanted}
        sent = sum(t["server_sent"] for t in ts)
        evaluated = sum(t["server_evaluated"] for t in ts)
        share = evaluated_share(recs.values())
        old = rate.get((pair, "old", w)) or 0.0
        rows.append(
            f"| {PAIRS[pair][0 if arm == 'old' else 1]} | {arm} | {w} | {len(both)} | {sum(t['ran'] for t in ts)} | "
            f"{sum(t['wall_s'] for t in ts):.0f} | {rate[(pair, arm, w)]:.0f} | "
            f"{rate[(pair, arm, w)] / old if old else 0:.2f} | {share if share is not None else 0:.2f} | "
            f"{evaluated / sent if sent else 0:.2f} | "
            f"{100 * sum(r.success for r in recs.values()) / max(1, len(recs)):.1f} | "
            f"{max(t['rss_bytes'] for t in ts) / 2**30:.2f} | {max(t['cache_bytes'] for t in ts) / 2**20:.0f} |"
        )
    rows += ["", "Paired rewards (same tasks):", ""]
    rows += [
        "| method | workers | a | b | tasks | b won | b lost | exact McNemar p |",
        "|---|---|---|---|---|---|---|---|",
    ]
    pairs = sorted({(p, w) for p, _, w in by})
    for pair, w in pairs:
        for a, b in (("old", "new"), ("new_index", "new")):
            ra, rb = _records(out, pair, a, w), _records(out, pair, b, w)
            if ra and rb:
                n, won, lost, p = _paired(ra, rb)
                rows.append(f"| {pair} | {w} | {a} | {b} | {n} | {won} | {lost} | {p:.3f} |")
    for pair in sorted({p for p, _, _ in by}):
        for arm in ("old", "new"):
            r1, r2 = _records(out, pair, arm, 1), _records(out, pair, arm, 2)
            if r1 and r2:
                common = set(r1) & set(r2)
                changed = sum(r1[i].reward_raw != r2[i].reward_raw for i in common)
                rows.append(
                    f"| {pair} | 1 vs 2 | {arm} w1 | {arm} w2 | {len(common)} | rewards changed: {changed} | | |"
                )
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--methods", default="oneshot", help="comma list of: " + ", ".join(PAIRS))
    parser.add_argument("--workers", default="1", help="comma list, e.g. 1,2")
    parser.add_argument("--tasks", default="dev", help="dev (100 tasks) or N: the first N of the dev sample")
    parser.add_argument("--chunks", type=int, default=4)
    parser.add_argument("--model", default="local")
    parser.add_argument("--out", type=Path, default=Path("/tmp/bench_throughput"))
    parser.add_argument(
        "--budget-min",
        type=float,
        default=0.0,
        help="start no new chunk after this many minutes (0: no limit); every cell then has the same chunks",
    )
    parser.add_argument(
        "--order-arm", default="", help="comma list of method pairs that also run the new layout in index order"
    )
    parser.add_argument(
        "--simulate", action="store_true", help="no model: the prompt-prefix reuse of each arm against a fake server"
    )
    parser.add_argument("--report", action="store_true", help="print the table of what --out holds and stop")
    parser.add_argument(
        "--configs",
        default="",
        help="comma list of core configurations (" + ", ".join(CONFIGS) + "): run the new arm of each "
        "method under each, instead of old vs new",
    )
    parser.add_argument("--chunk-limit", type=int, default=0, help="run at most this many new chunks, then stop")
    parser.add_argument("--first-chunk", type=int, default=0, help="skip the chunks before this one")
    args = parser.parse_args(argv)
    args.methods = [m.strip() for m in args.methods.split(",")]
    unknown = [m for m in args.methods if m not in PAIRS]
    if unknown:
        parser.error(f"--methods: unknown {unknown}; choose from {', '.join(PAIRS)}")
    args.workers = [int(w) for w in args.workers.split(",")]
    args.order_arm = {m.strip() for m in args.order_arm.split(",") if m.strip()}
    args.configs = [c.strip() for c in args.configs.split(",") if c.strip()]
    bad = [c for c in args.configs if c not in CONFIGS]
    if bad:
        parser.error(f"--configs: unknown {bad}; choose from {', '.join(CONFIGS)}")
    if args.simulate:
        print(simulate_layout(args))
        return 0
    if args.configs:
        if not args.report:
            run_configs(args)
        print(report_configs(args.out))
        return 0
    if not args.report:
        run_bench(args)
    print(report(args.out))
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Runner throughput and overhead.

1. Harness throughput with the gold-replay oracle on the full sets (Spider 1034, NL2Bash 200;
   the demo sets when ../shared/data is absent): tasks per minute, 1 and 2 workers.
2. A fake OpenAI-compatible server answering after a fixed latency (default 200 ms) with a gold
   replaying policy, over real HTTP, at 1, 2, 4 and 8 workers: tasks per minute, speed-up over
   1 worker, and framework time per transition = (episode wall time - time inside model calls)
   / transitions (environment time included).
3. Prompt tokens per task, StateFlow vs SF_Agent vs ReAct, on the same tasks and model
   (``--model local`` for the embedded model; the default is the fake server, whose tokens are words).

Usage: .venv/bin/python scripts/bench_runner.py [--latency 0.2] [--tasks 0:20] [--model local] [--skip-full]
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

from stateflow.envs.datasets import DataNotFoundError, locate_intercode_dir
from stateflow.tasks.harness.registry import default_registry
from stateflow.tasks.harness.runner import RunSpec, evaluate, open_env
from stateflow.tasks.sql.benchmark import INTERCODE_SQL

from stateflow import ModelAssignment, ModelProfile
from stateflow.testing.fake_openai import FakeOpenAIServer


def _run(spec: RunSpec) -> tuple[float, list[dict]]:
    t = time.perf_counter()
    summary = evaluate(spec, progress=False)
    return time.perf_counter() - t, summary.records


def full_sets() -> None:
    try:
        locate_intercode_dir(need="sql")
        sets = [("intercode-sql", "spider"), ("intercode-bash", "nl2bash")]
    except DataNotFoundError:
        sets = [("intercode-sql", "demo"), ("intercode-bash", "demo")]
    print("== oracle throughput (method stateflow) ==")
    for bench, dataset in sets:
        for workers in (1, 2):
            with tempfile.TemporaryDirectory() as out:
                spec = RunSpec(
                    default_registry().get(bench),
                    ("stateflow",),
                    ModelAssignment.of("local"),
                    "oracle",
                    Path(out),
                    dataset=dataset,
                    workers=workers,
                    oracle=True,
                )
                wall, recs = _run(spec)
            ok = sum(r["success"] for r in recs)
            print(
                f"{bench:15} {dataset:8} workers={workers}: {len(recs)} tasks in {wall:6.1f} s = "
                f"{60 * len(recs) / wall:7.0f} tasks/min, {ok} solved"
            )


def _gold_responder(golds: dict[str, str]):
    def reply(model: str, messages: list[dict], body: dict) -> str:
        question = next(m["content"] for m in messages if m["role"] == "user").removeprefix("Question: ")
        gold = golds[question]
        action = f"execute[{gold}]"
        seen = [i for i, m in enumerate(messages) if action in str(m.get("content") or "")]
        if seen and any(m.get("name") == "environment" for m in messages[seen[0] + 1 :]):
            return "Thought: done\nAction: submit"
        return f"Thought: run it\nAction: {action}"

    return reply


def fake_server(latency: float, tasks: str) -> None:
    env = open_env(RunSpec(INTERCODE_SQL, ("stateflow",), ModelAssignment.of("local"), "x", Path("."), dataset="demo"))
    golds = {env.task(i).query: env.task(i).gold for i in range(len(env))}
    env.close()
    print(f"\n== fake LLM server, {latency * 1000:.0f} ms per call, demo SQL tasks {tasks}, method stateflow ==")
    base = None
    with FakeOpenAIServer(_gold_responder(golds), latency_s=latency) as srv:
        prof = ModelProfile(name="fake", model="fake", base_url=srv.url, api_key_env=None)
        for workers in (1, 2, 4, 8):
            with tempfile.TemporaryDirectory() as out:
                spec = RunSpec(
                    INTERCODE_SQL,
                    ("stateflow",),
                    ModelAssignment.of(prof),
                    "default=fake",
                    Path(out),
                    tasks=tasks,
                    workers=workers,
                )
                wall, recs = _run(spec)
            rate = 60 * len(recs) / wall
            base = base or rate
            per_transition = [
                (r["wall_s"] - sum(u["latency_s"] for u in r["usage_by_state"].values()))
                / max(1, len(r["transitions"]))
                for r in recs
            ]
            print(
                f"workers={workers}: {len(recs)} tasks in {wall:5.1f} s = {rate:6.1f} tasks/min "
                f"({rate / base:.2f}x of 1 worker); non-LLM time per transition "
                f"{1000 * statistics.median(per_transition):.2f} ms (median)"
            )


def tokens(model: str | None, tasks: str, latency: float) -> None:
    methods = ("stateflow", "sf_agent", "react")
    print(f"\n== prompt tokens per task, demo SQL tasks {tasks}, model {model or 'fake server (words)'} ==")
    if model:
        assignment, label = ModelAssignment.of(model), f"default={model}"
        with tempfile.TemporaryDirectory() as out:
            _, recs = _run(RunSpec(INTERCODE_SQL, methods, assignment, label, Path(out), tasks=tasks, grammar=True))
    else:
        env = open_env(RunSpec(INTERCODE_SQL, methods, ModelAssignment.of("local"), "x", Path("."), dataset="demo"))
        golds = {env.task(i).query: env.task(i).gold for i in range(len(env))}
        env.close()
        with FakeOpenAIServer(_gold_responder(golds), latency_s=0) as srv:
            prof = ModelProfile(name="fake", model="fake", base_url=srv.url, api_key_env=None)
            with tempfile.TemporaryDirectory() as out:
                _, recs = _run(
                    RunSpec(INTERCODE_SQL, methods, ModelAssignment.of(prof), "default=fake", Path(out), tasks=tasks)
                )
    react = None
    rows = {}
    for m in methods:
        rs = [r for r in recs if r["method"] == m]
        p = statistics.mean(r["prompt_tokens"] for r in rs)
        rows[m] = {
            "prompt_tokens": p,
            "sr": 100 * sum(r["success"] for r in rs) / len(rs),
            "wall_s": statistics.mean(r["wall_s"] for r in rs),
        }
        if m == "react":
            react = p
    for m, row in rows.items():
        print(
            f"{m:10} prompt tokens/task {row['prompt_tokens']:8.0f} ({row['prompt_tokens'] / react:.2f}x ReAct), "
            f"SR {row['sr']:.0f}%, {row['wall_s']:.1f} s/task"
        )
    print(json.dumps(rows))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--latency", type=float, default=0.2)
    ap.add_argument("--tasks", default="0:20")
    ap.add_argument("--model", default=None, help="profile for the token comparison (e.g. local)")
    ap.add_argument("--skip-full", action="store_true", help="skip the full-set oracle throughput")
    args = ap.parse_args()
    if not args.skip_full:
        full_sets()
    fake_server(args.latency, args.tasks)
    tokens(args.model, args.tasks, args.latency)


if __name__ == "__main__":
    main()

"""What enforcement buys: the same spec agent with no enforcement, the decoding monitor and
per-turn grammars, on a fixed sample of InterCode-SQL (Spider dev) and NL2Bash tasks.

One command regenerates everything (runs are resumable: finished episodes are skipped)::

    .venv/bin/python scripts/enforcement_table.py                 # run the sample, then the table
    .venv/bin/python scripts/enforcement_table.py --table-only    # table + plot from recorded runs
    .venv/bin/python scripts/enforcement_table.py --models local-small --limit 10

The sample is fixed: ``--sql-n`` Spider dev and ``--bash-n`` NL2Bash task indices drawn with a
seeded RNG (seed 19), in that order; ``--limit`` runs only the first N of each (the table then
says so through its ``n`` column: nothing is extrapolated). Results go to
``runs/enforcement/<benchmark>-<model>/results.jsonl``; the table and ``docs/enforcement.png`` are
written into ``docs/results-history.md`` (the appendix of ``docs/results.md``) between the enforcement markers.

Valid-step rate = model steps the spec accepted where they were written / (those steps + the
violations the spec found: discarded and corrected by the monitor, kept as is without
enforcement); pooled over all episodes of a cell.
"""

from __future__ import annotations

import argparse
import random
import sys
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from stateflow.tasks.harness.registry import default_registry

ROOT = Path(__file__).resolve().parent.parent
SEED = 19
MODES = ("none", "monitor", "grammar")
BENCHMARKS = {"intercode-sql": ("spider", 1034), "intercode-bash": ("nl2bash", 200)}
BEGIN, END = "<!-- enforcement:begin -->", "<!-- enforcement:end -->"


def sample(benchmark: str, n: int) -> list[int]:
    """The fixed task sample of ``benchmark`` (same indices on every machine)."""
    total = BENCHMARKS[benchmark][1]
    return random.Random(f"{SEED}-{benchmark}").sample(range(total), n)


@dataclass(frozen=True)
class Cell:
    benchmark: str
    model: str
    mode: str
    n: int
    valid_rate: float | None
    success: float
    p_tokens: float
    c_tokens: float
    wall_s: float
    errored: int


def _spec_meta(record: dict[str, Any]) -> dict[str, Any]:
    for m in reversed(record.get("history") or []):
        spec = (m.get("meta") or {}).get("spec")
        if spec:
            return spec
    return {}


def cells(records: list[dict[str, Any]], agent: str) -> list[Cell]:
    groups: dict[tuple[str, str, str], list[dict[str, Any]]] = defaultdict(list)
    for r in records:
        prefix = f"spec_{agent}_"
        if r["method"].startswith(prefix):
            groups[(r["benchmark"], r["models"], r["method"].removeprefix(prefix))].append(r)
    out = []
    for (bench, model, mode), rs in sorted(groups.items()):
        valid = bad = 0
        for r in rs:
            trace = _spec_meta(r).get("trace") or {}
            valid += int(trace.get("valid_steps", 0))
            bad += len(trace.get("violations", []))
        n = len(rs)
        out.append(
            Cell(
                bench,
                model,
                mode,
                n,
                valid / (valid + bad) if valid + bad else None,
                100.0 * sum(bool(r["success"]) for r in rs) / n,
                sum(r["prompt_tokens"] for r in rs) / n,
                sum(r["completion_tokens"] for r in rs) / n,
                sum(r["wall_s"] for r in rs) / n,
                sum(r["status"] != "ok" or bool(_spec_meta(r).get("error")) for r in rs),
            )
        )
    return out


def markdown(table: list[Cell], agent: str, planned: dict[str, int], command: str) -> str:
    lines = [
        BEGIN,
        "## What enforcement buys (spec agents on the local models)",
        "",
        f"Spec agent: library `{agent}` (`stateflow run --method spec_{agent}_{{none,monitor,grammar}}`); "
        f"fixed sample of {planned['intercode-sql']} Spider-dev and {planned['intercode-bash']} NL2Bash tasks "
        f"(seed {SEED}; `n` is what was actually run). Regenerate: `{command}`.",
        "",
        "| benchmark | model | enforcement | n | valid-step rate | success % | prompt tok | completion tok "
        "| time s/task | errored |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for c in table:
        vr = "n/a" if c.valid_rate is None else f"{100 * c.valid_rate:.1f} %"
        lines.append(
            f"| {c.benchmark} | {c.model} | {c.mode} | {c.n} | {vr} | {c.success:.1f} | {c.p_tokens:.0f} "
            f"| {c.c_tokens:.0f} | {c.wall_s:.1f} | {c.errored} |"
        )
    if not table:
        lines.append("| (no episodes recorded yet) | | | | | | | | | |")
    lines += [
        "",
        "Valid-step rate: model steps the spec accepted where they were written / (those + violations "
        "found). Without enforcement violations are measured and kept; the monitor discards and "
        "corrects them; with grammars the model cannot produce most of them. Time is wall time per "
        "episode with the model server pinned to one of the machine's 2 cores (`taskset -c N`, one "
        "thread) and one other pinned job on the other core; compare it within a row group. Errored: "
        "episodes that failed, timed out or ended by a monitor giving up (still scored on what ran).",
        "",
        "![enforcement](enforcement.png)",
        END,
    ]
    return "\n".join(lines)


def plot(table: list[Cell], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    groups = sorted({(c.benchmark, c.model) for c in table})
    fig, axes = plt.subplots(1, 2, figsize=(10, 4.2))
    width = 0.8 / len(MODES)
    for k, mode in enumerate(MODES):
        xs, vr, sr = [], [], []
        for i, g in enumerate(groups):
            cell = next((c for c in table if (c.benchmark, c.model) == g and c.mode == mode), None)
            if cell is None:
                continue
            xs.append(i + (k - 1) * width)
            vr.append(100 * (cell.valid_rate or 0.0))
            sr.append(cell.success)
        axes[0].bar(xs, vr, width, label=mode)
        axes[1].bar(xs, sr, width, label=mode)
    labels = [f"{b.removeprefix('intercode-')}\n{m.removeprefix('default=')}" for b, m in groups]
    for ax, title in zip(axes, ("valid-step rate %", "success %"), strict=True):
        ax.set_xticks(range(len(groups)), labels)
        ax.set_title(title)
        ax.set_ylim(0, 100)
    # one legend for both panels, above them: inside an axis it hides the 100 % bars
    handles, names = axes[0].get_legend_handles_labels()
    fig.legend(handles, names, title="enforcement", loc="upper center", ncol=len(MODES), frameon=False)
    fig.tight_layout(rect=(0, 0, 1, 0.84))
    fig.savefig(path, dpi=110)
    plt.close(fig)


def write_results(text: str, path: Path) -> None:
    doc = path.read_text(encoding="utf-8") if path.exists() else "# Results\n"
    if BEGIN in doc and END in doc:
        head, rest = doc.split(BEGIN, 1)
        doc = head + text + rest.split(END, 1)[1]
    else:
        doc = doc.rstrip("\n") + "\n\n" + text + "\n"
    path.write_text(doc, encoding="utf-8")


def run(args: argparse.Namespace) -> bool:
    """Run the sample (resumable); False when a stop request ended it early."""
    from stateflow.tasks.harness.runner import RunSpec, evaluate

    from stateflow import ModelAssignment
    from stateflow.profiles import BUILTIN_PROFILES

    for model in args.models:
        # one request at a time reaches the embedded server: a client retry of a slow request only
        # queues the same work again, so wait long instead (the episode's own budget still applies)
        profile = BUILTIN_PROFILES[model].with_overrides(timeout=args.timeout, max_retries=0)
        for bench, n in (("intercode-sql", args.sql_n), ("intercode-bash", args.bash_n)):
            indices = sample(bench, n)[: args.limit or n]
            if not indices:
                continue
            spec = RunSpec(
                default_registry().get(bench),
                tuple(f"spec_{args.agent}_{m}" for m in MODES),
                models=ModelAssignment.of(profile),
                models_label=f"default={model}",
                out=args.runs / f"{bench}-{model}",
                dataset=BENCHMARKS[bench][0],
                tasks=",".join(map(str, indices)),
                task_timeout_s=args.timeout,
            )
            if evaluate(spec, progress=not args.quiet).interrupted:
                return False
    return True


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--models", nargs="+", default=["local-small", "local"])
    p.add_argument("--agent", default="react", help="spec agent stem (react, pass, rewoo, ...)")
    p.add_argument("--sql-n", type=int, default=50)
    p.add_argument("--bash-n", type=int, default=30)
    p.add_argument("--limit", type=int, default=0, help="run only the first N tasks of each sample")
    p.add_argument("--timeout", type=float, default=600.0)
    p.add_argument("--runs", type=Path, default=ROOT / "runs" / "enforcement")
    p.add_argument("--docs", type=Path, default=ROOT / "docs")
    p.add_argument("--table-only", action="store_true")
    p.add_argument("--quiet", action="store_true")
    args = p.parse_args(argv)
    from stateflow.profiles import BUILTIN_PROFILES

    unknown = [m for m in args.models if m not in BUILTIN_PROFILES]
    if unknown:  # before any server starts or record is written
        p.error(f"--models: unknown model {unknown[0]!r}; choose from {', '.join(sorted(BUILTIN_PROFILES))}")
    if not args.table_only:
        from stateflow.tasks.cli.stopping import stop_on_signals

        with stop_on_signals():  # SIGTERM, or SIGINT on a backgrounded run: finish in-flight episodes
            finished = run(args)
        if not finished:
            print("stopped: finished episodes are recorded; run the command again to resume", file=sys.stderr)
            return 130
    from stateflow.tasks.reports.metrics import load_results

    dirs = sorted(str(d) for d in args.runs.glob("*") if (d / "results.jsonl").exists())
    table = cells(load_results(dirs), args.agent) if dirs else []
    args.docs.mkdir(parents=True, exist_ok=True)
    if table:
        plot(table, args.docs / "enforcement.png")
    command = ".venv/bin/python scripts/enforcement_table.py"
    write_results(
        markdown(table, args.agent, {"intercode-sql": args.sql_n, "intercode-bash": args.bash_n}, command),
        args.docs / "results-history.md",  # the run-by-run appendix (docs/results.md leads with the headline)
    )
    for c in table:
        print(c)
    return 0


if __name__ == "__main__":
    sys.exit(main())

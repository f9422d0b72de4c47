"""PDoctor's view of results: success by number of actions (the planning limit) and error classes.

Used by ``stateflow report`` (tables on the console, ``planning_limit.png`` and
``pdoctor.json`` beside the other report files) whenever the records include pdoctor episodes;
:func:`markdown` renders the same tables for docs.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.table import Table
from stateflow.tasks.kit.episode_record import EpisodeRecord
from stateflow.tasks.pdoctor.flows import ERROR_CLASSES, episode_error_class

__all__ = ["PlanningSummary", "markdown", "pdoctor_tables", "summarize_pdoctor", "write_pdoctor_plots"]


@dataclass(frozen=True)
class PlanningSummary:
    """One (method, models) group of pdoctor episodes.

    Attributes:
        by_actions: number of actions -> (successes, episodes).
        classes: error class (or ``"errored"``) -> episodes.
    """

    method: str
    models: str
    n: int
    successes: int
    by_actions: dict[int, tuple[int, int]]
    classes: dict[str, int]

    @property
    def label(self) -> str:
        return f"{self.method} / {self.models}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "method": self.method,
            "models": self.models,
            "n": self.n,
            "successes": self.successes,
            "by_actions": {str(k): {"success": s, "n": n} for k, (s, n) in sorted(self.by_actions.items())},
            "classes": self.classes,
        }


def _actions(record: EpisodeRecord) -> int:
    v = record.verdict or {}
    if "n_actions" in v:
        return int(v["n_actions"])
    return int(str(record.hardness or "0").split()[0])


def summarize_pdoctor(records: Iterable[EpisodeRecord]) -> list[PlanningSummary]:
    """One summary per (method, models), over the pdoctor records only."""
    groups: dict[tuple[str, str], list[EpisodeRecord]] = defaultdict(list)
    for r in records:
        if r.benchmark == "pdoctor":
            groups[(r.method, r.models)].append(r)
    out = []
    for (method, models), rs in sorted(groups.items()):
        by: dict[int, list[int]] = defaultdict(lambda: [0, 0])
        classes: dict[str, int] = defaultdict(int)
        for r in rs:
            k = _actions(r)
            by[k][1] += 1
            c = episode_error_class(r)
            if c is None:
                by[k][0] += 1
            else:
                classes[c] += 1
        out.append(
            PlanningSummary(
                method,
                models,
                len(rs),
                sum(s for s, _ in by.values()),
                {k: (s, n) for k, (s, n) in sorted(by.items())},
                dict(classes),
            )
        )
    return out


def _class_columns(rows: list[PlanningSummary]) -> list[str]:
    extra = sorted({c for r in rows for c in r.classes} - set(ERROR_CLASSES))
    return [*ERROR_CLASSES, *extra]


def pdoctor_tables(records: list[EpisodeRecord]) -> list[Table]:
    """Rich tables: success rate by number of actions, and failures by error class."""
    rows = summarize_pdoctor(records)
    if not rows:
        return []
    counts = sorted({k for r in rows for k in r.by_actions})
    t1 = Table(title="pdoctor: success rate by number of actions (planning limit)")
    t1.add_column("method / models")
    t1.add_column("n", justify="right")
    t1.add_column("SR %", justify="right")
    for k in counts:
        t1.add_column(f"{k} act.", justify="right")
    for r in rows:
        cells = []
        for k in counts:
            s, n = r.by_actions.get(k, (0, 0))
            cells.append(f"{100 * s / n:.0f}% ({n})" if n else "-")
        t1.add_row(r.label, str(r.n), f"{100 * r.successes / r.n:.1f}", *cells)
    cols = _class_columns(rows)
    t2 = Table(title="pdoctor: failures by error class (% of failed episodes)")
    t2.add_column("method / models")
    t2.add_column("failed", justify="right")
    for c in cols:
        t2.add_column(c, justify="right")
    for r in rows:
        failed = r.n - r.successes
        t2.add_row(
            r.label,
            str(failed),
            *(f"{r.classes.get(c, 0)} ({100 * r.classes.get(c, 0) / failed:.0f}%)" if failed else "-" for c in cols),
        )
    return [t1, t2]


def markdown(records: list[EpisodeRecord]) -> str:
    """The two tables as Markdown (for docs/results.md)."""
    rows = summarize_pdoctor(records)
    if not rows:
        return ""
    counts = sorted({k for r in rows for k in r.by_actions})
    lines = [
        "| method / models | n | SR % | " + " | ".join(f"{k} actions" for k in counts) + " |",
        "|---|---:|---:|" + "---:|" * len(counts),
    ]
    for r in rows:
        cells = []
        for k in counts:
            s, n = r.by_actions.get(k, (0, 0))
            cells.append(f"{100 * s / n:.0f}% ({s}/{n})" if n else "-")
        lines.append(f"| {r.label} | {r.n} | {100 * r.successes / r.n:.1f} | " + " | ".join(cells) + " |")
    cols = _class_columns(rows)
    lines += ["", "| method / models | failed | " + " | ".join(cols) + " |", "|---|---:|" + "---:|" * len(cols)]
    for r in rows:
        failed = r.n - r.successes
        cells = [f"{r.classes.get(c, 0)} ({100 * r.classes.get(c, 0) / failed:.0f}%)" if failed else "-" for c in cols]
        lines.append(f"| {r.label} | {failed} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def write_pdoctor_plots(records: list[EpisodeRecord], out: Path) -> list[Path]:
    """``planning_limit.png`` (success rate vs number of actions, one line per method/models) and
    ``pdoctor.json``; nothing when there are no pdoctor records."""
    rows = summarize_pdoctor(records)
    if not rows:
        return []
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out.mkdir(parents=True, exist_ok=True)
    (out / "pdoctor.json").write_text(json.dumps([r.to_dict() for r in rows], indent=2))
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(11, 4.2))
    for r in rows:
        ks = sorted(r.by_actions)
        rates = [100 * r.by_actions[k][0] / r.by_actions[k][1] for k in ks]
        ax.plot(ks, rates, marker="o", label=f"{r.label} (n={r.n})")
        for k, y in zip(ks, rates, strict=True):  # small samples: show what each point rests on
            s_, n_ = r.by_actions[k]
            ax.annotate(f"{s_}/{n_}", (k, y), textcoords="offset points", xytext=(4, 4), fontsize=6)
    ax.set_xticks(sorted({k for r in rows for k in r.by_actions}))
    ax.axhline(20, color="grey", linestyle=":", linewidth=1)
    ax.set_xlabel("actions per request")
    ax.set_ylabel("success rate (%)")
    ax.set_ylim(-3, 103)
    ax.set_title("planning limit (dotted: 20 %)")
    ax.legend(fontsize=7)
    cols = _class_columns(rows)
    width = 0.8 / len(rows)
    for i, r in enumerate(rows):
        failed = max(r.n - r.successes, 1)
        bx.bar(
            [j + i * width for j in range(len(cols))],
            [100 * r.classes.get(c, 0) / failed for c in cols],
            width=width,
            label=r.label,
        )
    bx.set_xticks([j + 0.4 - width / 2 for j in range(len(cols))], cols, rotation=20, fontsize=8)
    bx.set_ylabel("% of failed episodes")
    bx.set_ylim(0, 100)
    bx.set_title("error classes")
    bx.legend(fontsize=7)
    fig.tight_layout()
    p = out / "planning_limit.png"
    fig.savefig(p, dpi=110)
    plt.close(fig)
    return [p]

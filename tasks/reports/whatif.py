"""The what-if table: recorded reward against replayed reward, task by task, and the paired test.

:func:`whatif_comparison` pairs a :class:`~stateflow.tasks.harness.whatif.WhatIfResult`'s records
(:func:`~stateflow.tasks.reports.paired.compare`: tasks won and lost, exact McNemar test);
:func:`whatif_tables` renders the per-task table and the summary that ``stateflow whatif`` prints
and ``docs/durable.md`` quotes.
"""

from __future__ import annotations

from rich.table import Table
from stateflow.tasks.harness.whatif import WhatIfResult
from stateflow.tasks.kit.stats import wilson_interval
from stateflow.tasks.reports.paired import PairedComparison, compare

__all__ = ["whatif_comparison", "whatif_tables"]


def _change(result: WhatIfResult) -> str:
    return ",".join(f"{k}={v}" for k, v in sorted(result.plan.change.items()))


def _rate(solved: int, n: int) -> str:
    """``7 (30.4 %, 15.6-50.9)``: tasks solved, the rate and its 95 % Wilson interval."""
    if n == 0:
        return "0"
    ci = wilson_interval(solved, n)
    return f"{solved} ({100.0 * solved / n:.1f} %, {ci.text()})"


def whatif_comparison(result: WhatIfResult) -> PairedComparison:
    """The replays against their recorded episodes, on the tasks that replayed faithfully."""
    return compare(result.before, result.after, labels=("recorded", f"whatif {_change(result)}"))


def whatif_tables(result: WhatIfResult) -> tuple[Table, Table]:
    """The per-task table (reward before / after, tokens) and the summary (won, lost, p)."""
    pair = whatif_comparison(result)
    after = {r.task: r for r in result.after}
    per_task = Table(title=f"what-if at {result.plan.at}: {_change(result)}")
    for name in (
        "task",
        "hardness",
        "reward before",
        "reward after",
        "",
        "tokens before",
        "tokens after",
        "new tokens",
    ):
        per_task.add_column(name, justify="left" if name in ("hardness", "") else "right")
    for before in sorted(result.before, key=lambda r: r.task):
        new = after[before.task]
        mark = "won" if new.success and not before.success else "lost" if before.success and not new.success else ""
        per_task.add_row(
            str(before.task),
            before.hardness or "",
            f"{before.reward_raw:.2f}",
            f"{new.reward_raw:.2f}",
            mark,
            f"{before.prompt_tokens + before.completion_tokens:,}",
            f"{new.prompt_tokens + new.completion_tokens:,}",
            f"{result.new_tokens.get(before.task, 0):,}",
        )
    summary = Table(title="paired: recorded vs what-if (same tasks)")
    for name in ("tasks", "solved before", "solved after", "won", "lost", "McNemar p", "diverged", "not reached"):
        summary.add_column(name, justify="right")
    summary.add_row(
        str(len(pair.tasks)),
        _rate(pair.baseline_solved, len(pair.tasks)),
        _rate(pair.candidate_solved, len(pair.tasks)),
        str(pair.won),
        str(pair.lost),
        f"{pair.p_value:.3f}",
        str(len(result.diverged)),
        str(len(result.plan.not_reached)),
    )
    return per_task, summary

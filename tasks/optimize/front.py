"""The Pareto front of a search: success (with its Wilson interval) against prompt tokens and
seconds per task, as a Markdown table and a PNG.

The front is drawn among the candidates evaluated on the most tasks (normally the whole pool):
one of them is on it when it solved at least one task and no other of them solves at least as
large a share with no more prompt tokens and no more seconds per task, and is strictly better on
one of the three. Candidates stopped at earlier rungs are listed and plotted but never on the
front: a 7/10 from the first rung is no evidence against a 63/100 from the last, and the first
tasks' cost is not the pool's either (until 2026-11-28 they were compared, and the SQL search's
front was three candidates of the 10-task rung). The table prints ``n`` and the interval beside
every rate.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from stateflow.tasks.optimize.outcome import CandidateResult, OptimizeSummary

__all__ = ["front_table", "mark_front", "plot_front"]


def _beats(o: CandidateResult, c: CandidateResult) -> bool:
    no_worse = o.success >= c.success and o.prompt_tokens <= c.prompt_tokens and o.seconds <= c.seconds
    better = o.success > c.success or o.prompt_tokens < c.prompt_tokens or o.seconds < c.seconds
    return no_worse and better


def mark_front(results: Sequence[CandidateResult]) -> None:
    """Set :attr:`CandidateResult.on_front` on every result (in place): evaluated on the most
    tasks of any, solved at least one (doing nothing is cheap but no trade-off), and beaten by no
    other such result."""
    deepest = max((r.n for r in results), default=0)
    ran = [r for r in results if r.solved and r.n == deepest]
    for r in results:
        r.on_front = r in ran and not any(_beats(o, r) for o in ran if o is not r)


def front_table(summary: OptimizeSummary) -> str:
    """The candidates as a Markdown table (front first, then by success), and the search's cost."""
    unit = summary.unit.replace("_", "-")
    rows = sorted((r for r in summary.candidates if r.n), key=lambda r: (not r.on_front, -r.success, r.cost))
    lines = [
        "| # | front | method | models | n | success % | 95 % CI (Wilson) | prompt tokens / task "
        "| s / task | model-s / task | stopped |",
        "|---|---|---|---|---:|---:|---|---:|---:|---:|---|",
    ]
    for i, r in enumerate(rows, 1):
        lines.append(
            f"| {i} | {'yes' if r.on_front else ''} | `{r.method}` | {r.models} | {r.n} | {r.success:.1f} "
            f"| {r.ci_low:.1f}-{r.ci_high:.1f} | {r.prompt_tokens:.0f} | {r.seconds:.1f} | {r.model_seconds:.1f} "
            f"| {r.dropped or ('pick' if r.key == summary.pick else 'ran to the end')} |"
        )
    never = sum(1 for r in summary.candidates if not r.n)
    lines += [
        "",
        f"Pool: {summary.pool} tasks; {len(summary.candidates)} candidates"
        + (f" ({never} never evaluated: the search stopped first)" if never else "")
        + f"; search ended: {summary.stop}.",
        f"Spent {summary.spent:.0f} {unit} of a budget of {summary.budget:g}; evaluating every candidate on the "
        f"whole pool would cost about {summary.exhaustive:.0f} {unit} (ratio {summary.ratio:.2f}).",
    ]
    if summary.rewrite is not None:
        w = summary.rewrite
        verdict = "adopted as the pick" if w.adopted else "not adopted (it did not solve more)"
        lines.append(
            f"Rewritten {w.state} instruction (sha256 {w.sha256[:12]}): won {w.won}, lost {w.lost} against the "
            f"pick on its tasks (exact McNemar p = {w.p_value:.3g}); {verdict}."
        )
    if summary.heldout is not None:
        h = summary.heldout
        lines.append(
            f"Pick `{h.method}` ({h.models}) on the held-out tasks: {h.solved}/{h.n} = {h.success:.1f} % "
            f"(95 % CI {h.ci_low:.1f}-{h.ci_high:.1f})."
        )
    return "\n".join(lines) + "\n"


def plot_front(summary: OptimizeSummary, path: Path) -> Path:
    """Two panels (success against prompt tokens, and against seconds per task) saved to ``path``.

    Every evaluated candidate is a point with its Wilson interval; front points are filled and
    numbered as in :func:`front_table`, the others hollow (grey: stopped at an earlier rung).
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = sorted((r for r in summary.candidates if r.n), key=lambda r: (not r.on_front, -r.success, r.cost))
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.5), sharey=True)
    try:
        for ax, attr, xlabel in (
            (axes[0], "prompt_tokens", "prompt tokens per task"),
            (axes[1], "seconds", "s per task"),
        ):
            for i, r in enumerate(rows, 1):
                x = getattr(r, attr)
                ax.errorbar(
                    [x],
                    [r.success],
                    yerr=[[r.success - r.ci_low], [r.ci_high - r.success]],
                    fmt="o",
                    color="#0072B2" if r.on_front else "#999999",
                    mfc="#0072B2" if r.on_front else "white",
                    capsize=3,
                )
                ax.annotate(str(i), (x, r.success), textcoords="offset points", xytext=(5, 4), fontsize=8)
            ax.set_xlabel(xlabel)
            ax.grid(alpha=0.3)
        axes[0].set_ylabel("success % (95 % Wilson interval)")
        fig.suptitle(
            f"{summary.space}: {summary.benchmark}, Pareto front of the candidates run on the most tasks "
            "filled (numbers as in the table)"
        )
        path.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(path, dpi=110, bbox_inches="tight")
    finally:
        plt.close(fig)
    return path

"""The paper comparison's tables and plots: the ``docs/results.md`` section, PNGs, README headline.

Everything here reads the :class:`~stateflow.tasks.harness.paper.PairOutcome` list that
:func:`~stateflow.tasks.harness.paper.run_paper` returns; the metrics are those of ``stateflow report``
(:func:`~stateflow.tasks.reports.metrics.summarize`) and the panels are drawn by the report's own plot
functions (:func:`~stateflow.tasks.reports.report.plot_success`,
:func:`~stateflow.tasks.reports.report.plot_tokens_by_state`).

A cell of a pair that is not complete shows ``done/total`` episodes and the word
``incomplete``; a pair that crashed or did not run says so instead of showing numbers. Nothing
unfinished is ever shown as a final number.

Size (over ~400 lines, on purpose): one generated document section per benchmark, its plots and
the README headline read the same comparison records and must agree cell for cell.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from stateflow.tasks.harness.paper import PairOutcome, PaperBenchmark
from stateflow.tasks.kit.samples import SAMPLE_NAMES, SAMPLE_SIZES, SEED, STRATA
from stateflow.tasks.kit.stats import Interval, holm, wilson_interval
from stateflow.tasks.reports.doc_sections import SectionMarkers, check_section, write_section
from stateflow.tasks.reports.gold_check import GoldReplay, gold_note
from stateflow.tasks.reports.metrics import summarize, tokens_by_state
from stateflow.tasks.reports.paired import compare
from stateflow.tasks.reports.report import PointStyle, plot_success, plot_tokens_by_state

__all__ = [
    "HEADLINE_MARKERS",
    "RESULTS_MARKERS",
    "MethodCell",
    "PaperDocs",
    "headline_section",
    "method_cells",
    "method_styles",
    "paired_tasks",
    "results_section",
    "write_paper_docs",
    "write_paper_plots",
]

RESULTS_MARKERS = SectionMarkers("paper")
"""The section of ``docs/results.md`` that ``stateflow bench paper`` owns."""
HEADLINE_MARKERS = SectionMarkers("paper-headline")
"""The section of ``README.md`` holding the headline table."""

_PLOTS = {
    "success_vs_prompt_tokens.png": "success vs mean prompt tokens per task",
    "tokens_by_state.png": "tokens per task by state",
    "ablations.png": "ablations (success %)",
}


@dataclass(frozen=True)
class MethodCell:
    """One method's numbers in one pair.

    Attributes:
        n: episodes recorded; ``total``: tasks the pair selected (``n < total``: incomplete).
        sr: success rate in % of the recorded episodes; ``solved`` of them succeeded.
        p_tokens, c_tokens: mean prompt / completion tokens per task.
        wall_s: mean wall time per task in seconds.
        errored: episodes that ended in an error or a timeout.
        eval_share: prompt tokens the server evaluated ÷ sent (``cached_tokens`` from its
            responses; 1.00: nothing reused; ``None``: nothing sent), see
            :func:`~stateflow.tasks.reports.metrics.evaluated_share`.
    """

    n: int
    total: int
    sr: float
    p_tokens: float
    c_tokens: float
    wall_s: float
    errored: int
    solved: int = 0
    eval_share: float | None = None

    def eval_text(self) -> str:
        """``eval_share`` as ``0.42``, or ``-`` when nothing was sent."""
        return "-" if self.eval_share is None else f"{self.eval_share:.2f}"

    @property
    def complete(self) -> bool:
        return self.n >= self.total

    @property
    def interval(self) -> Interval:
        """The 95 % Wilson interval of ``sr``."""
        return wilson_interval(self.solved, self.n)

    def count(self) -> str:
        """``n`` for a complete cell, ``n/total (incomplete)`` otherwise."""
        return str(self.n) if self.complete else f"{self.n}/{self.total} (incomplete)"


def method_cells(outcome: PairOutcome) -> dict[str, MethodCell]:
    """The numbers of each method with at least one record in ``outcome``."""
    out: dict[str, MethodCell] = {}
    for row in summarize(outcome.records, ("method",)):
        method = row.group[0]
        wall = [r.wall_s for r in outcome.records if r.method == method]
        out[method] = MethodCell(
            row.n,
            outcome.tasks_total,
            row.sr,
            row.p_tokens,
            row.c_tokens,
            sum(wall) / len(wall),
            row.errored,
            row.solved,
            row.eval_share,
        )
    return out


def remaining(outcome: PairOutcome) -> tuple[int, float | None]:
    """Episodes still to run in ``outcome`` and an estimate of their wall seconds.

    The estimate charges each missing task of a method that method's mean wall time so far; for
    a method not started yet, its full flow's (an ablation runs about as long as the flow it
    ablates) or else the pair's mean over all its records. ``None`` when the pair has no record
    to measure by. Only meaningful for an incomplete pair (a crashed or not-run one does not
    know its tasks).
    """
    bench = outcome.benchmark
    cells = method_cells(outcome)
    left = {m: max(0, outcome.tasks_total - outcome.done(m)) for m in bench.all_methods}
    if not outcome.records:
        return sum(left.values()), None
    pair_mean = sum(r.wall_s for r in outcome.records) / len(outcome.records)
    base_of = {bench.ablation(b, p): b for b in bench.ablated for p in bench.ablations}

    def per_task(method: str) -> float:
        for m in (method, base_of.get(method)):
            if m in cells:
                return cells[m].wall_s
        return pair_mean

    return sum(left.values()), sum(n * per_task(m) for m, n in left.items())


def _unfinished(outcome: PairOutcome) -> str:
    """One pair's entry in the status line: its status, and what is left when it is incomplete."""
    text = f"{outcome.benchmark.name} x {outcome.model.name}: {outcome.status}"
    if outcome.status != "incomplete":
        return text
    episodes, seconds = remaining(outcome)
    if seconds is None:
        estimate = ""
    elif seconds >= 3600:
        estimate = f", about {seconds / 3600:.1f} h at the s/task measured so far"
    else:
        estimate = f", about {max(1, round(seconds / 60))} min at the s/task measured so far"
    return f"{text}, {episodes} episode(s) left{estimate}"


def _pending(outcome: PairOutcome) -> str:
    """What a pair without numbers shows in a cell."""
    return "crashed" if outcome.status == "crashed" else "not run"


def _benchmarks(outcomes: Sequence[PairOutcome]) -> list[PaperBenchmark]:
    return list({o.benchmark.name: o.benchmark for o in outcomes}.values())


def _pairs(outcomes: Sequence[PairOutcome], bench: PaperBenchmark) -> list[PairOutcome]:
    return [o for o in outcomes if o.benchmark.name == bench.name]


def _sample(bench: PaperBenchmark, tasks: str, total: int) -> str:
    name = tasks.strip()
    if name in SAMPLE_NAMES and bench.dataset in SAMPLE_SIZES:
        return (
            f"the fixed `{name}` sample of {bench.dataset}: {SAMPLE_SIZES[bench.dataset]} tasks stratified by "
            f"{STRATA[bench.dataset]} (seed `{SEED}`, `stateflow.tasks.kit.samples`)"
        )
    return f"tasks `{name}` of {bench.dataset} ({total} per method)" if total else f"tasks `{name}` of {bench.dataset}"


_BASELINE = "react"  # the paper's baseline: every method's paired test in the method table is against it


def _versus_baseline(bench: PaperBenchmark, o: PairOutcome) -> dict[str, str]:
    """Per method: ``won / lost, p`` against :data:`_BASELINE` on the tasks both finished, the exact
    McNemar p Holm-corrected over every method of the pair (one baseline, many comparisons)."""
    if _BASELINE not in bench.all_methods:
        return {}
    base = [r for r in o.records if r.method == _BASELINE]
    tested = {}
    for m in bench.all_methods:
        if m == _BASELINE:
            continue
        c = compare(base, [r for r in o.records if r.method == m])
        if c.tasks:
            tested[m] = c
    adjusted = holm([c.p_value for c in tested.values()])
    return {m: f"{c.won} / {c.lost}, {p:.2g}" for (m, c), p in zip(tested.items(), adjusted, strict=True)}


def _method_table(bench: PaperBenchmark, pairs: list[PairOutcome]) -> list[str]:
    versus = [_versus_baseline(bench, o) for o in pairs]
    against = f"vs {_BASELINE}" if any(versus) else ""
    heads = [
        "success %",
        "95 % CI",
        "n",
        "prompt tok",
        "eval/sent",
        "completion tok",
        "s/task",
        "errored",
        *([against] if against else []),
    ]
    lines = [
        "| method | " + " | ".join(f"{o.model.name}: {h}" for o in pairs for h in heads) + " |",
        "|---|" + "---|" * (len(heads) * len(pairs)),
    ]
    cells = [method_cells(o) for o in pairs]
    for m in bench.all_methods:
        row = [f"`{m}`"]
        for o, by_method, vs in zip(pairs, cells, versus, strict=True):
            c = by_method.get(m)
            extra = [vs.get(m, "")] if against else []
            if o.status in ("crashed", "not run"):
                row += [_pending(o)] + [""] * (len(heads) - 1)
            elif c is None:
                row += ["", "", f"0/{o.tasks_total} (incomplete)", "", "", "", "", "", *extra]
            else:
                row += [
                    f"{c.sr:.1f}",
                    c.interval.text(),
                    c.count(),
                    f"{c.p_tokens:.0f}",
                    c.eval_text(),
                    f"{c.c_tokens:.0f}",
                    f"{c.wall_s:.1f}",
                    str(c.errored),
                    *extra,
                ]
        lines.append("| " + " | ".join(row) + " |")
    if against:
        lines += [
            "",
            f"{against}: tasks the method solved and `{_BASELINE}` did not / the other way round, on the tasks both "
            f"finished, and the exact McNemar test's p, Holm-corrected over every method compared with `{_BASELINE}` "
            'for that model (statsmodels `multipletests(method="holm")`); below 0.05: a difference at the 5 % '
            "level for the column as a whole.",
        ]
    return lines


def paired_tasks(outcome: PairOutcome, methods: Sequence[str]) -> tuple[list[str], list[int]]:
    """The methods of ``methods`` with records in ``outcome``, and the tasks all of them finished.

    While a run is partial, each method has its own set of finished tasks, so their success rates
    are not comparable; on the common tasks they are.
    """
    done: dict[str, set[int]] = {}
    for r in outcome.records:
        if r.method in methods:
            done.setdefault(r.method, set()).add(r.task)
    present = [m for m in methods if m in done]
    common = set.intersection(*(done[m] for m in present)) if present else set()
    return present, sorted(common)


def _to_pair(o: PairOutcome, among: Sequence[str]) -> tuple[list[str], list[int]]:
    """:func:`paired_tasks` of ``among`` when their rows need it: the pair is incomplete and some
    of them finished tasks the others have not (``([], [])`` otherwise). Once they have all
    finished the same tasks, the method table compares them already."""
    methods, tasks = paired_tasks(o, among)
    if o.status != "incomplete" or len(methods) < 2 or not tasks:
        return [], []
    finished = method_cells(o)
    if all(finished[m].n == len(tasks) for m in methods):
        return [], []
    return methods, tasks


def _paired_table(bench: PaperBenchmark, o: PairOutcome) -> list[str]:
    """Success on the tasks every method but the ablations finished (see :func:`_to_pair`; the
    ablations are compared with their flows in their own table)."""
    methods, tasks = _to_pair(o, [m for m in bench.all_methods if m not in bench.ablation_methods])
    if not tasks:
        return []
    # the same numbers as the method table, on the common tasks only
    common = set(tasks)
    cells = method_cells(replace(o, records=[r for r in o.records if r.task in common]))
    lines = [
        "",
        f"Paired, {o.model.name}: the {len(tasks)} tasks that "
        + ", ".join(f"`{m}`" for m in methods)
        + " have all finished (the rows above cover different tasks while the run is partial):",
        "",
        "| method | success % | 95 % CI | prompt tok | eval/sent | completion tok | s/task |",
        "|---|---|---|---|---|---|---|",
    ]
    for m in methods:
        c = cells[m]
        lines.append(
            f"| `{m}` | {c.sr:.1f} | {c.interval.text()} | {c.p_tokens:.0f} | {c.eval_text()} | {c.c_tokens:.0f} "
            f"| {c.wall_s:.1f} |"
        )
    return lines


def _ablation_table(bench: PaperBenchmark, pairs: list[PairOutcome]) -> list[str]:
    parts = [p for p in bench.ablations if any(bench.ablation(b, p) in bench.all_methods for b in bench.ablated)]
    bases = [b for b in bench.ablated if b in bench.all_methods]
    if not parts or not bases:
        return []
    lines = [
        "| view | model | full flow | " + " | ".join(f"no {p}" for p in parts) + " |",
        "|---|---|---|" + "---|" * len(parts),
    ]
    for base in bases:
        for o in pairs:
            if o.status in ("crashed", "not run"):
                lines.append(f"| `{base}` | {o.model.name} | {_pending(o)} |" + " |" * len(parts))
                continue
            cells = method_cells(o)
            full = cells.get(base)
            row = [f"`{base}`", o.model.name, _score(full)]
            names = [bench.ablation(base, p) for p in parts]
            deltas = _ablation_deltas(o, base, names)
            row += [_score(cells.get(name)) + delta for name, delta in zip(names, deltas, strict=True)]
            lines.append("| " + " | ".join(row) + " |")
    return lines


def _ablation_deltas(o: PairOutcome, base: str, ablations: Sequence[str]) -> list[str]:
    """Per ablation `` (+1.4; 3 won, 2 lost, Holm p = 1)``: its success minus its full flow's, on
    the tasks both finished (named while they differ from the full sample: a partial ablation is
    compared with its flow on its own tasks, not with the flow's whole-sample score), then the
    tasks only the ablation solved (won), only the flow solved (lost) and the exact McNemar test of
    that split (:func:`~stateflow.tasks.reports.paired.compare`, as ``stateflow compare`` gives it),
    Holm-corrected over the ablations of this flow and model (they share one baseline); "" for an
    ablation without records."""
    comparisons = [compare(*([r for r in o.records if r.method == m] for m in (base, a))) for a in ablations]
    tested = [c for c in comparisons if c.tasks]
    adjusted = dict(zip(map(id, tested), holm([c.p_value for c in tested]), strict=True))
    out = []
    for c in comparisons:
        if not c.tasks:
            out.append("")
            continue
        diff = 100 * (c.won - c.lost) / len(c.tasks)
        # won/lost and the test say whether the difference is more than the noise of a small sample
        paired = f"{c.won} won, {c.lost} lost, Holm p = {adjusted[id(c)]:.2g}"
        if c.only_baseline == c.only_candidate == 0:
            out.append(f" ({diff:+.1f}; {paired})")
        else:
            out.append(f" ({diff:+.1f} on the same {len(c.tasks)} tasks; {paired})")
    return out


def _solved(o: PairOutcome, method: str) -> dict[int, bool]:
    """Task -> success of ``method``'s recorded episodes in ``o``."""
    return {r.task: r.success for r in o.records if r.method == method}


def _score(c: MethodCell | None) -> str:
    if c is None:
        return "not recorded"
    text = f"{c.sr:.1f} ({c.interval.text()})"
    return text if c.complete else f"{text} [{c.n}/{c.total}, incomplete]"


def results_section(
    outcomes: Sequence[PairOutcome],
    *,
    command: str,
    tasks: str,
    date: str,
    images: Sequence[tuple[str, str]],
    gold: Sequence[GoldReplay] = (),
) -> str:
    """The ``docs/results.md`` section (without its markers).

    Args:
        gold: the oracle's gold replays (:mod:`stateflow.tasks.reports.gold_check`): each benchmark whose
            tasks they cover says which golds did not reproduce and how they were counted.
        outcomes: from :func:`~stateflow.tasks.paper.run_paper`.
        command: the command line that reproduces it.
        tasks: the ``--tasks`` value (``dev``: described as the fixed sample).
        date: when it was generated (``YYYY-MM-DD``).
        images: ``(title, link relative to the results file)`` per plot.
    """
    unfinished = [o for o in outcomes if o.status != "complete"]
    status = (
        "every pair is complete."
        if not unfinished
        else f"**not final**: {len(unfinished)} of {len(outcomes)} (benchmark, model) pair(s) are not complete ("
        + "; ".join(_unfinished(o) for o in unfinished)
        + "); re-run the command to resume."
    )
    lines = [
        f"## The paper's comparison, reproduced offline ({date})",
        "",
        f"Generated by `stateflow bench paper` on {date} (UTC); everything between the `paper` markers is "
        "rewritten by the command, so edit outside them.",
        "",
        f"Command: `{command}`",
        "",
        f"Status: {status}",
        "",
        "Per (benchmark, model): success % of the recorded episodes with its 95 % Wilson score interval "
        "(`stateflow.tasks.kit.stats`), n = episodes recorded (`done/total` when "
        "not every task is done), mean prompt tokens per task and the share of them the model server "
        "evaluated (eval/sent: the rest came from its prompt cache; 1.00 when it reports none), mean "
        "completion tokens per task, mean wall seconds per task, "
        "errored episodes (an error or a timeout; scored on what ran). Results directories: "
        + ", ".join(f"`{o.out}`" for o in outcomes)
        + "."
        + _archived(outcomes),
    ]
    for bench in _benchmarks(outcomes):
        pairs = _pairs(outcomes, bench)
        total = max((o.tasks_total for o in pairs), default=0)
        lines += ["", f"### {bench.name}", "", f"Sample: {_sample(bench, tasks, total)}.", ""]
        lines += _method_table(bench, pairs)
        note = gold_note(gold, bench.name, bench.dataset, {r.task for o in pairs for r in o.records})
        if note:
            lines += ["", note]
        for o in pairs:
            lines += _paired_table(bench, o)
        ablations = _ablation_table(bench, pairs)
        if ablations:
            lines += [
                "",
                "Ablations (success % with its 95 % Wilson interval; in brackets: points vs the full flow on the "
                "tasks both finished, tasks won and lost against it, and the exact McNemar test's p):",
                "",
                *ablations,
                "",
                "Each row compares several ablations with one full flow, so its p-values are Holm-corrected over "
                'that row\'s ablations (statsmodels `multipletests(method="holm")`): a p below 0.05 is a '
                "difference at the 5 % level for the row as a whole.",
            ]
        for o in pairs:
            if o.error:
                lines += ["", f"{bench.name} x {o.model.name} crashed: `{o.error.splitlines()[0][:300]}`"]
    if images:
        lines += ["", "### Plots", ""]
        lines += "\n\n".join(f"![{title}]({link})" for title, link in images).split("\n")
    return "\n".join(lines)


def _archived(outcomes: Sequence[PairOutcome]) -> str:
    files = [o.archive for o in outcomes if o.archive is not None]
    if not files:
        return ""
    return " The records, without traces, are archived in " + ", ".join(f"`{f}`" for f in files) + "."


def headline_section(outcomes: Sequence[PairOutcome], *, date: str, results_link: str) -> str:
    """The README's short table: per benchmark, the headline methods' success (prompt tokens) per
    model, and the best of all methods run (highest success; the first in table order on a tie)."""
    models = list(dict.fromkeys(o.model.name for o in outcomes))
    lines = [
        f"The paper's comparison reproduced offline (`stateflow bench paper`, {date}); success % [95 % Wilson "
        f"interval] (mean prompt tokens per task); every method, the ablations and plots: "
        f"[{results_link}]({results_link}).",
        "",
        "| benchmark | method | " + " | ".join(models) + " |",
        "|---|---|" + "---|" * len(models),
    ]
    for bench in _benchmarks(outcomes):
        pairs = {o.model.name: o for o in _pairs(outcomes, bench)}
        cells = {name: method_cells(o) for name, o in pairs.items()}
        order = {m: i for i, m in enumerate(bench.all_methods)}
        for m in bench.headline_methods:
            row = [bench.name, f"`{m}`"]
            for name in models:
                o, c = pairs.get(name), cells.get(name, {}).get(m)
                if o is None:
                    row.append("")
                elif o.status in ("crashed", "not run"):
                    row.append(_pending(o))
                elif c is None:
                    row.append("not recorded")
                else:
                    row.append(_headline_cell(c))
            lines.append("| " + " | ".join(row) + " |")
        best = [f"best of {len(bench.all_methods)} methods"]
        for name in models:
            # a tie in success goes to the method with fewer prompt tokens (the paper's cost axis)
            ranked = sorted(
                cells.get(name, {}).items(),
                key=lambda kv: (-kv[1].sr, kv[1].p_tokens, order.get(kv[0], len(order))),
            )
            best.append(f"`{ranked[0][0]}` {_headline_cell(ranked[0][1])}" if ranked else "")
        lines.append(f"| {bench.name} | " + " | ".join(best) + " |")
        paired = [_paired_cell(bench, pairs[name]) if name in pairs else "" for name in models]
        if any(paired):
            lines.append(f"| {bench.name} | same tasks (while partial) | " + " | ".join(paired) + " |")
    return "\n".join(lines)


def _paired_cell(bench: PaperBenchmark, o: PairOutcome) -> str:
    """``n tasks: react 0.0, stateflow 22.2, ...`` when the pair needs it (see :func:`_to_pair`; "" otherwise)."""
    methods, tasks = _to_pair(o, bench.paired_methods)
    if not tasks:
        return ""
    common = set(tasks)
    scores = []
    for m in methods:
        rs = [r for r in o.records if r.method == m and r.task in common]
        solved = sum(r.success for r in rs)
        scores.append(f"`{m}` {100 * solved / len(rs):.1f} [{wilson_interval(solved, len(rs)).text()}]")
    return f"{len(tasks)} tasks: " + ", ".join(scores)


def _headline_cell(c: MethodCell) -> str:
    done = "" if c.complete else f" [{c.n}/{c.total}, incomplete]"
    return f"{c.sr:.1f} [{c.interval.text()}] ({c.p_tokens:.0f}){done}"


def _grid(n_rows: int, n_cols: int, size: tuple[float, float]) -> tuple[Any, Any, Any]:
    """``(pyplot, figure, axes[row][col])`` (matplotlib is imported only when plots are drawn)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(
        n_rows, n_cols, figsize=(size[0] * n_cols, size[1] * n_rows), squeeze=False, layout="constrained"
    )
    return plt, fig, axes


def _panel_title(o: PairOutcome) -> str:
    title = f"{o.benchmark.name} x {o.model.name}"
    if o.status == "complete":
        return title
    return f"{title} ({o.status})"


_KIND_MARKERS = {"paper": "o", "best": "D", "bar": "s", "ablation": "^"}
"""A point's shape says what kind of method it is (the legend of the success plot lists them)."""
_KIND_NAMES = {"paper": "the paper's methods", "best": "best flows", "bar": "one prompt", "ablation": "ablations"}


def _palette(n: int) -> list[Any]:
    """``n`` distinct colours while ``n <= 20`` (matplotlib's ``tab20``, dark shades first), then repeating."""
    from matplotlib import colormaps  # here: tables and HTML need no matplotlib

    tab20 = colormaps["tab20"].colors
    dark_first = [*tab20[0::2], *tab20[1::2]]
    return [dark_first[i % len(dark_first)] for i in range(n)]


def method_styles(benches: Sequence[PaperBenchmark]) -> dict[str, PointStyle]:
    """One style per method, the same in every panel: a colour of its own and a shape by kind
    (the paper's methods, this project's best flows, one-prompt bars, ablations).

    Colours come from matplotlib's ``tab20`` with its dark shades first, handed out in table
    order with the ablations last, so the methods read most often get the strongest colours;
    past 20 methods they repeat (the shape and the label still tell them apart). Why: each
    panel used to colour its points in its own order, so one method had other colours in
    other panels, and two methods of one panel could share one.
    """

    def kind(m: str) -> str:
        if any(m in b.ablation_methods for b in benches):
            return "ablation"
        if any(m in b.bars for b in benches):
            return "bar"
        return "best" if any(m in b.best_flows for b in benches) else "paper"

    # every method the benchmark defines, not only those run (--methods): a method keeps its colour
    names = dict.fromkeys(m for b in benches for m in (*b.methods, *b.best_flows, *b.ablation_methods, *(b.only or ())))
    order = sorted(names, key=lambda m: kind(m) == "ablation")  # stable: table order otherwise
    return {m: PointStyle(c, _KIND_MARKERS[kind(m)]) for m, c in zip(order, _palette(len(order)), strict=True)}


def write_paper_plots(outcomes: Sequence[PairOutcome], out: Path) -> list[Path]:
    """The comparison's PNGs in ``out``: success vs prompt tokens and tokens by state (one panel
    per benchmark x model), and the ablations (one panel per benchmark that has them run)."""
    out.mkdir(parents=True, exist_ok=True)
    benches = _benchmarks(outcomes)
    models = list(dict.fromkeys(o.model.name for o in outcomes))
    at = {(o.benchmark.name, o.model.name): o for o in outcomes}
    styles = method_styles(benches)
    paths: list[Path] = []

    def draw_success(ax: Any, o: PairOutcome) -> None:
        rows = summarize(o.records, ("method",))
        shown = [styles.get(r.group[0], PointStyle()) for r in rows]  # a method run with --methods: default style
        # every panel on the same scale, so panels compare at a glance
        plot_success(ax, rows, x="p_tokens", title=_panel_title(o), ylim=(-3, 103), styles=shown)
        _kind_legend(ax, {st.marker for st in shown})

    # one colour per state in every panel (Plan is Plan whichever methods a panel has)
    all_states = sorted({s for o in outcomes for r in o.records for s in r.usage_by_state})
    state_colors = dict(zip(all_states, _palette(len(all_states)), strict=True))

    def draw_tokens(ax: Any, o: PairOutcome) -> None:
        order = [(m,) for m in o.benchmark.all_methods]  # the method table's order
        plot_tokens_by_state(
            ax, tokens_by_state(o.records, ("method",)), title=_panel_title(o), state_colors=state_colors, order=order
        )

    for name, draw in (("success_vs_prompt_tokens.png", draw_success), ("tokens_by_state.png", draw_tokens)):
        plt, fig, axes = _grid(len(benches), len(models), (6.0, 4.2))
        for i, bench in enumerate(benches):
            for j, model in enumerate(models):
                o = at.get((bench.name, model))
                if o is None or not o.records:
                    axes[i][j].set_axis_off()
                    axes[i][j].set_title(f"{bench.name} x {model}: {'no episodes' if o is None else _pending(o)}")
                    continue
                draw(axes[i][j], o)
        fig.savefig(out / name, dpi=100)
        plt.close(fig)
        paths.append(out / name)
    ablated = [b for b in benches if _ablation_table(b, _pairs(outcomes, b))]
    if ablated:
        plt, fig, axes = _grid(1, len(ablated), (7.0, 4.2))
        for j, bench in enumerate(ablated):
            _draw_ablations(axes[0][j], bench, _pairs(outcomes, bench))
        fig.savefig(out / "ablations.png", dpi=100)
        plt.close(fig)
        paths.append(out / "ablations.png")
    for stale in set(_PLOTS) - {p.name for p in paths}:  # a plot of an earlier run that no longer applies
        (out / stale).unlink(missing_ok=True)
    return paths


def _kind_legend(ax: Any, shown: set[str]) -> None:
    """A legend of the shapes in the panel, in grey: the colours belong to the methods."""
    from matplotlib.lines import Line2D

    handles = [
        Line2D([], [], marker=marker, linestyle="", color="0.45", label=_KIND_NAMES[kind])
        for kind, marker in _KIND_MARKERS.items()
        if marker in shown
    ]
    if len(handles) > 1:  # one kind needs no legend
        ax.legend(handles=handles, fontsize=7, loc="upper right", framealpha=0.8)


def _draw_ablations(ax: Any, bench: PaperBenchmark, pairs: list[PairOutcome]) -> None:
    variants = [("full flow", "")] + [
        (f"no {p}", p) for p in bench.ablations if any(bench.ablation(b, p) in bench.all_methods for b in bench.ablated)
    ]
    groups = [(b, o) for b in bench.ablated if b in bench.all_methods for o in pairs if o.records]
    # While a group's ablations are partial, its bars are drawn on the tasks all of them and the
    # full flow finished, so the full flow's bar is not a whole-sample score beside partial ones.
    solved: list[dict[str, dict[int, bool]]] = []
    shared: list[set[int]] = []
    for base, o in groups:
        by_method = {m: _solved(o, m) for m in (bench.ablation(base, part) if part else base for _, part in variants)}
        recorded = [set(done) for done in by_method.values() if done]
        solved.append(by_method)
        shared.append(set.intersection(*recorded) if recorded else set())
    width = 0.8 / len(variants)
    for k, (label, part) in enumerate(variants):
        xs, ys = [], []
        for i, (base, _o) in enumerate(groups):
            done = solved[i][bench.ablation(base, part) if part else base]
            if done and shared[i]:
                xs.append(i + (k - (len(variants) - 1) / 2) * width)
                ys.append(100 * sum(done[t] for t in shared[i]) / len(shared[i]))
        bars = ax.bar(xs, ys, width, label=label)
        ax.bar_label(bars, fmt="%.0f", fontsize=7)  # a 0 % bar has no height: its number shows it was run
    ticks = [
        f"{b}\n{o.model.name}" + ("" if len(on) == o.tasks_total else f" ({len(on)} of {o.tasks_total} tasks)")
        for (b, o), on in zip(groups, shared, strict=True)
    ]
    ax.set_xticks(range(len(groups)), ticks, fontsize=8)
    ax.set_ylim(0, 100)
    ax.set_ylabel("success rate (%)")
    ax.set_title(f"{bench.name}: ablations")
    ax.legend(fontsize=7)


@dataclass(frozen=True)
class PaperDocs:
    """Where the comparison's documents go.

    Attributes:
        results: the results document (its ``paper`` section is written).
        images: the folder for the PNGs (linked from ``results`` by relative path).
        readme: the README whose ``paper-headline`` section is written (``None``: left alone).
    """

    results: Path
    images: Path
    readme: Path | None


def write_paper_docs(
    outcomes: Sequence[PairOutcome],
    docs: PaperDocs,
    *,
    command: str,
    tasks: str,
    date: str,
    gold: Sequence[GoldReplay] = (),
) -> list[Path]:
    """Write the plots, the results section and the README headline; returns the files written.

    ``gold``: the oracle's gold replays, marked in the results section (see :func:`results_section`).

    Raises:
        MarkerError: a document's markers are broken; checked before anything is written, so
            then nothing is.
    """
    check_section(docs.results, RESULTS_MARKERS)
    if docs.readme is not None:
        check_section(docs.readme, HEADLINE_MARKERS)
    plots = write_paper_plots(outcomes, docs.images)
    base = docs.results.resolve().parent
    images = [(_PLOTS[p.name], Path(os.path.relpath(p.resolve(), base)).as_posix()) for p in plots]
    write_section(
        docs.results,
        RESULTS_MARKERS,
        results_section(outcomes, command=command, tasks=tasks, date=date, images=images, gold=gold),
    )
    written = [*plots, docs.results]
    if docs.readme is not None:
        link = Path(os.path.relpath(docs.results.resolve(), docs.readme.resolve().parent)).as_posix()
        write_section(docs.readme, HEADLINE_MARKERS, headline_section(outcomes, date=date, results_link=link))
        written.append(docs.readme)
    return written

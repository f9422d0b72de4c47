"""The overview's numbers: one row per method x model x setting, its success interval, the plot.

Rows come from :func:`stateflow.tasks.reports.metrics.group_records` (the same grouping as the CLI
tables and ``stateflow report``: newest record per episode, settings kept apart), over the
trace-less records of the index. The success interval is Wilson's score interval at 95 %: on the
20-100 tasks of a typical run a success rate is uncertain by several points, and Wilson's
interval (unlike the normal approximation) stays inside [0, 1] and is sensible at 0 % and 100 %.

>>> lo, hi = wilson_interval(8, 10)
>>> (round(lo, 3), round(hi, 3))
(0.49, 0.943)
>>> wilson_interval(0, 0)
(0.0, 1.0)
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from stateflow.tasks.harness.records import latest_records, record_key
from stateflow.tasks.kit.episode_record import EpisodeRecord
from stateflow.tasks.reports.metrics import setting_labels
from stateflow.tasks.reports.paired import PairedComparison, compare
from stateflow.tasks.ui.figures import CellKey, CellTotals, EpisodeFigures, totals_of

__all__ = [
    "Cell",
    "PlotAxis",
    "PlotPoint",
    "Segment",
    "StateBar",
    "SuccessPlot",
    "cells",
    "cells_of",
    "cells_of_totals",
    "paired",
    "state_bars",
    "success_plot",
    "wilson_interval",
]

_Z95 = 1.959963984540054  # the standard normal's 97.5 % quantile

# Colour-blind-safe palette (Okabe-Ito), one colour per method in sorted order.
_PALETTE = ("#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#F0E442", "#000000")


def wilson_interval(successes: int, n: int, z: float = _Z95) -> tuple[float, float]:
    """Wilson's score interval for a proportion (``(0, 1)`` when ``n`` is 0)."""
    if n == 0:
        return 0.0, 1.0
    p = successes / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z / denom * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return max(0.0, centre - half), min(1.0, centre + half)


@dataclass(frozen=True)
class Cell:
    """One overview row: a method with a model label and a setting, over its newest records.

    Attributes:
        id: the identity digest of its records (what ``?a=`` / ``?b=`` name in the comparison).
        success_lo, success_hi: the 95 % Wilson interval of the success rate, in %.
        seconds: mean wall-clock seconds per episode; tokens: mean prompt + completion tokens.
        states: mean prompt + completion tokens per episode by state, in the order its episodes
            first visit them (states without tokens left out).
        setting: what tells this row apart from another row of the same method and models
            (empty when it is the only one); ``conditions`` says what the row was run under
            (dataset, policy, turn limit, grammar, environment), so the overview's setting
            column is never blank for records that keep their identity.
    """

    id: str
    benchmark: str
    method: str
    models: str
    setting: str
    n: int
    solved: int
    success: float
    success_lo: float
    success_hi: float
    reward: float
    prompt_tokens: float
    completion_tokens: float
    cached_tokens: float
    cost: float
    seconds: float
    errored: int
    states: tuple[tuple[str, float], ...] = ()
    conditions: str = ""

    @property
    def tokens(self) -> float:
        return self.prompt_tokens + self.completion_tokens

    @property
    def label(self) -> str:
        text = f"{self.method} / {self.models}"
        return f"{text} [{self.setting}]" if self.setting else text


def cells(records: Iterable[EpisodeRecord]) -> list[Cell]:
    """The overview rows, in the order of the CLI tables (benchmark, method, models, setting)."""
    newest = latest_records(records)
    identities = {r.identity_digest: r.identity for r in newest if r.identity_digest and r.identity}
    return cells_of([EpisodeFigures.of(r) for r in newest], identities)


def cells_of(figures: Iterable[EpisodeFigures], identities: Mapping[str, dict[str, Any]]) -> list[Cell]:
    """The overview rows from each episode's figures (newest per episode, as a summary keeps them)."""
    return cells_of_totals(totals_of(figures), identities)


def cells_of_totals(totals: Mapping[CellKey, CellTotals], identities: Mapping[str, dict[str, Any]]) -> list[Cell]:
    """The overview rows from their sums.

    Grouped as :func:`stateflow.tasks.reports.metrics.group_records` groups records: by benchmark,
    method and models, each setting (identity) apart and labelled by ``setting_labels``.
    """
    groups: dict[tuple[str, str, str], list[str]] = {}
    for benchmark, method, models, digest in totals:
        groups.setdefault((benchmark, method, models), []).append(digest)
    out = []
    for (benchmark, method, models), digests in sorted(groups.items()):
        digests.sort()
        labels = setting_labels([dict(identities.get(d) or {}) for d in digests])
        for label, digest in sorted(zip(labels, digests, strict=True), key=lambda t: t[0]):
            cell = _cell(benchmark, method, models, label, totals[benchmark, method, models, digest])
            out.append(replace(cell, conditions=conditions_of(identities.get(digest) or {})))
    return out


def conditions_of(identity: Mapping[str, Any]) -> str:
    """What a row was run under, from its identity: ``"demo · oracle · 10 turns · no grammar · sqlite"``.

    ``""`` for records without an identity (written before identities were stored).
    """
    if not identity:
        return ""
    parts = [str(identity.get("dataset", "?")), str(identity.get("policy", "?"))]
    if identity.get("max_turns") is not None:
        parts.append(f"{identity['max_turns']} turns")
    parts.append("grammar" if identity.get("grammar") else "no grammar")
    if identity.get("backend"):
        parts.append(str(identity["backend"]))
    if identity.get("database_scope") not in (None, "", "benchmark"):
        parts.append(f"databases: {identity['database_scope']}")
    if identity.get("repeat") is not None:
        parts.append(f"repeat {identity['repeat']}")
    return " · ".join(parts)


def _cell(benchmark: str, method: str, models: str, setting: str, t: CellTotals) -> Cell:
    n = t.n
    lo, hi = wilson_interval(t.solved, n)
    return Cell(
        id=t.key_digest,
        benchmark=benchmark,
        method=method,
        models=models,
        setting=setting,
        n=n,
        solved=t.solved,
        success=100.0 * t.solved / n,
        success_lo=100.0 * lo,
        success_hi=100.0 * hi,
        reward=t.reward / n,
        prompt_tokens=t.prompt_tokens / n,
        completion_tokens=t.completion_tokens / n,
        cached_tokens=t.cached_tokens / n,
        cost=t.cost,
        seconds=t.seconds / n,
        errored=t.errored,
        states=tuple((s, v / n) for s, v in t.states.items() if v),
    )


def paired(baseline: Cell, candidate: Cell, records: Iterable[EpisodeRecord]) -> PairedComparison:
    """``stateflow compare``'s comparison of two overview rows (won / lost, sign test).

    Args:
        records: records holding both rows' episodes (others are ignored); each row takes the
            newest record of its identity per task.
    """
    newest = latest_records(records)
    mine = {
        c.id: [r for r in newest if record_key(r)[0] == c.id and (r.benchmark, r.method, r.models) ==
               (c.benchmark, c.method, c.models)]
        for c in (baseline, candidate)
    }  # fmt: skip
    return compare(mine[baseline.id], mine[candidate.id], labels=(baseline.label, candidate.label))


@dataclass(frozen=True)
class PlotPoint:
    """One cell on the success-vs-cost plot, in SVG user units (y grows downwards).

    ``x`` is where its numbered marker is drawn; ``x0`` where its value is. They differ when the
    marker was moved aside so as not to cover another one at (nearly) the same place; a thin
    line then joins the marker to a dot at its value.
    """

    cell_id: str
    x: float
    y: float
    y_lo: float
    y_hi: float
    color: str
    number: int
    title: str
    x0: float = 0.0

    @property
    def moved(self) -> bool:
        return abs(self.x - self.x0) > 0.01


@dataclass(frozen=True)
class PlotAxis:
    label: str
    ticks: tuple[tuple[float, str], ...]  # (position in SVG units, text)


@dataclass(frozen=True)
class SuccessPlot:
    """The overview's success-vs-cost scatter, laid out for an inline SVG (no script needed).

    Points are numbered and listed in a legend beside the plot instead of labelled in place:
    labels written next to points overlapped and ran off the edge when methods sat close.
    """

    width: int
    height: int
    left: int
    top: int
    plot_w: int
    plot_h: int
    x_axis: PlotAxis
    y_axis: PlotAxis
    points: tuple[PlotPoint, ...]


def _nice_step(span: float, target: int = 5) -> float:
    raw = span / target
    mag = 10 ** math.floor(math.log10(raw))
    return next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)


def _fmt(v: float) -> str:
    if v >= 1000:
        return f"{v / 1000:g}k"
    return f"{v:g}"


MARKER_R = 6.0  # the radius of a plot marker (the template draws circles of this size)


def _dodge(points: Sequence[PlotPoint], lo: float, hi: float) -> tuple[PlotPoint, ...]:
    """Move markers sideways, in order, until none covers another (rows with the same success and
    nearly the same cost would otherwise hide each other's number); each keeps its value's x."""
    gap = 2 * MARKER_R + 1.5
    placed: list[PlotPoint] = []
    for p in points:
        for k in range(len(points) * 2 + 1):
            shift = gap * ((k + 1) // 2) * (1 if k % 2 else -1)
            x = p.x + shift
            if not lo <= x <= hi and k:
                continue
            if all(math.hypot(x - q.x, p.y - q.y) >= gap for q in placed):
                break
        placed.append(replace(p, x=x, x0=p.x))
    return tuple(placed)


def success_plot(rows: Sequence[Cell], *, width: int = 720, height: int = 380) -> SuccessPlot:
    """Lay out one point per row: success % (with its interval) against cost, or tokens when free."""
    by_cost = any(c.cost for c in rows)
    xs = [c.cost if by_cost else c.tokens for c in rows]
    left, top, right, bottom = 64, 16, 16, 48
    plot_w, plot_h = width - left - right, height - top - bottom
    x_max = max(xs, default=0.0) or 1.0
    step = _nice_step(x_max)
    x_top = math.ceil(x_max * 1.05 / step) * step

    def sx(v: float) -> float:
        return left + plot_w * v / x_top

    def sy(pct: float) -> float:
        return top + plot_h * (1 - pct / 100.0)

    methods = sorted({c.method for c in rows})
    color = {m: _PALETTE[i % len(_PALETTE)] for i, m in enumerate(methods)}
    points = tuple(
        PlotPoint(
            cell_id=c.id,
            x=sx(x),
            y=sy(c.success),
            y_lo=sy(c.success_lo),
            y_hi=sy(c.success_hi),
            color=color[c.method],
            number=i + 1,
            title=(
                f"{c.label}: {c.success:.1f} % success (95 % CI {c.success_lo:.1f}-{c.success_hi:.1f}), "
                + (f"${c.cost:.4f}" if by_cost else f"{c.tokens:.0f} tokens/task")
                + f", n={c.n}"
            ),
        )
        for i, (c, x) in enumerate(zip(rows, xs, strict=True))
    )
    points = _dodge(points, left, left + plot_w)
    n_ticks = round(x_top / step)
    x_ticks = tuple((sx(i * step), _fmt(round(i * step, 10))) for i in range(n_ticks + 1))
    y_ticks = tuple((sy(v), str(v)) for v in range(0, 101, 20))
    return SuccessPlot(
        width=width,
        height=height,
        left=left,
        top=top,
        plot_w=plot_w,
        plot_h=plot_h,
        x_axis=PlotAxis("total cost ($)" if by_cost else "tokens per task (prompt + completion)", x_ticks),
        y_axis=PlotAxis("success (%)", y_ticks),
        points=points,
    )


@dataclass(frozen=True)
class Segment:
    state: str
    tokens: float
    x: float
    width: float
    color: str


@dataclass(frozen=True)
class StateBar:
    """One row's mean tokens per episode, split by the states of its own flow (in visiting order)."""

    cell_id: str
    label: str
    total: float
    segments: tuple[Segment, ...]


_STATE_PALETTE = (
    "#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#b07aa1", "#76b7b2", "#edc948", "#ff9da7", "#9c755f", "#bab0ac",
)  # fmt: skip


def state_bars(rows: Sequence[Cell], *, width: float = 420.0) -> list[StateBar]:
    """Mean prompt + completion tokens per episode by state, one bar per row, scaled to ``width``.

    Each bar lists only its own flow's states, in the order its episodes first visit them, so a
    legend never mixes the states of different flows (the report's former tokens-by-state plot
    put every flow's states in one legend).
    """
    per_row = [(c, dict(c.states)) for c in rows]
    top = max((sum(d.values()) for _, d in per_row), default=0.0) or 1.0
    colors: dict[str, str] = {}
    bars = []
    for c, d in per_row:
        x, segs = 0.0, []
        for state, tokens in d.items():
            color = colors.setdefault(state, _STATE_PALETTE[len(colors) % len(_STATE_PALETTE)])
            w = width * tokens / top
            segs.append(Segment(state, tokens, x, w, color))
            x += w
        bars.append(StateBar(c.id, c.label, sum(d.values()), tuple(segs)))
    return bars

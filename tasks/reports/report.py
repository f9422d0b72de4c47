"""Reports over episode records: a paper-style table and PNG plots.

The HTML page and ``write_report`` (plots, page and ``metrics.json`` together) live with
``stateflow ui``'s pages, whose templates they share: :mod:`stateflow.tasks.ui.static_report`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.table import Table
from stateflow.tasks.kit.episode_record import EpisodeRecord
from stateflow.tasks.reports.metrics import GROUP_KEYS, Row, summarize, tokens_by_state

__all__ = [
    "PointStyle",
    "metrics_table",
    "plot_success",
    "plot_tokens_by_state",
    "write_plots",
]

_COLUMNS = [
    ("SR %", "sr", "{:.2f}"),
    ("95 % CI", "sr_ci", "{}"),
    ("reward", "reward", "{:.3f}"),
    ("raw", "reward_raw", "{:.3f}"),
    ("turns", "turns", "{:.2f}"),
    ("error %", "error_rate", "{:.2f}"),
    ("cost $", "cost", "{:.4f}"),
    ("p-tokens", "p_tokens", "{:.0f}"),
    ("c-tokens", "c_tokens", "{:.0f}"),
    ("errored", "errored", "{}"),
    # evaluated ÷ sent prompt tokens (the server's prompt-cache reuse; "-": nothing sent)
    ("eval/sent", "eval_share", "{:.2f}"),
]


def _cell(fmt: str, value: object) -> str:
    return "-" if value is None else fmt.format(value)


def metrics_table(rows: Sequence[Row], keys: Sequence[str] = GROUP_KEYS, title: str = "results") -> Table:
    """A rich table in the paper's layout.

    A ``setting`` column appears when some group holds records of several settings; it names
    the identity fields that tell the rows apart. ``95 % CI`` is the Wilson interval of the
    success rate over the row's tasks (:func:`~stateflow.tasks.kit.stats.wilson_interval`).
    ``eval/sent`` is the share of prompt tokens the model server evaluated (the rest came from its
    prompt cache; :func:`~stateflow.tasks.reports.metrics.evaluated_share`).
    """
    t = Table(title=title)
    for k in keys:
        t.add_column(k, no_wrap=True)  # a method name cut over two lines cannot be searched or copied
    mixed = any(r.setting for r in rows)
    if mixed:
        t.add_column("setting")
    t.add_column("n", justify="right")
    for head, _, _ in _COLUMNS:
        t.add_column(head, justify="right")
    for r in rows:
        d = r.as_dict(keys) | {"sr_ci": r.sr_ci.text()}
        t.add_row(*r.group, *([r.setting] if mixed else []), str(r.n), *(_cell(fmt, d[a]) for _, a, fmt in _COLUMNS))
    return t


def _label(group: tuple[str, ...], setting: str = "") -> str:
    text = " / ".join(group[1:]) if len(group) > 1 else group[0]
    return f"{text} [{setting}]" if setting else text


_MARKER_AREA = 60  # points^2, matplotlib's scatter size


@dataclass(frozen=True)
class PointStyle:
    """How :func:`plot_success` draws one point.

    Attributes:
        color: a matplotlib colour; ``None``: the axes' next colour.
        marker: a matplotlib marker (``"o"``, ``"^"``, ``"D"``, ``"s"``).
    """

    color: Any = None
    marker: str = "o"


def plot_success(
    ax: Any,
    rows: Sequence[Row],
    *,
    x: str = "auto",
    title: str = "success vs cost",
    ylim: tuple[float, float] | None = None,
    styles: Sequence[PointStyle] | None = None,
) -> None:
    """Draw one point per row on ``ax``: success rate (with its 95 % Wilson interval as a whisker)
    against its cost or prompt tokens.

    Args:
        ax: a matplotlib ``Axes``.
        rows: from :func:`~stateflow.tasks.reports.metrics.summarize`; each point is labelled with its
            group (without the benchmark when the group has several keys) and setting.
        x: ``"p_tokens"`` (mean prompt tokens per task), ``"cost"`` (total dollars), or
            ``"auto"``: cost when some row has a price, else prompt tokens (local models cost 0).
        title: the panel title.
        ylim: the y axis limits (``None``: matplotlib's), set before the labels are placed.
        styles: one per row (``None``: each point in the axes' next colour, as a circle).

    Raises:
        ValueError: ``styles`` does not have one entry per row.
    """
    if styles is not None and len(styles) != len(rows):
        raise ValueError(f"plot_success: {len(styles)} styles for {len(rows)} rows")
    by_cost = x == "cost" or (x == "auto" and any(q.cost for q in rows))
    points = [(r.cost if by_cost else r.p_tokens, r.sr) for r in rows]
    styles = styles or [PointStyle()] * len(rows)
    markers = [
        ax.scatter([value], [sr], s=_MARKER_AREA, color=st.color, marker=st.marker)
        for (value, sr), st in zip(points, styles, strict=True)
    ]
    for (value, _), row, marker in zip(points, rows, markers, strict=True):
        # the 95 % Wilson interval as a whisker in the point's colour, behind it (a line, so the
        # axes' collections stay one marker per row)
        ax.plot(
            [value, value],
            [row.sr_ci.low, row.sr_ci.high],
            color=marker.get_facecolor()[0],
            linewidth=1,
            alpha=0.6,
            zorder=marker.get_zorder() - 0.1,
            solid_capstyle="butt",
        )
    ax.set_xlabel("total cost ($)" if by_cost else "prompt tokens per task")
    ax.set_ylabel("success rate (%, whiskers: 95 % Wilson interval)")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    if ylim is not None:
        ax.set_ylim(*ylim)
    label_apart(ax, points, [_label(r.group, r.setting) for r in rows], markers=markers)


def label_apart(
    ax: Any,
    points: Sequence[tuple[float, float]],
    labels: Sequence[str],
    *,
    markers: Sequence[Any] | None = None,
    fontsize: int = 8,
) -> None:
    """Label each point of ``ax``, moving labels apart so that none covers another or a marker.

    Labels are pushed apart by adjustText; one that moves away is tied to its point by a thin
    line; no label covers a marker either. ``markers`` (one scatter artist per point, optional)
    colour the labels like themselves. Why: methods with near-equal success and tokens (an
    ablation and its flow at 0 %, two baselines at one cost) wrote their names over one another
    at one fixed offset. Call it after the axis limits are final.
    """
    from adjustText import adjust_text  # here: tables and HTML need no matplotlib

    # Labels start on their markers: adjustText separates them far more reliably from there than
    # from a fixed offset (tests/tasks/test_report.py), and pushes each off its own marker.
    texts = [
        ax.text(x, y, text, fontsize=fontsize, color=None if markers is None else markers[i].get_facecolor()[0])
        for i, (text, (x, y)) in enumerate(zip(labels, points, strict=True))
    ]
    if not texts:
        return
    # adjustText keeps clear of points, not of areas: ring each marker with points of its radius.
    radius = (_MARKER_AREA**0.5) / 2 * ax.figure.dpi / 72
    to_data = ax.transData.inverted()
    avoid = []
    for x, y in points:
        px, py = ax.transData.transform((x, y))
        for dx, dy in ((0, 0), (radius, 0), (-radius, 0), (0, radius), (0, -radius)):
            avoid.append(to_data.transform((px + dx, py + dy)))
    adjust_text(
        texts,
        x=[a[0] for a in avoid],
        y=[a[1] for a in avoid],
        target_x=[x for x, _ in points],
        target_y=[y for _, y in points],
        ax=ax,
        arrowprops={"arrowstyle": "-", "color": "0.6", "lw": 0.5},
    )


def plot_tokens_by_state(
    ax: Any,
    per_state: dict[tuple[str, ...], dict[str, dict[str, float]]],
    *,
    title: str = "tokens by state",
    state_colors: Mapping[str, Any] | None = None,
    order: Sequence[tuple[str, ...]] | None = None,
) -> None:
    """Draw stacked bars on ``ax``: mean prompt + completion tokens per task, one bar per group.

    Args:
        ax: a matplotlib ``Axes``.
        per_state: from :func:`~stateflow.tasks.reports.metrics.tokens_by_state`; bars are labelled like
            :func:`plot_success`'s points, stacks are states (one legend entry each).
        title: the panel title.
        state_colors: a colour per state (``None``, or a state it lacks: the axes' next colour);
            give the same mapping to several panels so one state has one colour in all.
        order: the bars' order (groups it lacks follow, sorted); ``None``: sorted.
    """
    states = sorted({s for d in per_state.values() for s in d})
    first = [g for g in (order or ()) if g in per_state]
    groups = first + sorted(set(per_state) - set(first))
    colors = state_colors or {}
    bottom = [0.0] * len(groups)
    for s in states:
        vals = [per_state[g].get(s, {}).get("prompt", 0) + per_state[g].get(s, {}).get("completion", 0) for g in groups]
        ax.bar(range(len(groups)), vals, bottom=bottom, label=s, color=colors.get(s))
        bottom = [b + v for b, v in zip(bottom, vals, strict=True)]
    # many bars (the paper's 17 methods) need steeper names to stay apart
    rotation = 20 if len(groups) <= 8 else 55
    ax.set_xticks(range(len(groups)), [_label(g) for g in groups], rotation=rotation, ha="right", fontsize=8)
    ax.set_ylabel("tokens per task")
    ax.set_title(title)
    if any(bottom):
        ax.set_ylim(0, max(bottom) * 1.05)  # the tallest bar shows its top
    if states:
        handles, labels = _legend_by_flow(ax, per_state, groups, states)
        ax.legend(handles, labels, fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))  # beside the bars


def _legend_by_flow(
    ax: Any,
    per_state: dict[tuple[str, ...], dict[str, dict[str, float]]],
    groups: list[tuple[str, ...]],
    states: list[str],
) -> tuple[list[Any], list[str]]:
    """Legend entries: one per state when every bar has the same states; else one block per set of
    states (a flow), headed by the bars that have it, so states of different flows are not mixed.
    """
    from matplotlib.patches import Patch

    bars = {c.get_label(): c for c in ax.containers}
    flows: dict[tuple[str, ...], list[tuple[str, ...]]] = {}
    for g in groups:
        flows.setdefault(tuple(s for s in states if s in per_state[g]), []).append(g)
    if len(flows) == 1:
        return [bars[s] for s in states], list(states)
    handles: list[Any] = []
    labels: list[str] = []
    for flow_states, members in flows.items():
        names = ", ".join(_label(g) for g in members)
        handles.append(Patch(visible=False))
        labels.append((names if len(names) <= 40 else names[:39] + "…") + ":")
        handles += [bars[s] for s in flow_states]
        labels += [f"  {s}" for s in flow_states]
    return handles, labels


def write_plots(records: list[EpisodeRecord], out: Path) -> list[Path]:
    """``success_vs_cost.png`` and ``tokens_by_state.png`` in ``out``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out.mkdir(parents=True, exist_ok=True)
    paths = []
    fig, ax = plt.subplots(figsize=(7, 4.5))
    plot_success(ax, summarize(records))
    fig.tight_layout()
    p = out / "success_vs_cost.png"
    fig.savefig(p, dpi=110, bbox_inches="tight")  # labels moved outside the axes stay in the picture
    plt.close(fig)
    paths.append(p)

    per_state = tokens_by_state(records)
    fig, ax = plt.subplots(figsize=(max(6, 1.2 * len(per_state) + 2), 4.5))
    plot_tokens_by_state(ax, per_state)
    fig.tight_layout()
    p = out / "tokens_by_state.png"
    fig.savefig(p, dpi=110, bbox_inches="tight")  # labels moved outside the axes stay in the picture
    plt.close(fig)
    paths.append(p)
    return paths

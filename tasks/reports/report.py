"""Reports over episode records: a paper-style table, PNG plots and a self-contained HTML page.

The HTML page needs no network: plots are embedded as PNG data, each method's state graph as
SVG drawn by Graphviz, and a few lines of JavaScript highlight the path an episode took and show
its messages.
"""

from __future__ import annotations

import base64
import html
import json
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.table import Table
from stateflow.tasks.harness.flow_cards import FlowCard, load_cards
from stateflow.tasks.kit.episode_record import EpisodeRecord
from stateflow.tasks.reports.metrics import GROUP_KEYS, Row, group_records, summarize, tokens_by_state

from stateflow.flow_ref import is_flow_ref
from stateflow.graph import to_dot

__all__ = [
    "PointStyle",
    "metrics_table",
    "plot_success",
    "plot_tokens_by_state",
    "write_html",
    "write_plots",
    "write_report",
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
]


def metrics_table(rows: Sequence[Row], keys: Sequence[str] = GROUP_KEYS, title: str = "results") -> Table:
    """A rich table in the paper's layout.

    A ``setting`` column appears when some group holds records of several settings; it names
    the identity fields that tell the rows apart. ``95 % CI`` is the Wilson interval of the
    success rate over the row's tasks (:func:`~stateflow.tasks.kit.stats.wilson_interval`).
    """
    t = Table(title=title)
    for k in keys:
        t.add_column(k)
    mixed = any(r.setting for r in rows)
    if mixed:
        t.add_column("setting")
    t.add_column("n", justify="right")
    for head, _, _ in _COLUMNS:
        t.add_column(head, justify="right")
    for r in rows:
        d = r.as_dict(keys) | {"sr_ci": r.sr_ci.text()}
        t.add_row(*r.group, *([r.setting] if mixed else []), str(r.n), *(fmt.format(d[a]) for _, a, fmt in _COLUMNS))
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
    """Draw one point per row on ``ax``: success rate against its cost or prompt tokens.

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
    ax.set_xlabel("total cost ($)" if by_cost else "prompt tokens per task")
    ax.set_ylabel("success rate (%)")
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
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))  # beside the bars, not over them


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
    fig.savefig(p, dpi=110)
    plt.close(fig)
    paths.append(p)

    per_state = tokens_by_state(records)
    fig, ax = plt.subplots(figsize=(max(6, 1.2 * len(per_state) + 2), 4.5))
    plot_tokens_by_state(ax, per_state)
    fig.tight_layout()
    p = out / "tokens_by_state.png"
    fig.savefig(p, dpi=110)
    plt.close(fig)
    paths.append(p)
    return paths


def _svg_for(method: str, benchmark: str, cards: list[FlowCard], fingerprints: set[str]) -> str:
    """The method's state graph as inline SVG (a note instead if Graphviz is absent or no graph is known).

    The graph comes from the run directory's flow cards (what the runner ran; no module is
    imported), the card matching the records' flow fingerprint first. Without a card (records
    written before cards existed) a built-in method is rebuilt; a user's flow is not re-imported.
    """
    dot = shutil.which("dot")
    if dot is None:
        return "<p class=note>Graphviz is not installed, so the state graph is not drawn.</p>"
    mine = [c for c in cards if c.benchmark == benchmark and c.method == method]
    mine.sort(key=lambda c: c.flow_sha256 not in fingerprints)  # the records' own definition first
    if mine:
        source = mine[0].dot
    elif is_flow_ref(method):
        return "<p class=note>no graph: this run directory holds no flow card for this user flow</p>"
    else:
        from stateflow.tasks.agents.methods import build_method
        from stateflow.tasks.harness.registry import default_registry

        try:
            flow, _ = build_method(method, default_registry().get(benchmark))
        except (ValueError, KeyError) as err:
            return f"<p class=note>no graph: {html.escape(str(err))}</p>"
        source = to_dot(flow)
    proc = subprocess.run([dot, "-Tsvg"], input=source, text=True, capture_output=True)
    if proc.returncode != 0:
        return f"<p class=note>Graphviz failed: {html.escape(proc.stderr[:200])}</p>"
    svg = proc.stdout
    return svg[svg.find("<svg") :]


def _episode_view(r: EpisodeRecord, max_chars: int) -> dict[str, Any]:
    return {
        "task": r.task,
        "success": r.success,
        "reward": r.reward_raw,
        "status": r.status,
        "error": r.error,
        "query": r.query,
        "path": r.path,
        "turns": r.turns,
        "tokens": r.prompt_tokens + r.completion_tokens,
        "messages": [
            {"state": m["state"], "kind": m["kind"], "name": m["name"], "content": m["content"][:max_chars]}
            for m in r.history
        ],
    }


_CSS = """
body{font-family:system-ui,sans-serif;margin:24px;color:#222}
table{border-collapse:collapse;font-size:13px}td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}
th{background:#f3f3f3}td:first-child,td:nth-child(2),td:nth-child(3){text-align:left}
.group{margin:28px 0;border-top:2px solid #888;padding-top:8px}.cols{display:flex;gap:24px;align-items:flex-start}
.graph{min-width:320px;max-width:45%}.graph svg{max-width:100%;height:auto}
.episodes{font-size:13px}.ep{cursor:pointer;padding:1px 4px}.ep.ok{color:#176117}.ep.bad{color:#a11}
.ep.sel{background:#ffe9a8}.msgs{font-size:12px;white-space:pre-wrap;max-height:520px;overflow:auto}
.m{border-left:4px solid #ccc;margin:4px 0;padding:2px 6px}.m.llm{border-color:#3a6ea5}.m.tool{border-color:#5a9}
.m.prompt{border-color:#bbb;color:#555}.note{color:#a60}
img{width:48%;min-width:360px;vertical-align:top}
g.hl > ellipse, g.hl > polygon, g.hl > path{stroke:#e07000;stroke-width:3}
"""

_JS = """
const data = JSON.parse(document.getElementById('episodes').textContent);
function show(gid, idx) {
  const ep = data[gid][idx];
  const box = document.getElementById('g' + gid);
  box.querySelectorAll('.ep').forEach((e, i) => e.classList.toggle('sel', i === idx));
  const pairs = new Set();
  for (let i = 0; i + 1 < ep.path.length; i++) pairs.add(ep.path[i] + '->' + ep.path[i + 1]);
  box.querySelectorAll('svg g.node').forEach(n => {
    const t = n.querySelector('title');
    n.classList.toggle('hl', !!t && ep.path.includes(t.textContent));
  });
  box.querySelectorAll('svg g.edge').forEach(e => {
    const t = e.querySelector('title');
    e.classList.toggle('hl', !!t && pairs.has(t.textContent.replace('&#45;&gt;', '->')));
  });
  const msgs = box.querySelector('.msgs');
  msgs.textContent = '';
  const head = document.createElement('div');
  head.textContent = 'task ' + ep.task + ' | reward ' + ep.reward + ' | ' + ep.status +
    (ep.error ? ' (' + ep.error + ')' : '') + ' | path: ' + ep.path.join(' > ');
  msgs.appendChild(head);
  for (const m of ep.messages) {
    const d = document.createElement('div');
    d.className = 'm ' + m.kind;
    d.textContent = '[' + m.state + ' / ' + m.name + '] ' + m.content;
    msgs.appendChild(d);
  }
}
document.querySelectorAll('.ep').forEach(e => e.addEventListener('click', () => show(+e.dataset.g, +e.dataset.i)));
data.forEach((eps, g) => { if (eps.length) show(g, 0); });
document.body.dataset.ready = 'yes';
"""


def _fingerprints(records: list[EpisodeRecord]) -> set[str]:
    return {str(r.identity["flow_sha256"]) for r in records if r.identity and "flow_sha256" in r.identity}


def write_html(records: list[EpisodeRecord], out: Path, plots: Sequence[Path] = (), max_chars: int = 4000) -> Path:
    """A self-contained ``report.html`` in ``out``."""
    cards = load_cards(out)  # the graphs of what ran, stored by the runner
    out.mkdir(parents=True, exist_ok=True)
    rows = summarize(records)
    mixed = any(r.setting for r in rows)
    heads = [*GROUP_KEYS, *(["setting"] if mixed else []), "n", *(h for h, _, _ in _COLUMNS)]
    table = ["<table><tr>", *(f"<th>{html.escape(h)}</th>" for h in heads), "</tr>"]
    for r in rows:
        d = r.as_dict(GROUP_KEYS) | {"sr_ci": r.sr_ci.text()}
        cells = [*r.group, *([r.setting] if mixed else []), str(r.n), *(fmt.format(d[a]) for _, a, fmt in _COLUMNS)]
        table.append("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in cells) + "</tr>")
    table.append("</table>")
    groups = group_records(records, GROUP_KEYS)  # newest record per episode, settings kept apart
    sections, data = [], []
    for gid, (key, setting, rs) in enumerate(groups):
        rs = sorted(rs, key=lambda r: r.task)
        data.append([_episode_view(r, max_chars) for r in rs])
        items = "".join(
            f'<div class="ep {"ok" if r.success else "bad"}" data-g="{gid}" data-i="{i}">'
            f"task {r.task}: reward {r.reward_raw:.2f}, {r.turns} turns — {html.escape(r.query[:90])}</div>"
            for i, r in enumerate(rs)
        )
        sections.append(
            f'<div class="group" id="g{gid}"><h2>{html.escape(" / ".join(key))}'
            f"{html.escape(f' [{setting}]' if setting else '')}</h2><div class='cols'>"
            f'<div class="graph">{_svg_for(key[1], key[0], cards, _fingerprints(rs))}</div>'
            f'<div class="episodes">{items}</div><div class="msgs"></div></div></div>'
        )
    images = "".join(
        f'<img alt="{html.escape(p.stem)}" src="data:image/png;base64,{base64.b64encode(p.read_bytes()).decode()}">'
        for p in plots
    )
    payload = json.dumps(data, ensure_ascii=False).replace("</", "<\\/")
    page = (
        "<!doctype html><html><head><meta charset='utf-8'><title>StateFlow report</title>"
        f"<style>{_CSS}</style></head><body><h1>StateFlow report</h1>{''.join(table)}<div>{images}</div>"
        f"{''.join(sections)}<script type='application/json' id='episodes'>{payload}</script>"
        f"<script>{_JS}</script></body></html>"
    )
    path = out / "report.html"
    # model text may hold half a surrogate pair: write it as its escape rather than fail the report
    path.write_text(page, encoding="utf-8", errors="backslashreplace")
    return path


def write_report(records: list[EpisodeRecord], out: Path) -> dict[str, Path]:
    """Plots, HTML and ``metrics.json`` (overall and by hardness) in ``out``."""
    from stateflow.tasks.pdoctor.report import write_pdoctor_plots  # pdoctor: planning-limit curve, error classes

    plots = write_plots(records, out) + write_pdoctor_plots(records, out)
    html_path = write_html(records, out, plots)
    metrics = {
        "overall": [r.as_dict(GROUP_KEYS) for r in summarize(records)],
        "by_hardness": [r.as_dict((*GROUP_KEYS, "hardness")) for r in summarize(records, (*GROUP_KEYS, "hardness"))],
        "tokens_by_state": {" / ".join(g): v for g, v in tokens_by_state(records).items()},
    }
    mpath = out / "metrics.json"
    mpath.write_text(json.dumps(metrics, indent=2))
    return {"html": html_path, "metrics": mpath, **{p.stem: p for p in plots}}

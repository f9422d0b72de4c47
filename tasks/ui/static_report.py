"""The one-file HTML report (``stateflow report``), rendered from the UI's templates.

:func:`write_report` writes what ``stateflow report`` leaves in a run directory: the PNG plots
(:func:`stateflow.tasks.reports.report.write_plots`), ``report.html`` and ``metrics.json``.

The report is the UI's pages frozen into one file for sharing: the same overview table, success
plot and tokens-by-state bars (:mod:`stateflow.tasks.ui.overview`), and per method the same flow
graph, submission and step views (:mod:`stateflow.tasks.ui.steps`) an episode page shows, with
the stylesheet and script inlined. Nothing is fetched when it opens.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from stateflow.tasks.harness.flow_cards import FlowCard, load_cards
from stateflow.tasks.kit.episode_record import EpisodeRecord
from stateflow.tasks.reports.metrics import GROUP_KEYS, group_records, summarize, tokens_by_state
from stateflow.tasks.reports.report import write_plots
from stateflow.tasks.ui.app import asset, renderer
from stateflow.tasks.ui.graph import FlowGraph, GraphCache
from stateflow.tasks.ui.overview import cells, state_bars, success_plot
from stateflow.tasks.ui.steps import Step, Submission, steps_of, submission_of, taken_edges

__all__ = ["render_report", "write_html", "write_report"]


@dataclass(frozen=True)
class _Episode:
    record: EpisodeRecord
    steps: list[Step]
    edges: list[tuple[str, str, str]]
    sub: Submission


@dataclass(frozen=True)
class _Group:
    title: str
    graph: FlowGraph
    episodes: list[_Episode]


def _cut(record: EpisodeRecord, max_chars: int) -> EpisodeRecord:
    """``record`` with each message cut to ``max_chars`` (a report of 1,000 episodes stays openable)."""
    history = [
        {**m, "content": m["content"][:max_chars]} if isinstance(m, dict) and isinstance(m.get("content"), str) else m
        for m in record.history
    ]
    return record.model_copy(update={"history": history})


def render_report(
    records: Sequence[EpisodeRecord],
    plots: Sequence[Path] = (),
    max_chars: int = 4000,
    cards: Sequence[FlowCard] = (),
) -> str:
    """The report's HTML: the overview, ``plots`` (PNG files) embedded, then every method's episodes
    (graphs from ``cards``, the run directory's flow cards, when they hold the method)."""
    rows = cells(records)
    graphs = GraphCache()
    groups = []
    for key, setting, rs in group_records(records, GROUP_KEYS):
        rs = sorted(rs, key=lambda r: r.task)
        episodes = [
            _Episode(r, steps_of(r.history), taken_edges(r.transitions), submission_of(r))
            for r in (_cut(x, max_chars) for x in rs)
        ]
        title = " / ".join(key) + (f" [{setting}]" if setting else "")
        groups.append(_Group(title, graphs.for_episode(rs[0], cards), episodes))
    images = [(p.stem, base64.b64encode(p.read_bytes()).decode()) for p in plots]
    return (
        renderer()
        .get_template("report.html")
        .render(
            rows=rows,
            plot=success_plot(rows),
            bars=state_bars(rows),
            images=images,
            groups=groups,
            sources=(),
            stamp="",
            poll_ms=0,
            static=True,
            inline_css=asset("ui.css"),
            inline_js=asset("ui.js").replace("</", "<\\/"),
        )
    )


def write_html(records: list[EpisodeRecord], out: Path, plots: Sequence[Path] = (), max_chars: int = 4000) -> Path:
    """A self-contained ``report.html`` in ``out`` (graphs from ``out``'s flow cards when it has them)."""
    cards = load_cards(out)  # the graphs of what ran, stored by the runner
    out.mkdir(parents=True, exist_ok=True)
    path = out / "report.html"
    # model text may hold half a surrogate pair: write it as its escape rather than fail the report
    path.write_text(render_report(records, plots, max_chars, cards), encoding="utf-8", errors="backslashreplace")
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

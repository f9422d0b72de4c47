"""The one-file HTML report (``stateflow report``), rendered from the UI's templates.

The report is the UI's pages frozen into one file for sharing: the same overview table, success
plot and tokens-by-state bars (:mod:`stateflow.tasks.ui.overview`), and per method the same flow
graph, submission and step views (:mod:`stateflow.tasks.ui.steps`) an episode page shows, with
the stylesheet and script inlined. Nothing is fetched when it opens.
"""

from __future__ import annotations

import base64
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from stateflow.tasks.episode_record import EpisodeRecord
from stateflow.tasks.metrics import GROUP_KEYS, group_records
from stateflow.tasks.ui.app import asset, renderer
from stateflow.tasks.ui.graph import FlowGraph, GraphCache
from stateflow.tasks.ui.overview import cells, state_bars, success_plot
from stateflow.tasks.ui.steps import Step, Submission, steps_of, submission_of, taken_edges

__all__ = ["render_report"]


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


def render_report(records: Sequence[EpisodeRecord], plots: Sequence[Path] = (), max_chars: int = 4000) -> str:
    """The report's HTML: the overview, ``plots`` (PNG files) embedded, then every method's episodes."""
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
        groups.append(_Group(title, graphs.for_episode(key[0], key[1], rs[0].transitions), episodes))
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

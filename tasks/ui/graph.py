"""Flow graphs as inline SVG, drawn by Graphviz from the flow's own rules.

The episode page draws the method's flow (:func:`stateflow.graph.to_dot`: every edge is a rule
of the flow) and highlights the path the episode took. The graph comes from the run directory's
flow cards (:mod:`stateflow.tasks.harness.flow_cards`) when it has them; a method with no card
that this StateFlow cannot build (a user's ``module:attr`` flow, a method renamed since the run)
is drawn from the transitions the record holds instead, and says so: those are only the edges
the episode used.

Graphviz's SVG names each node and edge in a ``<title>`` (``Init``, ``Init->Observe``), which is
what the page's script matches against the path.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from stateflow.tasks.harness.flow_cards import FlowCard
from stateflow.tasks.kit.episode_record import EpisodeRecord

from stateflow.flow_ref import is_flow_ref
from stateflow.graph import to_dot

__all__ = ["FlowGraph", "GraphCache", "dot_from_transitions", "rules_by_state", "simplify_dot"]


@dataclass(frozen=True)
class FlowGraph:
    """An SVG (``""`` when none could be drawn) and a note saying how it was drawn or why not.

    ``simple_svg`` is the same flow simplified (:func:`simplify_dot`): one arrow per pair of
    states, labelled with the rules' numbers, and the states without their outputs, in larger
    type. The paper's SQL flow has 25 rules; drawn whole in a page column its labels are about 5
    pixels high, so the episode page offers the simplified drawing and an "actual size" view.
    """

    svg: str
    note: str = ""
    simple_svg: str = ""
    rules: tuple[tuple[str, str], ...] = ()  # (state, "1. submitted · 2. turn limit reached ...")


def _quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def dot_from_transitions(name: str, transitions: Sequence[Any]) -> str:
    """A DOT digraph of the transitions one episode recorded (``source``, ``target``, ``rule``)."""
    lines = [f"digraph {_quote(name)} {{", "  rankdir=TB;", '  node [fontname="Helvetica", shape=box, style=rounded];']
    seen: set[tuple[str, str, str]] = set()
    for t in transitions:
        if not isinstance(t, dict):
            continue
        edge = (str(t.get("source", "?")), str(t.get("target", "?")), str(t.get("rule", "")))
        if edge not in seen:
            seen.add(edge)
            lines.append(f"  {_quote(edge[0])} -> {_quote(edge[1])} [label={_quote(edge[2])}];")
    lines.append("}")
    return "\n".join(lines) + "\n"


_EDGE = re.compile(r'^(\s*)(".*?(?<!\\)"|\w+) -> (".*?(?<!\\)"|\w+) \[label="(\d+)\. ((?:[^"\\]|\\.)*)"\];$')
_LABEL = re.compile(r'label="((?:[^"\\]|\\.)*)"')


def simplify_dot(dot_text: str) -> str:
    """The flow of ``dot_text`` (as :func:`stateflow.graph.to_dot` writes it) with its rules
    between the same two states merged into one arrow labelled by their numbers (its tooltip
    lists them), and each state labelled by its name only, in larger type.

    Edge titles stay ``Source->Target``, so the page's path highlighting finds them.
    """
    out: list[str] = []
    merged: dict[tuple[str, str], list[tuple[str, str]]] = {}
    where: dict[tuple[str, str], tuple[int, str]] = {}
    for line in dot_text.splitlines():
        m = _EDGE.match(line)
        if m:
            indent, src, dst, number, condition = m.groups()
            if (src, dst) not in merged:
                merged[src, dst] = []
                where[src, dst] = (len(out), indent)
                out.append("")  # filled below, in the place of the pair's first rule
            merged[src, dst].append((number, condition))
            continue
        if "->" not in line and "[" in line and "label=" in line and not line.lstrip().startswith(("node", "edge")):
            line = _LABEL.sub(lambda lm: 'label="' + lm.group(1).split("\\n")[0] + '"', line, count=1)
        out.append(line)
    for (src, dst), rules in merged.items():
        at, indent = where[src, dst]
        numbers = ", ".join(n for n, _ in rules)
        tip = "; ".join(f"{n}. {c}" for n, c in rules)
        out[at] = f'{indent}{src} -> {dst} [label="{numbers}", tooltip="{tip}"];'
    text = "\n".join(out)
    head = text.find("{") + 1
    style = "\n  graph [nodesep=0.5, ranksep=0.5];\n  node [fontsize=18];\n  edge [fontsize=16];"
    return text[:head] + style + text[head:] + "\n"


def rules_by_state(dot_text: str) -> tuple[tuple[str, str], ...]:
    """Each state's numbered rules, in the order of ``dot_text`` (the simplified drawing's legend)."""
    found: dict[str, list[str]] = {}
    for line in dot_text.splitlines():
        m = _EDGE.match(line)
        if m:
            _, src, _, number, condition = m.groups()
            rule = f"{number}. {condition}"
            state = found.setdefault(src.strip('"'), [])
            if rule not in state:
                state.append(rule)
    return tuple((state, " · ".join(rules)) for state, rules in found.items())


def _render(dot_text: str, *, simple: bool = True) -> FlowGraph:
    """Draw ``dot_text`` (and, with ``simple``, its :func:`simplify_dot` form) as inline SVG."""
    full = _svg(dot_text)
    if not simple or not full.svg:
        return full
    return FlowGraph(full.svg, full.note, _svg(simplify_dot(dot_text)).svg, rules_by_state(dot_text))


def _svg(dot_text: str) -> FlowGraph:
    dot = shutil.which("dot")
    if dot is None:
        return FlowGraph("", "Graphviz is not installed (apt-get install graphviz), so the flow graph is not drawn.")
    proc = subprocess.run([dot, "-Tsvg"], input=dot_text, text=True, capture_output=True, timeout=30)
    if proc.returncode != 0:
        return FlowGraph("", f"Graphviz failed: {proc.stderr[:200]}")
    svg = proc.stdout
    return FlowGraph(svg[svg.find("<svg") :])


class GraphCache:
    """Flow graphs, drawn once per UI process (keyed by benchmark, method and flow fingerprint)."""

    def __init__(self) -> None:
        self._graphs: dict[tuple[str, str, str], FlowGraph] = {}
        self._lock = threading.Lock()

    def for_episode(self, record: EpisodeRecord, cards: Sequence[FlowCard] = ()) -> FlowGraph:
        """The graph of the flow that played ``record``.

        In order: the run directory's flow card for the method (the one with the record's flow
        fingerprint first: what the runner ran, no module imported); a built-in method rebuilt;
        else the transitions the record holds. A user's ``module:attr`` flow is never imported
        here: a results file is data, and importing a module it names would run code.
        """
        from stateflow.tasks.agents.methods import build_method
        from stateflow.tasks.harness.registry import default_registry

        benchmark, method = record.benchmark, record.method
        sha = str((record.identity or {}).get("flow_sha256", ""))
        mine = sorted(
            (c for c in cards if c.benchmark == benchmark and c.method == method), key=lambda c: c.flow_sha256 != sha
        )
        key = (benchmark, method, mine[0].flow_sha256 if mine else "")
        with self._lock:
            cached = self._graphs.get(key)
        if cached is not None:
            return cached
        if mine:
            graph = _render(mine[0].dot)
        elif is_flow_ref(method):
            graph = _render(dot_from_transitions(method, record.transitions))
            note = "no flow card for this user flow here: drawn from this episode's transitions"
            return FlowGraph(graph.svg, note, graph.simple_svg, graph.rules)
        else:
            try:
                flow, _ = build_method(method, default_registry().get(benchmark))
            except Exception as err:  # any failure to build: fall back to the record's edges
                graph = _render(dot_from_transitions(method, record.transitions))
                note = f"{method} cannot be built here ({err}); drawn from this episode's transitions"
                return FlowGraph(graph.svg, note, graph.simple_svg, graph.rules)
            graph = _render(to_dot(flow))
        with self._lock:
            self._graphs[key] = graph
        return graph

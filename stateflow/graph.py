"""Graph views of a flow: networkx, Mermaid, Graphviz DOT and PNG.

Every edge is drawn from a :class:`~stateflow.flow.Transition` object and labelled with its
condition's name, so a diagram shows exactly the rules the runtime evaluates (rules from ``ANY``
are expanded to every non-final state and numbered by priority). A state that runs a subflow
is drawn as a Mermaid ``subgraph`` / DOT ``cluster`` holding the subflow's own states and rules
(named ``Outer.Inner``, as in traces), entered from the state and left by the state's rules.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import networkx as nx

from stateflow.errors import StateFlowError
from stateflow.flow import Flow
from stateflow.outputs import LLM, Prompt, Tool

__all__ = ["mermaid_id", "render_png", "to_dot", "to_mermaid", "to_networkx"]


def _outputs_label(flow: Flow, name: str) -> str:
    parts = []
    for o in flow.states[name].outputs:
        if isinstance(o, Prompt):
            parts.append("prompt")
        elif isinstance(o, LLM):
            parts.append(o.label)
        elif isinstance(o, Tool):
            parts.append(o.name)
        else:  # AutoGenAgent, Human, Parallel, a subflow
            parts.append(o.label)
    return " → ".join(parts)


def to_networkx(flow: Flow) -> nx.MultiDiGraph:
    """A ``MultiDiGraph``: nodes are state names (attrs ``final``, ``initial``, ``outputs``);
    edges carry ``priority`` (1 = checked first) and ``condition`` (the rule's name)."""
    g = nx.MultiDiGraph(name=flow.name)
    for name, st in flow.states.items():
        g.add_node(name, final=st.final, initial=name == flow.initial, outputs=_outputs_label(flow, name))
    for name, st in flow.states.items():
        if st.final:
            continue
        for priority, rule in enumerate(flow.rules_from(name), 1):
            g.add_edge(name, rule.target, priority=priority, condition=rule.label)
    return g


def mermaid_id(name: str) -> str:
    """The Mermaid node id :func:`to_mermaid` gives state ``name`` (``Outer.Inner`` included).

    >>> mermaid_id("Fix.Draft")
    's_Fix_Draft'
    """
    return "s_" + "".join(c if c.isalnum() else "_" for c in name)


def _escape_mermaid(text: str) -> str:
    return text.replace('"', "#quot;").replace("|", "#124;")


def to_mermaid(flow: Flow) -> str:
    """A Mermaid ``flowchart`` of the flow (paste into any Markdown renderer); a subflow is a
    ``subgraph`` with its own start marker, states and rules."""
    lines = ["flowchart TD", f"    start(( )) --> {mermaid_id(flow.initial)}"]
    _mermaid_body(flow, "", "    ", lines)
    return "\n".join(lines) + "\n"


def _mermaid_body(flow: Flow, prefix: str, indent: str, lines: list[str]) -> None:
    g = to_networkx(flow)
    for name, data in g.nodes(data=True):
        full = prefix + name
        label = full + (f"<br/><small>{_escape_mermaid(data['outputs'])}</small>" if data["outputs"] else "")
        inner = flow.states[name].subflow
        if inner is not None:
            # the subgraph is the state: parent edges attach to it, its start marker enters it
            lines.append(f'{indent}subgraph {mermaid_id(full)}["{label}"]')
            lines.append(f"{indent}    direction TB")
            entry = mermaid_id(f"{full}.{inner.initial}")
            lines.append(f"{indent}    {mermaid_id(full + '.__start')}(( )) --> {entry}")
            _mermaid_body(inner, f"{full}.", indent + "    ", lines)
            lines.append(f"{indent}end")
            continue
        shape = f'(["{label}"])' if data["final"] else f'["{label}"]'
        lines.append(f"{indent}{mermaid_id(full)}{shape}")
    for src, dst, data in g.edges(data=True):
        cond = _escape_mermaid(f"{data['priority']}. {data['condition']}")
        lines.append(f'{indent}{mermaid_id(prefix + src)} -->|"{cond}"| {mermaid_id(prefix + dst)}')


def _dot_quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def to_dot(flow: Flow) -> str:
    """A Graphviz DOT digraph of the flow; a subflow is a ``cluster`` holding the subflow
    state's own node (its entry) and the subflow's states and rules."""
    lines = [f"digraph {_dot_quote(flow.name)} {{", "  rankdir=TB;", '  node [fontname="Helvetica"];']
    lines.append('  __start [shape=point, label=""];')
    lines.append(f"  __start -> {_dot_quote(flow.initial)};")
    _dot_body(flow, "", "  ", lines)
    lines.append("}")
    return "\n".join(lines) + "\n"


def _dot_body(flow: Flow, prefix: str, indent: str, lines: list[str]) -> None:
    g = to_networkx(flow)
    for name, data in g.nodes(data=True):
        full = prefix + name
        shape = "doublecircle" if data["final"] else "box"
        label = full + (f"\\n{data['outputs']}" if data["outputs"] else "")
        label_q = '"' + label.replace('"', '\\"') + '"'
        node = f"{indent}{_dot_quote(full)} [shape={shape}, style=rounded, label={label_q}];"
        inner = flow.states[name].subflow
        if inner is None:
            lines.append(node)
            continue
        lines.append(f"{indent}subgraph {_dot_quote('cluster_' + full)} {{")
        lines.append(f"{indent}  label={_dot_quote(full)};")
        lines.append("  " + node)
        lines.append(f"{indent}  {_dot_quote(full)} -> {_dot_quote(full + '.' + inner.initial)} [style=dashed];")
        _dot_body(inner, full + ".", indent + "  ", lines)
        lines.append(f"{indent}}}")
    for src, dst, data in g.edges(data=True):
        label = _dot_quote(f"{data['priority']}. {data['condition']}")
        lines.append(f"{indent}{_dot_quote(prefix + src)} -> {_dot_quote(prefix + dst)} [label={label}];")


def render_png(flow: Flow, path: str | Path) -> Path:
    """Render the flow to a PNG with Graphviz's ``dot``.

    Raises:
        StateFlowError: ``dot`` is not installed (``apt-get install graphviz``) or failed.
    """
    dot = shutil.which("dot")
    if dot is None:
        raise StateFlowError("PNG export needs Graphviz's `dot`: apt-get install graphviz (or use --format dot)")
    out = Path(path)
    proc = subprocess.run([dot, "-Tpng", "-o", str(out)], input=to_dot(flow), text=True, capture_output=True)
    if proc.returncode != 0:
        raise StateFlowError(f"dot failed: {proc.stderr.strip()[:300]}")
    return out

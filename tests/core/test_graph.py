"""Graph views drawn from the rule objects."""

from __future__ import annotations

import shutil

import pytest

from stateflow.graph import render_png, to_dot, to_mermaid, to_networkx
from tests.core.helpers import plan_act_flow


def test_networkx_view_has_prioritised_condition_edges():
    g = to_networkx(plan_act_flow())
    assert set(g.nodes) == {"Plan", "Act", "End"}
    edges = sorted((u, v, d["priority"], d["condition"]) for u, v, d in g.edges(data=True))
    assert edges == [
        ("Act", "Act", 2, "always"),
        ("Act", "End", 1, "tool.done == True"),
        ("Plan", "Act", 1, "always"),
    ]
    assert g.nodes["Plan"]["initial"] and g.nodes["End"]["final"]


def test_mermaid_snapshot():
    assert to_mermaid(plan_act_flow()) == (
        "flowchart TD\n"
        "    start(( )) --> s_Plan\n"
        '    s_Plan["Plan<br/><small>prompt → llm</small>"]\n'
        '    s_Act["Act<br/><small>prompt → llm → count</small>"]\n'
        '    s_End(["End"])\n'
        '    s_Plan -->|"1. always"| s_Act\n'
        '    s_Act -->|"1. tool.done == True"| s_End\n'
        '    s_Act -->|"2. always"| s_Act\n'
    )


def test_dot_is_parseable_by_graphviz(tmp_path):
    dot = to_dot(plan_act_flow())
    assert '"Act" -> "End" [label="1. tool.done == True"];' in dot
    if shutil.which("dot") is None:
        pytest.skip("Graphviz `dot` is not installed (scripts/setup.sh installs it)")
    out = render_png(plan_act_flow(), tmp_path / "f.png")
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

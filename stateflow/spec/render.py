"""Views of a spec's automaton: a networkx graph, a Mermaid diagram, a text table.

All three are drawn from the same DFA object, never re-derived.
"""

from __future__ import annotations

import networkx as nx

from stateflow.spec.compiled import AgentSpec

__all__ = ["to_mermaid", "to_networkx", "transition_table"]


def to_networkx(spec: AgentSpec) -> nx.MultiDiGraph:
    """The automaton as a ``MultiDiGraph``: nodes are automaton states (attributes ``start``,
    ``accepting``, ``must_stop``), edges carry ``label`` (the declared state), ``text`` and
    ``env_input``."""
    dfa = spec.dfa
    g = nx.MultiDiGraph(name=spec.name)
    for q in range(dfa.num_states):
        g.add_node(q, start=q == dfa.start, accepting=dfa.may_stop(q), must_stop=dfa.must_stop(q))
    for q, edges in dfa.transitions.items():
        for name, r in edges.items():
            decl = spec.state(name)
            g.add_edge(q, r, key=name, label=name, text=decl.text, env_input=decl.env_input)
    return g


def to_mermaid(spec: AgentSpec) -> str:
    """A Mermaid ``stateDiagram-v2`` of the automaton (env-input edges marked ``[env]``).

    Example:
        >>> from stateflow.spec import library_spec
        >>> print(to_mermaid(library_spec("direct")))
        stateDiagram-v2
            [*] --> q0
            q0 --> q1: Question [env]
            q1 --> q2: Answer
            q2 --> [*]
    """
    dfa = spec.dfa
    lines = ["stateDiagram-v2", f"    [*] --> q{dfa.start}"]
    for q in range(dfa.num_states):
        for name, r in dfa.transitions[q].items():
            tag = " [env]" if spec.state(name).env_input else ""
            lines.append(f"    q{q} --> q{r}: {name}{tag}")
    for q in sorted(dfa.accepting):
        lines.append(f"    q{q} --> [*]")
    return "\n".join(lines)


def transition_table(spec: AgentSpec) -> list[tuple[int, str, int, str]]:
    """Rows ``(from, declared state, to, flags)`` with flags ``start``/``may-stop``/``must-stop``."""
    dfa = spec.dfa
    rows = []
    for q in range(dfa.num_states):
        flags = ",".join(
            f
            for f, on in (("start", q == dfa.start), ("may-stop", dfa.may_stop(q)), ("must-stop", dfa.must_stop(q)))
            if on
        )
        for name, r in dfa.transitions[q].items():
            rows.append((q, name, r, flags))
        if not dfa.transitions[q]:
            rows.append((q, "", -1, flags))
    return rows

"""The structure of a flow as plain JSON: what the paper-flow snapshot test compares.

Everything that can change a run is in it: the state order, each state's output functions (prompt
texts, grammars, retry policy, tool functions), the rules in priority order, the bounds and the
system message, plus the flow fingerprint that episode identities (resume) are built from.
"""

from __future__ import annotations

from typing import Any

from stateflow import Flow
from stateflow.fingerprint import _callable_name, _output, flow_fingerprint


def flow_structure(flow: Flow) -> dict[str, Any]:
    """The flow as JSON types (see the module docstring)."""
    return {
        "name": flow.name,
        "initial": flow.initial,
        "max_transitions": flow.max_transitions,
        "system_message": flow.system_message,
        "description": flow.description,
        "states": [
            {
                "name": s.name,
                "final": s.final,
                "description": s.description,
                "outputs": [_output(o, _callable_name) for o in s.outputs],
            }
            for s in flow.states.values()
        ],
        "rules": [str(t) for t in flow.transitions],
        "conditions": [None if t.when is None else t.when.name for t in flow.transitions],
        "fingerprint": flow_fingerprint(flow),
    }

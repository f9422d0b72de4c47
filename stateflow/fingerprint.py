"""A flow's fingerprint: one sha256 over everything in its definition that can change a run.

States with their output functions (prompt texts, model profiles, grammars, reply levers,
tools), rules in priority order, bounds and the system message. Callables are named by their
stable id (:mod:`stateflow.stable_id`), so moving a function keeps every fingerprint that
holds it. Checkpoints carry the fingerprint of the flow that wrote them (a thread is continued
only under the same definition), and the evaluation harness puts it in every episode's
identity (``stateflow.tasks.harness.identity``).

Example:
    >>> from stateflow import Flow, LLM, State, Transition
    >>> ask, done = State("Ask", LLM()), State("Done", final=True)
    >>> flow = Flow("f", initial=ask, transitions=[Transition(ask, done)])
    >>> len(flow_fingerprint(flow)), flow_fingerprint(flow) == flow_fingerprint(flow)
    (64, True)
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from typing import Any

from stateflow.flow import Flow
from stateflow.outputs import LLM, AutoGenAgent, Human, OutputFunction, Prompt
from stateflow.parallel import Parallel
from stateflow.stable_id import has_stable_id, id_of

__all__ = ["callables_without_stable_id", "flow_fingerprint", "sha256_of"]

_Namer = Callable[[Any], "str | None"]  # how the payload names a callable (None stays None)


def sha256_of(obj: Any) -> str:
    """sha256 of ``obj``'s canonical JSON (sorted keys, no spaces; other types by ``str``)."""
    text = json.dumps(obj, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _callable_name(fn: Callable[..., Any] | None) -> str | None:
    # A callable's code and closure values are not hashable in general, so a flow's callables
    # are identified by name: their stable id, which survives a move to another module, or for
    # a user's undecorated callable its qualified name.
    return None if fn is None else id_of(fn)


def _grammar_name(grammar: str | Callable[..., Any] | None, name: _Namer) -> str | None:
    """A text grammar as it is; a grammar function by name (as every callable here)."""
    return grammar if isinstance(grammar, str) or grammar is None else name(grammar)


def _output(out: OutputFunction | Flow, name: _Namer) -> dict[str, Any]:
    if isinstance(out, Flow):  # a subflow: its whole definition, nested
        return {"subflow": _flow_payload(out, name)}
    if isinstance(out, Parallel):
        return {
            "parallel": out.name,
            "names": list(out.names),
            "merge": name(out.merge),
            "merge_failures": out.merge_failures,
            "branches": [_output(b, name) for b in out.branches],
        }
    if isinstance(out, Prompt):
        return {"prompt": out.text}
    if isinstance(out, LLM):
        grammar = _grammar_name(out.grammar, name)
        return {
            "llm": out.profile,
            "grammar": grammar,
            "regex": out.regex,
            "stop": list(out.stop),
            "retry_when": name(out.retry_when),
            "retry_temperature": out.retry_temperature,
            **_levers(out, name),
        }
    if isinstance(out, Human):
        return {"human": out.name, "prompt": out.prompt, "show_last": out.show_last, "defer": out.defer}
    if isinstance(out, AutoGenAgent):
        # the user's agent is named by its class and name; its own settings are the user's business
        return {"agent": out.name, "class": name(type(out.agent)), "max_tool_rounds": out.max_tool_rounds}
    return {"tool": out.name, "fn": name(out.fn)}


def _levers(out: LLM, name: _Namer) -> dict[str, Any]:
    """The optional reply levers, only when set: flows without them keep their fingerprints."""
    levers: dict[str, Any] = {}
    if out.guard is not None:
        g = out.guard
        levers["guard"] = {
            "parse": name(g.parse),
            "temperatures": list(g.temperatures),
            "note": g.note,
            "max_observation_chars": g.max_observation_chars,
        }
    if out.cut is not None:
        c = out.cut
        levers["cut"] = {"max_run": c.max_run, "max_period": c.max_period, "max_line_chars": c.max_line_chars}
    if out.schema is not None:  # the class's name and its JSON schema (sorted when hashed)
        levers["schema"] = {"name": out.schema.__qualname__, "json_schema": out.schema.model_json_schema()}
    if out.tools:
        from stateflow.mcp_tools import MCPTools

        servers = [t.identity() for t in out.tools if isinstance(t, MCPTools)]
        if servers:  # only MCP servers: plain tools never entered the fingerprint
            levers["mcp"] = servers
    if out.vote is not None:
        v = out.vote
        levers["vote"] = {
            "parse": name(v.parse),
            "executor": name(v.executor),
            "k": v.k,
            "temperature": v.temperature,
            "seed": v.seed,
            **({"greedy_first": True} if v.greedy_first else {}),  # only when set: older fingerprints hold
            **({"stop_when_decided": True} if v.stop_when_decided else {}),
            **({"quorum": v.quorum} if v.quorum is not None else {}),
            **(
                {
                    "variants": [
                        {
                            "name": x.name,
                            "rewrite": name(x.rewrite),
                            "grammar": _grammar_name(x.grammar, name),
                            "sampled": x.sampled,
                        }
                        for x in v.variants
                    ]
                }
                if v.variants
                else {}
            ),
        }
    return levers


def _flow_payload(flow: Flow, name: _Namer) -> dict[str, Any]:
    """What :func:`flow_fingerprint` hashes, with callables named by ``name``."""
    return {
        "name": flow.name,
        "initial": flow.initial,
        "max_transitions": flow.max_transitions,
        "system_message": flow.system_message,
        "states": [
            {"name": s.name, "final": s.final, "outputs": [_output(o, name) for o in s.outputs]}
            for s in flow.states.values()
        ],
        "rules": [str(t) for t in flow.transitions],
    }


def flow_fingerprint(flow: Flow) -> str:
    """sha256 of a flow's definition: states with their output functions, rules, bounds.

    Rules are identified by their printed form (sources, target, condition name) in priority
    order, so reordering rules or renaming a condition changes the fingerprint.
    """
    return sha256_of(_flow_payload(flow, _callable_name))


def callables_without_stable_id(flow: Flow) -> list[str]:
    """The callables in ``flow``'s fingerprint that carry no :func:`~stateflow.stable_id.stable_id`.

    Such a callable is named by where it lives, so moving it changes the fingerprint. Every
    built-in method's list is empty (tests/tasks/test_golden_identities.py checks it).
    """
    missing: list[str] = []

    def name(fn: Any) -> str | None:
        if fn is not None and not has_stable_id(fn):
            missing.append(id_of(fn))
        return _callable_name(fn)

    _flow_payload(flow, name)
    return missing

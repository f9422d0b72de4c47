"""Every method the runner can evaluate: name -> (flow builder, view).

StateFlow methods come in both views; ablations are switches of the same flow definition.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from stateflow.sf_agent import SFAgentView
from stateflow.tasks.baselines import build_plan_solve, build_react, build_try_again
from stateflow.tasks.intercode_bash import build_bash_flow
from stateflow.tasks.intercode_sql import build_sql_flow
from stateflow.tasks.pdoctor import add_pdoctor
from stateflow.tasks.spec_agents import ENFORCEMENTS, SPEC_AGENTS, build_spec_agent

from stateflow import Flow, StateFlowView, View

__all__ = ["METHODS", "Method", "build_method"]


@dataclass(frozen=True)
class Method:
    """A named way of solving tasks: how to build its flow for a domain, and in which view."""

    name: str
    build: Callable[[str, bool], Flow]  # (domain, grammar) -> flow
    view: Callable[[], View]
    domains: tuple[str, ...] = ("sql", "bash")
    description: str = ""


def _stateflow(**switches: bool) -> Callable[[str, bool], Flow]:
    def build(domain: str, grammar: bool) -> Flow:
        if domain == "sql":
            return build_sql_flow(grammar=grammar, **switches)
        return build_bash_flow(grammar=grammar)

    return build


def _methods() -> dict[str, Method]:
    out: dict[str, Method] = {}
    ablations = {
        "": {},
        "_no_verify": {"verify": False},
        "_no_error": {"error": False},
        "_no_observe": {"observe": False},
        "_schema": {"schema": True},  # a variant for small models, not an ablation of the paper's flow
    }
    for suffix, switches in ablations.items():
        domains = ("sql", "bash") if not suffix else ("sql",)
        out[f"stateflow{suffix}"] = Method(
            f"stateflow{suffix}",
            _stateflow(**switches),
            StateFlowView,
            domains,
            "StateFlow (one agent, instructions in the history)",
        )
        out[f"sf_agent{suffix}"] = Method(
            f"sf_agent{suffix}",
            _stateflow(**switches),
            SFAgentView,
            domains,
            "SF_Agent (one agent per state, private instructions)",
        )
    out["react"] = Method("react", lambda d, g: build_react(d, grammar=g), StateFlowView, description="ReAct")
    out["react_refined"] = Method(
        "react_refined",
        lambda d, g: build_react(d, refined=True, grammar=g),
        StateFlowView,
        description="ReAct with inspect-first examples",
    )
    out["plan_solve"] = Method(
        "plan_solve", lambda d, g: build_plan_solve(d, grammar=g), StateFlowView, description="Plan & Solve"
    )
    out["try_again"] = Method(
        "try_again", lambda d, g: build_try_again(d, grammar=g), StateFlowView, description="InterCode Try-Again"
    )
    for stem, spec_name in SPEC_AGENTS.items():  # library spec agents x enforcement
        for mode in ENFORCEMENTS:
            out[f"spec_{stem}_{mode}"] = Method(
                f"spec_{stem}_{mode}",
                lambda d, g, stem=stem, mode=mode: build_spec_agent(stem, mode, d),
                StateFlowView,
                description=f"spec agent {spec_name} (enforcement: {mode})",
            )
    return out


METHODS: dict[str, Method] = add_pdoctor(_methods())  # react/stateflow/sf_agent also run pdoctor


def build_method(name: str, domain: str, *, grammar: bool = False) -> tuple[Flow, View]:
    """The flow and view of method ``name`` for ``domain``.

    Raises:
        ValueError: unknown method or a method that does not apply to the domain.
    """
    try:
        method = METHODS[name]
    except KeyError:
        raise ValueError(f"unknown method {name!r}; choose from: {', '.join(METHODS)}") from None
    if domain not in method.domains:
        raise ValueError(f"method {name!r} applies to {', '.join(method.domains)}, not {domain!r}")
    return method.build(domain, grammar), method.view()

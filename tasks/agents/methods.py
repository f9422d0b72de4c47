"""Method tables: the named ways of solving a benchmark, and resolving a ``--method`` value.

A benchmark's methods are a mapping ``name -> Method`` (see :class:`stateflow.tasks.kit.benchmark.Method`);
the helpers here build the families the built-in benchmarks share: a StateFlow flow in both views
(:func:`stateflow_methods`), the paper's baselines (:func:`baseline_methods`) and the library spec
agents (:func:`spec_agent_methods`).

A ``--method`` value is a method name of the benchmark or ``module:attribute`` naming a user's
:class:`~stateflow.Flow` (or a zero-argument function returning one), importable from the
current directory: it is evaluated like any other method (:func:`resolve_method`).
"""

from __future__ import annotations

from collections.abc import Callable

from stateflow.sf_agent import SFAgentView
from stateflow.tasks.agents.baselines import build_oneshot, build_plan_solve, build_react, build_try_again
from stateflow.tasks.agents.spec_agents import ENFORCEMENTS, SPEC_AGENTS, build_spec_agent
from stateflow.tasks.kit.benchmark import Benchmark, Method
from stateflow.tasks.kit.spec_prompts import SpecDomain
from stateflow.tasks.kit.tools import ObservationFormat

from stateflow import Flow, StateFlowView, Tool, View
from stateflow.flow_ref import is_flow_ref, load_flow

__all__ = [
    "baseline_methods",
    "build_method",
    "resolve_method",
    "spec_agent_methods",
    "stateflow_methods",
]


def stateflow_methods(suffix: str, build: Callable[[bool], Flow]) -> dict[str, Method]:
    """``stateflow<suffix>`` (StateFlow view) and ``sf_agent<suffix>`` (SF_Agent view) of one flow."""
    return {
        f"stateflow{suffix}": Method(
            f"stateflow{suffix}", build, StateFlowView, "StateFlow (one agent, instructions in the history)"
        ),
        f"sf_agent{suffix}": Method(
            f"sf_agent{suffix}", build, SFAgentView, "SF_Agent (one agent per state, private instructions)"
        ),
    }


def baseline_methods(
    domain: str, fmt: ObservationFormat, *, setup: Callable[[], Tool] | None = None
) -> dict[str, Method]:
    """The paper's baselines reading ``prompts/<domain>/`` and showing observations with ``fmt``.

    ``setup`` builds the tool the one-shot baseline runs before its single LLM call (for SQL:
    the schema); ``None`` gives the model only the task.
    """
    return {
        "oneshot": Method(
            "oneshot",
            lambda g: build_oneshot(domain, fmt=fmt, setup=setup() if setup else None, grammar=g),
            StateFlowView,
            "One-shot (one action, submitted)",
        ),
        "react": Method("react", lambda g: build_react(domain, fmt=fmt, grammar=g), StateFlowView, "ReAct"),
        "react_refined": Method(
            "react_refined",
            lambda g: build_react(domain, fmt=fmt, refined=True, grammar=g),
            StateFlowView,
            "ReAct with inspect-first examples",
        ),
        "plan_solve": Method(
            "plan_solve", lambda g: build_plan_solve(domain, fmt=fmt, grammar=g), StateFlowView, "Plan & Solve"
        ),
        "try_again": Method(
            "try_again", lambda g: build_try_again(domain, fmt=fmt, grammar=g), StateFlowView, "InterCode Try-Again"
        ),
    }


def spec_agent_methods(domain: str, spec_domain: SpecDomain, fmt: ObservationFormat) -> dict[str, Method]:
    """Every library spec agent under every enforcement (``spec_<stem>_<mode>``); grammar is theirs."""
    out: dict[str, Method] = {}
    for stem, spec_name in SPEC_AGENTS.items():
        for mode in ENFORCEMENTS:
            out[f"spec_{stem}_{mode}"] = Method(
                f"spec_{stem}_{mode}",
                lambda g, stem=stem, mode=mode: build_spec_agent(stem, mode, spec_domain, prefix=domain, fmt=fmt),
                StateFlowView,
                f"spec agent {spec_name} (enforcement: {mode})",
            )
    return out


def resolve_method(benchmark: Benchmark, name: str) -> Method:
    """The method ``name`` of ``benchmark``, or a user's flow given as ``module:attribute``.

    A user's flow runs in the StateFlow view, as written (``--grammar`` does not rebuild it); its
    method name is the reference as given, so its records, resume and report work like a
    built-in method's. It is imported in the process that runs the episode: with Ray workers
    the module must be importable there too.

    Raises:
        ValueError: an unknown method name (the message lists the benchmark's methods).
        stateflow.errors.ConfigError: a ``module:attribute`` that does not name a flow.
    """
    if name in benchmark.methods or not is_flow_ref(name):
        return benchmark.method(name)
    flow = load_flow(name)  # imported once, so an import error shows before the run starts
    return Method(name, lambda grammar: flow, StateFlowView, f"user flow {flow.name}")


def build_method(name: str, benchmark: Benchmark, *, grammar: bool = False) -> tuple[Flow, View]:
    """The flow and view of method ``name`` (or ``module:attribute``) on ``benchmark``.

    Raises:
        ValueError: unknown method or a method that does not apply to the benchmark.
        stateflow.errors.ConfigError: a ``module:attribute`` that does not name a flow.
    """
    method = resolve_method(benchmark, name)
    return method.build(grammar), method.view()

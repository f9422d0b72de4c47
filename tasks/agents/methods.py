"""Method tables: the named ways of solving a benchmark, and resolving a ``--method`` value.

A benchmark's methods are a mapping ``name -> Method`` (see :class:`stateflow.tasks.kit.benchmark.Method`);
the helpers here build the families the built-in benchmarks share: a StateFlow flow in both views
(:func:`stateflow_methods`), the paper's baselines (:func:`baseline_methods`) and the library spec
agents (:func:`spec_agent_methods`).

A ``--method`` value is a method name of the benchmark, a recipe method with levers added
(``sf_agent_hint+values+question_last``: the levers of :attr:`Benchmark.levers`), or
``module:attribute`` naming a user's :class:`~stateflow.Flow` (or a zero-argument function
returning one), importable from the current directory: each is evaluated like any other
method (:func:`resolve_method`).
"""

from __future__ import annotations

from collections.abc import Callable

from stateflow.sf_agent import SFAgentView
from stateflow.tasks.agents.baselines import build_oneshot, build_plan_solve, build_react, build_try_again
from stateflow.tasks.agents.spec_agents import ENFORCEMENTS, SPEC_AGENTS, build_spec_agent
from stateflow.tasks.kit.benchmark import Benchmark, Method
from stateflow.tasks.kit.levers import RECIPE_SEPARATOR, LeverError, LeverTable, Recipe, split_recipe
from stateflow.tasks.kit.spec_prompts import SpecDomain
from stateflow.tasks.kit.tools import ObservationFormat

from stateflow import Flow, StateFlowView, Tool, View
from stateflow.flow_ref import is_flow_ref, load_flow

__all__ = [
    "VIEWS",
    "baseline_methods",
    "build_method",
    "prefix_first_baselines",
    "recipe_methods",
    "resolve_method",
    "spec_agent_methods",
    "stateflow_methods",
]

#: the two views every StateFlow flow runs in: recipe view name -> (factory, one-line description)
VIEWS: dict[str, tuple[Callable[[], View], str]] = {
    "stateflow": (StateFlowView, "StateFlow (one agent, instructions in the history)"),
    "sf_agent": (SFAgentView, "SF_Agent (one agent per state, private instructions)"),
}
_FAMILY = {"stateflow": "StateFlow view", "sf_agent": "SF_Agent view"}


def stateflow_methods(suffix: str, build: Callable[[bool], Flow]) -> dict[str, Method]:
    """``stateflow<suffix>`` (StateFlow view) and ``sf_agent<suffix>`` (SF_Agent view) of one flow."""
    return {
        f"{view}{suffix}": Method(f"{view}{suffix}", build, factory, about, family=_FAMILY[view])
        for view, (factory, about) in VIEWS.items()
    }


def recipe_methods(
    table: LeverTable,
    suffix: str,
    levers: tuple[str, ...],
    parent: str | None = None,
    adds: tuple[str, ...] = (),
) -> dict[str, Method]:
    """A preset in both views: ``stateflow<suffix>`` and ``sf_agent<suffix>``, the base flow of
    ``table`` with ``levers`` on.

    Args:
        table: the benchmark's levers.
        suffix: the preset's name after the view (``_vote_question_last``).
        levers: every lever of the preset.
        parent: the suffix of the preset it extends (``None``: the base flow itself).
        adds: the levers it adds to ``parent``; the description says so, one distinct line each.

    Raises:
        LeverError: the levers do not fit together (checked here, when the preset is defined).
    """
    table.check(levers)
    out: dict[str, Method] = {}
    for view, (factory, about) in VIEWS.items():
        if parent is None:
            description = about if not levers else f"{view} + {' + '.join(levers)}"
        else:
            added = " + ".join(adds)
            why = f": {table.get(adds[0]).about}" if len(adds) == 1 else ""
            description = f"{view}{parent} + {added}{why}"
        recipe = Recipe(table.base, view, levers, parent=None if parent is None else f"{view}{parent}")
        out[f"{view}{suffix}"] = Method(
            f"{view}{suffix}",
            lambda grammar, levers=levers: table.build(levers, grammar=grammar),
            factory,
            description,
            family=_FAMILY[view],
            recipe=recipe,
        )
    return out


_BASELINES = "baselines (the paper's)"


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
            family=_BASELINES,
        ),
        "react": Method(
            "react", lambda g: build_react(domain, fmt=fmt, grammar=g), StateFlowView, "ReAct", family=_BASELINES
        ),
        "react_refined": Method(
            "react_refined",
            lambda g: build_react(domain, fmt=fmt, refined=True, grammar=g),
            StateFlowView,
            "ReAct with inspect-first examples",
            family=_BASELINES,
        ),
        "plan_solve": Method(
            "plan_solve",
            lambda g: build_plan_solve(domain, fmt=fmt, grammar=g),
            StateFlowView,
            "Plan & Solve",
            family=_BASELINES,
        ),
        "try_again": Method(
            "try_again",
            lambda g: build_try_again(domain, fmt=fmt, grammar=g),
            StateFlowView,
            "InterCode Try-Again",
            family=_BASELINES,
        ),
    }


_PREFIX_FIRST_BASELINES = "the paper's one-shot laid out for reuse (not the paper's)"


def prefix_first_baselines(
    domain: str, fmt: ObservationFormat, *, listing: Callable[[], Tool], question: Callable[[], Tool]
) -> dict[str, Method]:
    """The paper's one-shot with the shared context before the question: ``oneshot_prefix_first``.

    Each episode opens with the same sentence (:data:`~stateflow.tasks.kit.layout.CONTEXT_FIRST_OPENING`),
    then ``listing`` (SQL: the schema; Bash: the file system), then the question, so every task
    on one database or file system shares its prompt up to the question, and the embedded
    server's prompt cache serves that prefix (issue 49). It runs in the SF_Agent view, so its
    instruction sits in the system message before the listing (as ``oneshot_direct_prefix_first``).

    What changes for the model: the question comes after the listing, and where the one-shot
    listed nothing (Bash) it now reads one; so this is a new method, measured against the
    one-shot on the development sample (docs/results.md, "Throughput"), not a replacement.

    The other baselines (ReAct, ReAct_Refined, Try-Again, Plan & Solve) already hold their
    instructions and worked examples in the system message, before the question, and show no
    per-database context after it: they are laid out for reuse as they are. Opening them with a
    listing would give them information the paper's baselines lack, a change to measure before
    keeping; measuring it costs 3-4 hours of the embedded model for flows that solve 9-20 %, so
    those variants were dropped unmeasured (2026-11-28).

    Args:
        domain: the prompts folder.
        fmt: how observations are shown.
        listing: builds the context tool (SQL: ``describe_schema``; Bash: ``describe_filesystem``).
        question: builds the tool that states the question (``state_question``/``state_task``).
    """

    def build(grammar: bool) -> Flow:
        return build_oneshot(domain, fmt=fmt, setup=(listing(), question()), grammar=grammar)

    about = "One-shot laid out for reuse: instruction, listing, then the question (SF_Agent view)"
    method = Method("oneshot_prefix_first", build, SFAgentView, about, family=_PREFIX_FIRST_BASELINES)
    return {method.name: method}


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
                family="spec agents (the library's)",
            )
    return out


def resolve_method(benchmark: Benchmark, name: str) -> Method:
    """The method ``name`` of ``benchmark``, a recipe with levers added (``sf_agent_hint+values``),
    or a user's flow given as ``module:attribute``.

    Levers added to a recipe join its own and are applied in the benchmark's lever order, so
    ``sf_agent_prompt_vote+question_last`` builds exactly ``sf_agent_vote_question_last``'s flow
    (same fingerprint); ``LEVER=N`` sets a lever's amount (``error_budget=2``).

    A user's flow runs in the StateFlow view, as written (``--grammar`` does not rebuild it); its
    method name is the reference as given, so its records, resume and report work like a
    built-in method's. It is imported in the process that runs the episode: with Ray workers
    the module must be importable there too.

    Raises:
        ValueError: an unknown method name (the message lists the benchmark's methods).
        LeverError: (a ValueError) levers that are unknown, miss a need or conflict, all in one
            error; or levers added to a method that is not a recipe.
        stateflow.errors.ConfigError: a ``module:attribute`` that does not name a flow.
    """
    if RECIPE_SEPARATOR in name and name not in benchmark.methods:
        return _composed(benchmark, name)
    if name in benchmark.methods or not is_flow_ref(name):
        return benchmark.method(name)
    flow = load_flow(name)  # imported once, so an import error shows before the run starts
    return Method(name, lambda grammar: flow, StateFlowView, f"user flow {flow.name}")


def _composed(benchmark: Benchmark, name: str) -> Method:
    head, added, settings = split_recipe(name)
    table = benchmark.levers
    base = benchmark.method(head)
    if table is None or base.recipe is None:
        recipes = [m for m, method in benchmark.methods.items() if method.recipe is not None]
        where = f"levers go on a recipe: {', '.join(recipes)}" if recipes else f"{benchmark.name} has no levers"
        raise LeverError(name, [f"{head!r} is not a recipe ({where})"])
    levers = table.ordered([*base.recipe.levers, *added])
    table.check(levers, settings)  # every problem, before a run starts
    recipe = Recipe(table.base, base.recipe.view, levers, parent=head, settings=tuple(sorted(settings.items())))
    return Method(
        name,
        lambda grammar: table.build(levers, grammar=grammar, settings=settings),
        base.view,
        f"{head} + {' + '.join(added)}",
        family=base.family,
        recipe=recipe,
    )


def build_method(name: str, benchmark: Benchmark, *, grammar: bool = False) -> tuple[Flow, View]:
    """The flow and view of method ``name`` (or ``module:attribute``) on ``benchmark``.

    Raises:
        ValueError: unknown method or a method that does not apply to the benchmark.
        stateflow.errors.ConfigError: a ``module:attribute`` that does not name a flow.
    """
    method = resolve_method(benchmark, name)
    return method.build(grammar), method.view()

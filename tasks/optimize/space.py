"""The search space of ``stateflow optimize``: a TOML file, checked whole before any model call.

A space names a benchmark and the task pool searched (the ``dev`` sample by default), the base
methods and the levers combined on them (every compatible set of at most ``max_levers``), extra
recipes given whole, the model profiles and the states whose model is searched per state, the
strategy's settings and the budget. :func:`load_space` reads and validates the file with
pydantic; :func:`expand` turns it into the candidates (recipe x model assignment), collecting
every problem (an unknown lever, base, profile or state, a recipe that does not build, an empty
space) into one :class:`SpaceError` naming the file.

Example space (``docs/optimize.md`` explains every key)::

    name = "sql-small"
    benchmark = "intercode-sql"
    dataset = "spider"
    tasks = "dev"
    bases = ["sf_agent"]
    levers = ["schema", "values", "question_last"]
    max_levers = 2
    profiles = ["local-small", "local"]
    states = ["Solve"]

    [search]
    first_rung = 10
    eta = 2

    [budget]
    unit = "model_seconds"
    limit = 3600

Why incompatible lever sets are skipped and not refused: a space lists levers to *combine*, and
some pairs conflict by design (``schema`` and ``no_observe``); the plan reports how many sets it
skipped. A lever the benchmark does not have is a typo and is refused.
"""

from __future__ import annotations

import hashlib
import itertools
import tomllib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from stateflow.tasks.agents.methods import resolve_method
from stateflow.tasks.harness.identity import flow_fingerprint
from stateflow.tasks.kit.benchmark import Benchmark
from stateflow.tasks.kit.levers import RECIPE_SEPARATOR
from stateflow.tasks.optimize.rewrite import RewriteSettings, has_prompt

from stateflow import ModelAssignment
from stateflow.errors import ConfigError
from stateflow.profiles import DEFAULT_KEY, read_config_text

__all__ = [
    "BudgetSettings",
    "Candidate",
    "SearchPlan",
    "SearchSettings",
    "SearchSpace",
    "SpaceError",
    "expand",
    "load_space",
]

#: what one episode is assumed to cost before any has been measured (budget unit -> amount)
DEFAULT_PER_EPISODE = {"model_seconds": 5.0, "tokens": 2000.0}


class SpaceError(ConfigError):
    """A search space that cannot be searched; :attr:`problems` lists every reason.

    Attributes:
        where: the space file (or ``"the search space"`` when built in Python).
        problems: one line each.
    """

    def __init__(self, where: str, problems: list[str]) -> None:
        self.where, self.problems = where, tuple(problems)
        super().__init__(f"{where}: " + "; ".join(problems))


class SearchSettings(BaseModel):
    """``[search]``: successive halving with paired tests (see :mod:`stateflow.tasks.optimize.racing`).

    Attributes:
        first_rung: tasks every candidate runs before the first cut.
        eta: each rung multiplies the tasks by ``eta`` and keeps about ``1/eta`` of the candidates.
        alpha: the family-wise level of the paired (exact McNemar, Holm-corrected) drops.
        seed: orders the pool's tasks (a rung is a prefix of that order).
        order: the order each evaluation runs its rung's tasks in (the runner's ``--order``):
            ``method`` (the seed's order) or ``context`` (grouped by database or file system,
            so a flow whose prompts share a per-database prefix, SQL's ``prefix_first``, finds
            it in the embedded server's prompt cache and is costed as it would run).
    """

    model_config = ConfigDict(extra="forbid")

    first_rung: int = Field(10, ge=1)
    eta: int = Field(2, ge=2)
    alpha: float = Field(0.05, gt=0.0, lt=1.0)
    seed: str = "stateflow-optimize"
    # "task" is left out: an evaluation has one method, so it is the same as "method"
    order: Literal["method", "context"] = "method"


class BudgetSettings(BaseModel):
    """``[budget]``: what the search may spend.

    Attributes:
        unit: ``model_seconds`` (summed model-call latency) or ``tokens`` (prompt + completion).
        limit: the most the search spends (the held-out evaluation is not counted).
        per_episode: what one episode is assumed to cost until the search has measured some
            (default: 5 model-seconds or 2,000 tokens); it decides whether a candidate fits.
        share: also stop before spending more than this share of the exhaustive cost (every
            candidate on the whole pool, each at its cost per episode measured so far, the mean
            of all measured episodes for one not yet run); ``None``: only ``limit`` applies.
    """

    model_config = ConfigDict(extra="forbid")

    unit: Literal["model_seconds", "tokens"] = "model_seconds"
    limit: float = Field(gt=0.0)
    per_episode: float | None = Field(None, gt=0.0)
    # a share, not an amount: a loaded machine makes every model-second dearer, and this cap
    # scales with the measured costs where a fixed limit would stop the search early
    share: float | None = Field(None, gt=0.0, le=1.0)

    def estimate(self) -> float:
        """The assumed cost of one episode before any is measured."""
        return self.per_episode if self.per_episode is not None else DEFAULT_PER_EPISODE[self.unit]


class SearchSpace(BaseModel):
    """One search space (the TOML file's top level; unknown keys are refused)."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1, pattern=r"^[A-Za-z0-9_.-]+$")
    benchmark: str = "intercode-sql"
    dataset: str = "spider"
    tasks: str = "dev"
    heldout: str | None = "heldout"
    bases: list[str] = Field(default_factory=lambda: ["sf_agent"])
    levers: list[str] = Field(default_factory=list)
    max_levers: int = Field(2, ge=0)
    recipes: list[str] = Field(default_factory=list)
    profiles: list[str] = Field(default_factory=lambda: ["local"], min_length=1)
    states: list[str] = Field(default_factory=list)
    max_turns: int = Field(10, ge=1)
    search: SearchSettings = Field(default_factory=SearchSettings)
    budget: BudgetSettings
    rewrite: RewriteSettings | None = None


def load_space(path: Path) -> SearchSpace:
    """Read and validate a space file.

    Raises:
        SpaceError: unreadable TOML, unknown keys, values of the wrong type or range (each named).
    """
    try:
        data = tomllib.loads(read_config_text(path))
    except tomllib.TOMLDecodeError as err:
        raise SpaceError(str(path), [f"invalid TOML: {err}"]) from None
    try:
        return SearchSpace.model_validate(data)
    except ValidationError as err:
        raise SpaceError(
            str(path), [f"{'.'.join(map(str, e['loc'])) or 'space'}: {e['msg']}" for e in err.errors()]
        ) from None


@dataclass(frozen=True)
class Candidate:
    """One point of the space: a method (a recipe as ``--method`` takes it) and its models.

    Attributes:
        method: the method or recipe text (``sf_agent+schema+values``).
        models: ``(state, profile)`` pairs, ``default`` first, then states in name order; a
            state served by the default profile is not listed.
    """

    method: str
    models: tuple[tuple[str, str], ...]

    @property
    def models_label(self) -> str:
        """``default=local-small,Solve=local``: the label records carry."""
        return ",".join(f"{s}={p}" for s, p in self.models)

    @property
    def key(self) -> str:
        """A short stable name for the candidate's results directory."""
        return hashlib.sha256(f"{self.method}|{self.models_label}".encode()).hexdigest()[:12]

    @property
    def label(self) -> str:
        """``method | models``, for tables."""
        return f"{self.method} | {self.models_label}"

    def traits(self, levers: Sequence[str], states: Sequence[str]) -> frozenset[str]:
        """What the candidate is made of, one ``factor=level`` per factor, for pooled evidence.

        ``levers``: each is ``on`` or ``off`` (a lever of the recipe not listed is ``on``);
        ``states``: each state's profile (the default's where the state is not listed).

        >>> c = Candidate("sf_agent+values", (("default", "local-small"), ("Solve", "local")))
        >>> sorted(c.traits(["values", "vote"], ["Solve", "Plan"]))  # doctest: +NORMALIZE_WHITESPACE
        ['Plan=local-small', 'Solve=local', 'base=sf_agent', 'default=local-small', 'values=on',
         'vote=off']
        """
        base, *used = self.method.split(RECIPE_SEPARATOR)
        models = dict(self.models)
        default = models.get(DEFAULT_KEY, "")
        out = {f"base={base}", f"{DEFAULT_KEY}={default}"}
        out |= {f"{lever}={'on' if lever in used else 'off'}" for lever in {*levers, *used}}
        out |= {f"{state}={models.get(state, default)}" for state in states}
        return frozenset(out)

    def assignment(self, base: ModelAssignment) -> ModelAssignment:
        """The candidate's models, with the profiles ``base`` knows (built-ins and a config's)."""
        return ModelAssignment.of(dict(self.models), profiles=base.profiles.values())


@dataclass(frozen=True)
class SearchPlan:
    """The candidates of a space, and what expanding it left out.

    Attributes:
        candidates: in a stable order (methods as listed, then assignments).
        skipped_sets: lever sets left out because their levers do not fit together.
        duplicates: recipes left out because an earlier one builds the same flow in the same view.
    """

    candidates: tuple[Candidate, ...]
    skipped_sets: int = 0
    duplicates: int = 0


def _assignments(profiles: list[str], states: list[str]) -> list[tuple[tuple[str, str], ...]]:
    """Every way of serving the default and each searched state from ``profiles`` (canonical)."""
    out: dict[tuple[tuple[str, str], ...], None] = {}
    for default, *per_state in itertools.product(profiles, *([profiles] * len(states))):
        extra = sorted((s, p) for s, p in zip(states, per_state, strict=True) if p != default)
        out[((DEFAULT_KEY, default), *extra)] = None
    return list(out)


def expand(space: SearchSpace, benchmark: Benchmark, models: ModelAssignment, where: str = "") -> SearchPlan:
    """The candidates of ``space`` on ``benchmark``; ``models`` knows the usable profiles.

    Raises:
        SpaceError: every problem at once: an unknown base, lever, profile or state, a recipe that
            does not build, levers on a base that is not a recipe, or no candidate at all.
    """
    where = where or "the search space"
    problems: list[str] = []
    if benchmark.name != space.benchmark:
        problems.append(f"benchmark {space.benchmark!r} is not {benchmark.name!r}")
    table = benchmark.levers
    known = table.names() if table is not None else ()
    for lever in space.levers:
        if lever not in known:
            problems.append(
                f"unknown lever {lever!r} ("
                + (f"levers of {benchmark.name}: {', '.join(known)})" if known else f"{benchmark.name} has no levers)")
            )
    for name in [*space.profiles, *([space.rewrite.profile] if space.rewrite else [])]:
        try:
            ModelAssignment.of(name, profiles=models.profiles.values())
        except ConfigError as err:
            problems.append(str(err))
    methods: list[str] = []
    skipped = 0
    for base in space.bases:
        if base not in benchmark.methods:
            problems.append(f"unknown base {base!r} (methods of {benchmark.name}: {', '.join(benchmark.methods)})")
            continue
        if space.levers and benchmark.methods[base].recipe is None:
            recipes = [m for m, x in benchmark.methods.items() if x.recipe is not None]
            problems.append(f"base {base!r} is not a recipe, levers cannot go on it (recipes: {', '.join(recipes)})")
            continue
        for k in range(min(space.max_levers, len(space.levers)) + 1):
            for combo in itertools.combinations(space.levers, k):
                if any(lv not in known for lv in combo):
                    continue
                base_levers = benchmark.methods[base].recipe.levers if combo else ()  # type: ignore[union-attr]
                if combo and table is not None and table.problems([*base_levers, *combo]):
                    skipped += 1
                    continue
                methods.append(RECIPE_SEPARATOR.join([base, *combo]))
    methods += space.recipes
    flows: dict[str, list[str]] = {}
    prompted: set[str] = set()  # states with a Prompt in some candidate flow
    seen: dict[tuple[str, str], str] = {}
    duplicates = 0
    for method in dict.fromkeys(methods):
        try:
            m = resolve_method(benchmark, method)
            flow = m.build(False)
        except (ValueError, ConfigError) as err:
            problems.append(f"recipe {method!r}: {err}")
            continue
        identity = (flow_fingerprint(flow), type(m.view()).__name__)
        if identity in seen:
            duplicates += 1
            continue
        seen[identity] = method
        flows[method] = list(flow.states)
        prompted |= {s for s in flow.states if has_prompt(flow, s)}
    every_state = sorted({s for states in flows.values() for s in states})
    for state in space.states:
        if flows and state not in every_state:
            problems.append(f"unknown state {state!r} (states of the candidate flows: {', '.join(every_state)})")
    if space.rewrite is not None and flows and space.rewrite.state not in prompted:
        problems.append(
            f"rewrite.state {space.rewrite.state!r} is no state with an instruction in the candidate flows "
            f"({', '.join(sorted(prompted))})"
        )
    if not problems and not flows:
        problems.append("the space has no candidate (give bases, levers or recipes)")
    if problems:
        raise SpaceError(where, problems)
    candidates: dict[Candidate, None] = {}
    for method, states in flows.items():
        for assignment in _assignments(space.profiles, space.states):
            # a state this flow lacks is dropped: the runner refuses a key naming no state
            mine = tuple((s, p) for s, p in assignment if s == DEFAULT_KEY or s in states)
            candidates[Candidate(method, mine)] = None
    return SearchPlan(tuple(candidates), skipped, duplicates)

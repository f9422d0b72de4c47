"""What a benchmark is to the runner: one typed record per benchmark.

A :class:`Benchmark` gathers everything the runner, the episode and the CLI used to decide by
comparing a domain string: how to open the environment, how a task is put to the agent, how
observations are shown, which methods (flows and baselines) apply, where the prompts are, the
default backend and how a ``--dataset`` value is resolved. Adding a benchmark is an environment
package plus one such record (see :mod:`stateflow.tasks.sql.benchmark` and its siblings for the built-in ones and
:mod:`stateflow.tasks.harness.registry` for how they are found).

Example:
    >>> from stateflow.tasks.sql.benchmark import INTERCODE_SQL
    >>> INTERCODE_SQL.name, INTERCODE_SQL.domain, INTERCODE_SQL.default_backend
    ('intercode-sql', 'sql', 'embedded')
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from stateflow.envs.base import Environment, Task
from stateflow.tasks.kit.levers import LeverTable, Recipe
from stateflow.tasks.kit.spec_prompts import SpecDomain
from stateflow.tasks.kit.tools import ObservationFormat

from stateflow import Flow, View

__all__ = ["Benchmark", "DatasetRequest", "EnvOptions", "Method"]


@dataclass(frozen=True)
class Method:
    """A named way of solving a benchmark's tasks: its flow (built per grammar setting) and view.

    Attributes:
        name: the ``--method`` name.
        build: ``grammar -> Flow``; ``grammar`` asks for a constrained response format.
        view: the execution view (StateFlow or SF_Agent) as a zero-argument factory.
        description: one line for ``--list-methods``.
        family: the group ``--list-methods`` shows it under (``SF_Agent view``, ``baselines``...).
        recipe: the base flow, view and levers it is made of (``None``: not a recipe, e.g. a
            baseline); ``stateflow run --explain`` prints it.
    """

    name: str
    build: Callable[[bool], Flow]
    view: Callable[[], View]
    description: str = ""
    family: str = ""
    recipe: Recipe | None = None


@dataclass(frozen=True)
class EnvOptions:
    """What the runner knows when it opens an environment (each worker opens its own).

    Attributes:
        dataset: the resolved dataset name (``demo``, ``spider``, a file, a pdoctor label...).
        backend: the environment backend, the benchmark's default already filled in.
        dsn: an external server (SQL ``--backend dsn``).
        data_dir: a directory with the benchmark's data files.
        database_scope: SQL only: which databases an agent may ``USE`` (``benchmark`` or ``task``).
    """

    dataset: str
    backend: str
    dsn: str | None = None
    data_dir: str | None = None
    database_scope: str = "benchmark"


@dataclass(frozen=True)
class DatasetRequest:
    """The ``stateflow run`` options a benchmark may turn into its dataset name.

    Most benchmarks take ``name`` as it is; a synthesized benchmark (pdoctor) builds its dataset
    from the synthesis options, and the label it returns identifies the requests.
    """

    name: str = "demo"
    actions: str = "3:8"
    sentences: str = "2:6"
    n: int = 50
    seed: int = 0
    tries: int = 10
    extended: bool = False
    oracle: bool = False


def _dataset_as_named(request: DatasetRequest) -> str:
    return request.name


@dataclass(frozen=True)
class Benchmark:
    """One benchmark: an environment, how tasks are put to the agent, and the methods that apply.

    Attributes:
        name: the CLI and record name (``intercode-sql``); unique in a registry.
        domain: the short name used in flow names and the prompts folder (``sql``).
        open_env: opens one environment for the given options.
        task_prompt: the first message of an episode for a task.
        observation: how observations are shown to the agent by the shared tools and baselines.
        methods: the ``--method`` names that apply, in listing order.
        prompts_dir: the folder whose ``*.md`` files the methods read (part of the episode identity).
        default_backend: the backend used when ``--backend`` is not given.
        backends: every backend ``open_env`` accepts.
        flows: named flows for ``stateflow graph``/``validate`` (name -> zero-argument builder).
        resolve_dataset: turns the run's dataset options into the dataset name.
        database_scope: whether ``--sql-database-scope`` applies (and is part of the identity).
        spec_domain: what the library spec agents need to know (``None``: they do not apply).
        description: one line for listings.
        levers: the levers its recipe methods are made of; with them a ``--method`` may add
            levers to a recipe (``sf_agent_hint+values``); ``None``: no levers.
    """

    name: str
    domain: str
    open_env: Callable[[EnvOptions], Environment]
    task_prompt: Callable[[Task], str]
    observation: ObservationFormat
    methods: Mapping[str, Method]
    prompts_dir: Path
    default_backend: str
    backends: tuple[str, ...] = ()
    flows: Mapping[str, Callable[[], Flow]] = field(default_factory=dict)
    resolve_dataset: Callable[[DatasetRequest], str] = _dataset_as_named
    database_scope: bool = False
    spec_domain: SpecDomain | None = None
    description: str = ""
    levers: LeverTable | None = None

    def method(self, name: str) -> Method:
        """The method called ``name``.

        Raises:
            ValueError: no such method for this benchmark; the message lists the valid ones.
        """
        try:
            return self.methods[name]
        except KeyError:
            raise ValueError(
                f"unknown method {name!r} for {self.name}; choose from: {', '.join(self.methods)} "
                "(or give a flow as module:attribute)"
            ) from None

    def backend_or_default(self, backend: str | None) -> str:
        """``backend`` checked against :attr:`backends`, or the default when it is ``None``.

        Raises:
            ValueError: a backend this benchmark does not have.
        """
        if backend is None:
            return self.default_backend
        if self.backends and backend not in self.backends:
            raise ValueError(f"{self.name} has no backend {backend!r}; choose from: {', '.join(self.backends)}")
        return backend

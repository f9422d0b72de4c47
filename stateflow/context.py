"""The run context: what tools and transition conditions see while a flow runs."""

from __future__ import annotations

from collections.abc import Callable, Mapping, MutableMapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from stateflow.blackboard import Blackboard
from stateflow.messages import History

if TYPE_CHECKING:
    from stateflow.backends.http import HttpClients
    from stateflow.backends.scripted import ScriptedLLM
    from stateflow.conditions import Judge
    from stateflow.profiles import ModelAssignment

__all__ = ["Context"]


@dataclass
class Context:
    """What tools and transition conditions see during a run.

    Attributes:
        task: the task text the run started with.
        history: the context history so far.
        state: name of the current state.
        env: the run's environment or resource object (whatever the caller passed to ``run``).
        vars: the user's per-run variables (``run(..., vars=...)``, returned as ``RunResult.vars``);
            never shared between runs.
        board: typed records the flow's own tools and conditions keep during the run (turn
            counters, an episode's reward, cached decisions), one per record class; see
            :mod:`stateflow.blackboard`. Returned as ``RunResult.board``.
        ask: set by the runtime: answers an LLM judge about the current history.
        models: set by the runtime: the run's model assignment, for tools that call a model
            themselves (e.g. a summariser); they report that usage in ``ToolResult.usage``.
        scripts: set by the runtime: the run's scripted replies (test doubles) by profile name.
        http: set by the runtime: the run's shared HTTP connection pools (``run(..., http=...)``),
            for tools that call a model themselves through
            :func:`~stateflow.backends.endpoint.open_endpoint`; ``None`` when the run has none.
    """

    task: str
    history: History
    state: str = ""
    env: Any = None
    vars: MutableMapping[str, Any] = field(default_factory=dict)
    board: Blackboard = field(default_factory=Blackboard)
    ask: Callable[[Judge], str | None] | None = None
    models: ModelAssignment | None = None
    scripts: Mapping[str, ScriptedLLM] = field(default_factory=dict)
    http: HttpClients | None = None

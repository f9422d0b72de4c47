"""The exception hierarchy: one root, subclasses that keep their context as attributes."""

from __future__ import annotations

from typing import Any

__all__ = [
    "ConfigError",
    "FlowDefinitionError",
    "LLMError",
    "NoTransitionError",
    "RunTimeout",
    "StateFlowError",
    "StepLimitExceeded",
]


class StateFlowError(Exception):
    """Root of every error StateFlow raises on purpose."""


class ConfigError(StateFlowError):
    """A profile, assignment or config file is invalid; the message names where and why."""


class FlowDefinitionError(StateFlowError):
    """A flow is malformed (unknown state, no exit, unreachable final state, ...).

    Attributes:
        flow: name of the flow being built.
        problems: every problem found (all are reported at once, not just the first).
    """

    def __init__(self, flow: str, problems: list[str]):
        self.flow = flow
        self.problems = list(problems)
        lines = "\n".join(f"  - {p}" for p in self.problems)
        super().__init__(f"flow {flow!r} is invalid:\n{lines}")


class NoTransitionError(StateFlowError):
    """No transition rule held after a state finished: the run cannot continue.

    Attributes:
        state: the state that finished.
        rules: descriptions of the rules tried, in order.
        last_message: content of the last message in the history.
    """

    def __init__(self, state: str, rules: list[str], last_message: Any):
        self.state = state
        self.rules = list(rules)
        self.last_message = last_message
        tried = "; ".join(self.rules) or "no rules leave this state"
        super().__init__(
            f"no transition from state {state!r} matched (tried: {tried}); "
            f"last message: {str(last_message)[:200]!r}. Add a fallback rule without a condition."
        )


class StepLimitExceeded(StateFlowError):
    """Raised only when a flow asks for it; by default hitting the bound ends the run normally."""


class RunTimeout(StateFlowError):
    """A run exceeded its wall-clock budget (checked before each output function)."""


class LLMError(StateFlowError):
    """A model call failed after retries (timeout, HTTP error, malformed response).

    Attributes:
        profile: the profile name that failed.
        state: the state whose output function made the call.
    """

    def __init__(self, message: str, *, profile: str | None = None, state: str | None = None):
        self.profile = profile
        self.state = state
        super().__init__(message)

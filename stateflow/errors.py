"""The exception hierarchy: one root, subclasses that keep their context as attributes."""

from __future__ import annotations

from typing import Any

__all__ = [
    "ChatEndedError",
    "ConfigError",
    "FlowDefinitionError",
    "LLMError",
    "NoTransitionError",
    "RunTimeout",
    "StateFlowError",
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


class ChatEndedError(StateFlowError):
    """AutoGen ended the group chat although the flow had not ended (no final state reached,
    transition bound not hit, no error raised): the run cannot say why it stopped, so it fails.

    Attributes:
        reason: the termination reason AutoGen gave (e.g. ``"Maximum rounds (12) reached"``),
            ``None`` if it gave none.
        state: the state the flow was in.
        agent: the agent that spoke last.
        output: the label of the output function being served (``llm``, ``tool[x]``...).
        transitions: how many transitions the run had taken.
    """

    def __init__(self, *, reason: str | None, state: str, agent: str | None, output: str | None, transitions: int):
        self.reason = reason
        self.state = state
        self.agent = agent
        self.output = output
        self.transitions = transitions
        super().__init__(
            f"AutoGen ended the chat in state {state!r} after {transitions} transitions "
            f"({reason or 'no termination reason given'}); last speaker: {agent!r}, serving output "
            f"{output!r}. The flow neither reached a final state nor its transition bound: check the "
            "view's output functions and any AutoGen agent that can end a chat"
        )


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

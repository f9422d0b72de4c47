"""Views: which AutoGen agent serves each output function of a flow, and what it is told.

One flow definition runs in either view: :class:`StateFlowView` (the paper's StateFlow: one
agent, each state's instruction appended to the shared history) here, or
``stateflow.sf_agent.SFAgentView`` (one agent per state with a private instruction). A view only
decides; the episode (:mod:`stateflow.episode`) builds the agents and runs the chat.
"""

from __future__ import annotations

from typing import Final

from stateflow.flow import Flow, State
from stateflow.outputs import OutputFunction

__all__ = ["ASSISTANT", "EXECUTOR", "HUMAN", "PROMPTER", "RESERVED_NAMES", "TOOLS", "USER", "StateFlowView", "View"]

#: Names of the built-in agents of every run's group chat.
USER: Final = "user"
PROMPTER: Final = "instructions"
EXECUTOR: Final = "environment"
ASSISTANT: Final = "assistant"
HUMAN: Final = "human"
TOOLS: Final = "tools"
#: Names no state or user agent may take (they would clash with a built-in agent).
RESERVED_NAMES: Final = frozenset({USER, PROMPTER, EXECUTOR, ASSISTANT, HUMAN, TOOLS, "chat_manager"})


class View:
    """Decides which agent serves each output function and what it is told."""

    name = "stateflow"

    def emitted_outputs(self, state: State) -> tuple[OutputFunction, ...]:
        """The output functions that produce history messages in this view."""
        return state.outputs

    def llm_agent_name(self, state: State) -> str:
        """Name of the agent serving ``state``'s LLM calls."""
        return ASSISTANT

    def system_message(self, flow: Flow, state: State | None) -> str:
        """System message of the agent serving ``state`` (``None``: the shared agent)."""
        return flow.system_message

    #: Send the agent's system message after the conversation instead of before it.
    system_last: bool = False


class StateFlowView(View):
    """The paper's StateFlow: one agent; each state's instruction is appended to the history."""

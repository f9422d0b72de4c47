"""Specs shared by the spec tests."""

from __future__ import annotations

from stateflow.spec import AgentSpec


def react_tools(loop: str = "until") -> AgentSpec:
    """A ReAct spec whose Action is constrained to two tool names; ``loop`` may be ``until_N``."""
    return AgentSpec.from_text(
        f"""
        (define react-tools
          (:states
            (Question "Question:" :env-input)
            (Thought "Thought:")
            (Action "Action:" (:output-constrs "search" "finish"))
            (Action-Input "Action Input:")
            (Observation "Observation:" :env-input)
            (Final-Thought "Final Thought:")
            (Answer "Answer:"))
          (:behavior (next Question ({loop} (next Thought Action Action-Input Observation) Final-Thought) Answer)))
        """
    )

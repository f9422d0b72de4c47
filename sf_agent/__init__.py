"""SF_Agent view of StateFlow flows: a separate AutoGen agent, private instruction and model per state."""

from stateflow.sf_agent.view import SFAgentView

__all__ = ["SFAgentView"]

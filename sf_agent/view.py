"""SF_Agent: the same flow, one AutoGen agent per state.

Each state that calls an LLM is served by its own agent whose system message is the flow's
system message followed by that state's instruction (its ``Prompt`` texts). Instructions are
never appended to the shared history, so no other agent sees them; each agent may use its own
model (the run's assignment maps state names to profiles).
"""

from __future__ import annotations

from stateflow.flow import Flow, State
from stateflow.outputs import OutputFunction, Prompt
from stateflow.runtime import View

__all__ = ["SFAgentView"]


class SFAgentView(View):
    """One agent per state; instructions are private system messages."""

    name = "sf_agent"

    def emitted_outputs(self, state: State) -> tuple[OutputFunction, ...]:
        return tuple(o for o in state.outputs if not isinstance(o, Prompt))

    def llm_agent_name(self, state: State) -> str:
        return state.name

    def system_message(self, flow: Flow, state: State | None) -> str:
        parts = [flow.system_message, state.instruction if state is not None else ""]
        return "\n\n".join(p for p in parts if p)

"""Streamed events are the same in both views (StateFlow's one agent, SF_Agent's agent per state)."""

from __future__ import annotations

from stateflow.sf_agent import SFAgentView

from stateflow import LLM, Flow, ModelProfile, Prompt, State, Tool, ToolResult, Transition
from stateflow.events import TokenDelta
from stateflow.live import stream
from stateflow.testing.fake_openai import FakeOpenAIServer


def _act(ctx) -> ToolResult:
    return ToolResult("acted", {"ok": True})


def test_both_views_emit_the_same_events():
    plan = State("Plan", Prompt("Plan."), LLM())
    act = State("Act", Prompt("Act."), LLM(), Tool(_act, "act"))
    done = State("Done", final=True)
    flow = Flow("views", initial=plan, transitions=[Transition(plan, act), Transition(act, done)])
    with FakeOpenAIServer(lambda m, msgs, b: "fine, done here") as srv:
        profile = ModelProfile(name="p", model="m", base_url=srv.url, api_key_env=None)
        one = list(stream(flow, "t", models=profile))
        per_state = list(stream(flow, "t", models=profile, view=SFAgentView()))

    # SF_Agent keeps state instructions in each agent's system message (no prompt steps), so
    # compare everything but the plain step records
    def shape(events):
        return [e.type for e in events if e.type != "step"]

    assert shape(one) == shape(per_state)
    assert "tool_called" in shape(one) and "transition_taken" in shape(one)
    assert one[-1].result.view == "stateflow" and per_state[-1].result.view == "sf_agent"
    for events in (one, per_state):
        tokens = [e for e in events if isinstance(e, TokenDelta)]
        assert {t.state for t in tokens} == {"Plan", "Act"}
        assert "".join(t.text for t in tokens if t.state == "Act") == "fine, done here"
    # SF_Agent's replies come from one agent per state, StateFlow's from its one assistant
    assert {t.agent for t in per_state if isinstance(t, TokenDelta)} == {"Plan", "Act"}
    assert len({t.agent for t in one if isinstance(t, TokenDelta)}) == 1

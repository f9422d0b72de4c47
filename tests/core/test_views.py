"""What each agent's LLM receives, in both views, and the shape of a run's trace."""

from __future__ import annotations

from stateflow.sf_agent import SFAgentView

from stateflow import LLM, Flow, ModelAssignment, ModelProfile, Prompt, State, Transition, run
from stateflow.backends.scripted import ScriptedLLM
from tests.core.helpers import plan_act_flow, scripted


def _roles(request):
    return [(m["role"], m.get("name"), m["content"]) for m in request.messages]


def test_stateflow_view_accumulates_instructions_in_the_shared_history():
    llm = ScriptedLLM(["plan A", "act 1", "act 2", "act 3"])
    r = run(plan_act_flow(), "TASK", models=scripted(), scripts={"fake": llm})
    assert r.stop_reason == "final" and r.exit_state == "End"
    assert r.path == ["Plan", "Act", "Act", "Act", "End"]
    # Third call (Act, 2nd visit): everything so far, instructions included, no system message.
    assert _roles(llm.requests[2]) == [
        ("user", "user", "TASK"),
        ("user", "instructions", "PLAN-INSTRUCTION"),
        ("assistant", "assistant", "plan A"),
        ("user", "instructions", "ACT-INSTRUCTION"),
        ("assistant", "assistant", "act 1"),
        ("user", "environment", "count=1"),
        ("user", "instructions", "ACT-INSTRUCTION"),
    ]
    kinds = [m.kind.value for m in r.history]
    assert kinds == [
        "prompt",
        "prompt",
        "llm",
        "prompt",
        "llm",
        "tool",
        "prompt",
        "llm",
        "tool",
        "prompt",
        "llm",
        "tool",
    ]


def test_sf_agent_view_keeps_instructions_private():
    llm = ScriptedLLM(["plan A", "act 1", "act 2", "act 3"])
    r = run(plan_act_flow(), "TASK", models=scripted(), scripts={"fake": llm}, view=SFAgentView())
    assert r.view == "sf_agent" and r.stop_reason == "final"
    plan_req, act_req = llm.requests[0], llm.requests[2]
    assert _roles(plan_req) == [("system", None, "PLAN-INSTRUCTION"), ("user", "user", "TASK")]
    assert _roles(act_req) == [
        ("system", None, "ACT-INSTRUCTION"),
        ("user", "user", "TASK"),
        ("user", "Plan", "plan A"),  # another agent's reply: visible, its instruction is not
        ("assistant", "Act", "act 1"),
        ("user", "environment", "count=1"),
    ]
    for req in llm.requests:
        contents = [m["content"] for m in req.messages if m["role"] != "system"]
        assert "PLAN-INSTRUCTION" not in contents and "ACT-INSTRUCTION" not in contents
    assert all(m.kind.value != "prompt" or m.name == "user" for m in r.history)


def test_flow_system_message_is_shared_and_prefixes_private_instructions():
    ask = State("Ask", Prompt("ASK"), LLM())
    end = State("End", final=True)
    f = Flow("s", initial=ask, transitions=[Transition(ask, end)], system_message="SYS")
    llm = ScriptedLLM(["x", "y"])
    run(f, "T", models=scripted(), scripts={"fake": llm})
    run(f, "T", models=scripted(), scripts={"fake": llm}, view=SFAgentView())
    assert llm.requests[0].messages[0] == {"content": "SYS", "role": "system"}
    assert llm.requests[1].messages[0] == {"content": "SYS\n\nASK", "role": "system"}


def test_per_state_models_and_usage_by_state_and_model():
    big, small = scripted("big", price_per_1k=(1.0, 2.0)), scripted("small")
    big_llm, small_llm = ScriptedLLM(["plan A"]), ScriptedLLM(["act 1", "act 2", "act 3"], cycle=False)
    r = run(
        plan_act_flow(),
        "TASK",
        models={"default": small, "Plan": big},
        scripts={"big": big_llm, "small": small_llm},
    )
    assert len(big_llm.requests) == 1 and len(small_llm.requests) == 3
    by_model = r.usage_by_model()
    assert set(by_model) == {"big", "small"}
    assert by_model["big"].calls == 1 and by_model["small"].calls == 3
    by_state = r.usage_by_state()
    assert by_state["Plan"].prompt_tokens == 2  # "TASK" + "PLAN-INSTRUCTION": 2 words
    assert by_state["Plan"].cost == (2 * 1.0 + 2 * 2.0) / 1000  # "plan A" = 2 completion words
    assert by_state["Act"].calls == 3 and by_state["Act"].cost == 0.0
    # The trace has one step per output-function call, in order.
    assert [s.output for s in r.steps[:3]] == ["prompt", "llm", "prompt"]
    assert all(s.usage is not None for s in r.steps if s.output == "llm")


def test_stateflow_view_uses_one_agent_even_with_two_models():
    big, small = scripted("big"), scripted("small")
    big_llm, small_llm = ScriptedLLM(["plan A"]), ScriptedLLM(["act 1", "act 2", "act 3"])
    r = run(plan_act_flow(), "T", models={"default": small, "Plan": big}, scripts={"big": big_llm, "small": small_llm})
    assert {m.name for m in r.history if m.kind.value == "llm"} == {"assistant"}
    # The small model sees the big model's reply as its own (assistant role): one agent.
    assert ("assistant", "assistant", "plan A") in _roles(small_llm.requests[0])


def test_profile_given_on_the_llm_output_overrides_the_assignment():
    ask = State("Ask", Prompt("ASK"), LLM(profile="pinned"))
    end = State("End", final=True)
    f = Flow("p", initial=ask, transitions=[Transition(ask, end)])
    pinned, other = ScriptedLLM(["from pinned"]), ScriptedLLM(["from other"])
    r = run(
        f,
        "T",
        models=ModelAssignment.of(scripted("other"), profiles=[scripted("pinned")]),
        scripts={"pinned": pinned, "other": other},
    )
    assert r.history[-1].content == "from pinned" and not other.requests


def test_result_serialises_to_json():
    import json

    r = run(plan_act_flow(), "T", models=scripted(), scripts={"fake": ScriptedLLM(["a", "b", "c", "d"])})
    data = json.loads(json.dumps(r.to_dict()))
    assert data["path"] == ["Plan", "Act", "Act", "Act", "End"]
    assert data["usage_by_state"]["Act"]["calls"] == 3
    assert data["history"][-1]["meta"] == {"ok": True, "done": True}


def test_unknown_profile_is_a_config_error_before_any_call():
    import pytest

    from stateflow import ConfigError

    with pytest.raises(ConfigError, match="unknown profile 'nope'"):
        run(plan_act_flow(), "T", models={"default": "nope"})
    with pytest.raises(ConfigError, match="no script was given"):
        run(plan_act_flow(), "T", models=ModelProfile(name="s", model="s", provider="scripted"))


def test_sf_agent_can_send_the_private_instruction_after_the_conversation():
    llm = ScriptedLLM(["plan A", "act 1", "act 2", "act 3"])
    run(plan_act_flow(), "TASK", models=scripted(), scripts={"fake": llm}, view=SFAgentView("last"))
    assert _roles(llm.requests[2]) == [
        ("user", "user", "TASK"),
        ("user", "Plan", "plan A"),
        ("assistant", "Act", "act 1"),
        ("user", "environment", "count=1"),
        ("system", None, "ACT-INSTRUCTION"),
    ]
    import pytest

    with pytest.raises(ValueError, match="instruction_position"):
        SFAgentView("middle")

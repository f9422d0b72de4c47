"""Edge cases of the interop output functions: bounds, name clashes, hostile tool-call text."""

from __future__ import annotations

import pytest
from autogen import AssistantAgent, ConversableAgent
from hypothesis import given
from hypothesis import strategies as st
from stateflow.sf_agent import SFAgentView

from stateflow import (
    LLM,
    AutoGenAgent,
    ConfigError,
    Flow,
    Kind,
    ModelProfile,
    State,
    StateFlowError,
    Transition,
    run,
)
from stateflow.testing.fake_openai import FakeOpenAIServer
from stateflow.tool_protocol import ToolSet, parse_text_action


def ping(host: str) -> str:
    """Ping a host."""
    return f"{host} is up"


def _one_state(*outputs) -> Flow:
    a = State("Work", *outputs)
    done = State("Done", final=True)
    return Flow("one", initial=a, transitions=[Transition(a, done)])


def _profile(url: str, native: bool = True) -> ModelProfile:
    return ModelProfile(name="p", model="m", base_url=url, api_key_env=None, function_calling=native)


def test_a_model_that_never_stops_calling_tools_is_bounded():
    forever = {"tool_calls": [{"name": "ping", "arguments": {"host": "a"}}]}
    with FakeOpenAIServer(lambda m, msgs, b: forever) as srv:
        with pytest.raises(StateFlowError, match=r"still requested tools after 2 rounds") as exc:
            run(_one_state(LLM(tools=(ping,), max_tool_rounds=2)), "T", models=_profile(srv.url))
        assert len(srv.requests) == 3
    partial = exc.value.result  # nothing recorded is lost
    assert [m.content for m in partial.history.of_kind(Kind.TOOL)] == ["a is up", "a is up"]


def test_unknown_tool_name_from_the_model_is_an_error_observation():
    replies = iter([{"tool_calls": [{"name": "rm_rf", "arguments": {}}]}, "sorry"])
    with FakeOpenAIServer(lambda m, msgs, b: next(replies)) as srv:
        r = run(_one_state(LLM(tools=(ping,))), "T", models=_profile(srv.url))
        assert srv.requests[1]["messages"][-1]["content"] == "Error: Function rm_rf not found."
    tool = r.history.of_kind(Kind.TOOL)[0]
    assert tool.meta["ok"] is False and tool.name == "rm_rf"


def test_name_clashes_are_rejected_before_the_run():
    def other_ping(host: str) -> str:
        """Another."""
        return host

    other_ping.__name__ = "ping"
    flow = Flow(
        "two",
        initial=(a := State("A", LLM(tools=(ping,)))),
        transitions=[Transition(a, b := State("B", LLM(tools=(other_ping,)))), Transition(b, State("C", final=True))],
    )
    with pytest.raises(ConfigError, match="two different LLM tools are named 'ping'"):
        run(flow, "T", models=_profile("http://127.0.0.1:9/v1"))
    clash = ConversableAgent("environment", llm_config=False)
    with pytest.raises(ConfigError, match="agent name 'environment' clashes"):
        run(_one_state(AutoGenAgent(clash)), "T", models=_profile("http://127.0.0.1:9/v1"))
    with pytest.raises(TypeError, match="neither a callable"):
        LLM(tools=("ping",))


def test_user_agent_serves_a_state_in_the_sf_agent_view_with_its_own_system_message():
    with FakeOpenAIServer(lambda m, msgs, b: "done: " + msgs[0]["content"]) as srv:
        config = {"config_list": [{"model": "m", "base_url": srv.url, "api_key": "x", "price": [1.0, 1.0]}]}
        agent = AssistantAgent("solver", system_message="SOLVER-SYSTEM", llm_config=config)
        r = run(_one_state(AutoGenAgent(agent)), "T", view=SFAgentView(), models=_profile(srv.url))
        sent = srv.requests[0]["messages"]
    assert sent[0] == {"role": "system", "content": "SOLVER-SYSTEM"}
    assert sent[-1]["content"] == "T"
    msg = r.history.last(Kind.LLM)
    assert msg.content == "done: SOLVER-SYSTEM" and msg.name == "solver"
    assert msg.usage.cost == pytest.approx((msg.usage.prompt_tokens + msg.usage.completion_tokens) / 1000)
    assert agent.chat_messages == {}  # the user's agent was asked, not enrolled in the run's chat


@given(st.text(max_size=300))
def test_text_protocol_parser_never_raises(reply):
    action = parse_text_action(reply, ToolSet([ping]))
    assert action is None or action.name == "ping"


def test_text_protocol_leaves_the_flows_own_actions_alone():
    tools = ToolSet([ping])
    assert parse_text_action("Thought: x\nAction: execute[SELECT 1]", tools) is None
    action = parse_text_action('Action: ping[example.org]\nAction: ping[{"host": "b"}]', tools)
    assert action is not None and action.arguments == '{"host": "b"}'  # the last Action line counts


def test_a_user_agent_asking_for_human_input_reads_the_runs_input():
    from stateflow.testing.human import ScriptedHuman

    person = ConversableAgent("person", llm_config=False, human_input_mode="ALWAYS")
    answers = ScriptedHuman(["ship it"])
    r = run(_one_state(AutoGenAgent(person)), "Ready?", human_input=answers, models=_profile("http://127.0.0.1:9/v1"))
    assert r.history.last(Kind.LLM).content == "ship it" and len(answers.prompts) == 1


def test_autogen_tool_objects_keep_their_name_and_description():
    from autogen.tools import Tool

    tools = ToolSet([Tool(func_or_tool=ping, name="check_host", description="Is the host up?")])
    schema = tools.schemas()[0]["function"]
    assert schema["name"] == "check_host" and schema["description"] == "Is the host up?"
    assert tools.functions()["check_host"]("x") == "x is up"

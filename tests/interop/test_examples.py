"""The examples in examples/ run end to end against a fake OpenAI-compatible server over HTTP."""

from __future__ import annotations

import json

import pytest

from stateflow import Kind
from stateflow.testing.fake_openai import FakeOpenAIServer
from stateflow.testing.human import HumanInputExhausted, ScriptedHuman
from tests.interop.conftest import load_example


def _system(messages):
    return next((m["content"] for m in messages if m["role"] == "system"), "")


def _blurb_server(model, messages, body):
    if "product blurbs" in _system(messages):  # the writer agent's own system message
        if not any(m["role"] == "tool" for m in messages):
            return {"tool_calls": [{"name": "word_count", "arguments": {"text": "A kettle boiled by sunshine."}}]}
        return "A kettle boiled by sunshine."
    if "You review blurbs" in _system(messages):  # the critic, inside the editor's nested chat
        return "APPROVED: short and clear."
    return "unexpected request"


def test_own_autogen_agents_with_tools_and_nested_chat(capsys):
    example = load_example("own_autogen_agent")
    with FakeOpenAIServer(_blurb_server) as srv:
        result = example.main("any-model", base_url=srv.url)
        requests = list(srv.requests)
    assert result.path == ["Draft", "Review", "Done"]
    # the writer asked for its tool, AutoGen ran it, and the result went back to the model
    tool_msgs = result.history.of_kind(Kind.TOOL)
    assert [(m.name, m.content) for m in tool_msgs] == [("word_count", "5")]
    second_writer = [r for r in requests if "product blurbs" in _system(r["messages"])][1]
    assert second_writer["messages"][-1] == {
        "role": "tool",
        "tool_call_id": tool_msgs[0].meta["call_id"],
        "content": "5",
    }
    assert second_writer["tools"][0]["function"]["name"] == "word_count"
    # the editor's reply is the critic's verdict from the nested chat
    review = [m for m in result.history if m.state == "Review" and m.kind is Kind.LLM]
    assert review[0].name == "editor" and review[0].content.startswith("APPROVED")
    critic_req = next(r for r in requests if "You review blurbs" in _system(r["messages"]))
    assert "A kettle boiled by sunshine." in json.dumps(critic_req["messages"])
    # usage of both agents is traced per state (the fake server counts words as tokens)
    by_state = result.usage_by_state()
    assert by_state["Draft"].prompt_tokens > 0 and by_state["Draft"].completion_tokens == 5
    assert by_state["Review"].completion_tokens == 4  # "APPROVED: short and clear."
    out = capsys.readouterr().out
    # what a person running it wants to see first: the result, the verdict and why it stopped
    writer = 'writer: call word_count({"text": "A kettle boiled by sunshine."})\n        Observation: 5\n'
    assert writer + "        A kettle boiled by sunshine.\ncritic: APPROVED: short and clear.\n" in out
    assert "stopped: the critic approved (final state Done)\n" in out
    assert "path: Draft -> Review -> Done" in out


def test_own_autogen_agent_says_it_stopped_at_the_bound_when_the_critic_never_approves(capsys):
    """Issue 57, item 22: the example printed neither its result nor why it stopped."""
    example = load_example("own_autogen_agent")

    def reply(model, messages, body):
        if "You review blurbs" in _system(messages):
            return "Cut the word kettle."
        return "A kettle boiled by sunshine, brewing tea."

    with FakeOpenAIServer(reply) as srv:
        result = example.main("any-model", base_url=srv.url, max_transitions=3)
    assert result.stop_reason == "max_transitions" and result.path == ["Draft", "Review", "Draft", "Review"]
    out = capsys.readouterr().out
    assert "writer: A kettle boiled by sunshine, brewing tea.\ncritic: Cut the word kettle.\n" in out
    assert "stopped: no approval within 3 transitions (the bound); the last draft is unapproved\n" in out


def _shop_server(model, messages, body):
    observed = [m for m in messages if m["role"] == "tool" or str(m.get("content") or "").startswith("Observation:")]
    if body.get("tools"):  # native function calling
        if not observed:
            return {"tool_calls": [{"name": "price_of", "arguments": {"item": "kettle"}}]}
        if len(observed) == 1:
            return {"tool_calls": [{"name": "multiply", "arguments": {"a": 3, "b": 39.0}}]}
        return f"Three kettles cost {observed[-1]['content']} euros."
    if not observed:
        return "Thought: I need the price.\nAction: price_of[kettle]"
    if len(observed) == 1:
        return 'Thought: now multiply.\nAction: multiply[{"a": 3, "b": 39.0}]'
    return f"Three kettles cost {observed[-1]['content'].removeprefix('Observation: ')} euros."


@pytest.mark.parametrize("native", [True, False])
def test_function_calling_native_and_text_protocol(native):
    example = load_example("function_calling")
    with FakeOpenAIServer(_shop_server) as srv:
        result = example.main("m", base_url=srv.url, native=native)
        requests = list(srv.requests)
    assert result.history.last(Kind.LLM).content == "Three kettles cost 117.0 euros."
    tools = [(m.name, m.content, m.meta["ok"]) for m in result.history.of_kind(Kind.TOOL)]
    assert tools == [("price_of", "39.0", True), ("multiply", "117.0", True)]
    assert len(requests) == 3
    if native:
        assert {t["function"]["name"] for t in requests[0]["tools"]} == {"price_of", "multiply"}
    else:
        assert all("tools" not in r for r in requests)
        system = requests[0]["messages"][0]
        assert system["role"] == "system"  # the protocol was explained with the real parameter names
        assert 'Action: multiply[{"a": <number>, "b": <number>}]' in system["content"]
        assert 'Action: price_of[{"item": <string>}]' in system["content"]
        assert all("\nObservation:" in r["stop"] for r in requests)  # the model cannot invent a result
        assert requests[1]["messages"][-1]["content"] == "Observation: 39.0"
    steps = [s.output for s in result.steps]
    assert steps == ["prompt", "llm", "tool_call[price_of]", "llm", "tool_call[multiply]", "llm"]


def test_a_failing_or_malformed_tool_call_is_an_observation_not_a_crash():
    example = load_example("function_calling")
    replies = iter(["Action: price_of[teapot]", "Action: multiply[3, 4]", "I could not find it."])
    with FakeOpenAIServer(lambda m, msgs, b: next(replies)) as srv:
        result = example.main("m", base_url=srv.url, native=False)
        requests = list(srv.requests)
    tools = result.history.of_kind(Kind.TOOL)
    assert tools[0].meta["ok"] is False and "no product 'teapot'" in tools[0].content
    call_as = 'Action: multiply[{"a": <number>, "b": <number>}]'
    assert (
        tools[1].meta["ok"] is False and tools[1].content == f"error: write the arguments as a JSON object: {call_as}"
    )
    assert (
        requests[2]["messages"][-1]["content"] == f"Observation: error: write the arguments as a JSON object: {call_as}"
    )
    assert result.history.last(Kind.LLM).content == "I could not find it."


def test_human_in_the_loop_revises_until_approved():
    example = load_example("human_in_the_loop")
    drafts = iter(["We are sorry. A new lid is on its way.", "Sorry! A new lid ships today."])
    person = ScriptedHuman(["shorter please", "yes"])
    with FakeOpenAIServer(lambda m, msgs, b: next(drafts)) as srv:
        result = example.main("m", base_url=srv.url, human_input=person)
        second = srv.requests[1]["messages"]
    assert result.path == ["Draft", "Approve", "Draft", "Approve", "Done"]
    assert [m.content for m in result.history.of_kind(Kind.HUMAN)] == ["shorter please", "yes"]
    assert person.prompts[0].startswith("We are sorry.") and person.prompts[0].endswith("(yes, or what to change): ")
    assert any(m["content"] == "shorter please" for m in second)  # the model saw the person's answer


def test_human_without_answers_fails_loudly():
    example = load_example("human_in_the_loop")
    with FakeOpenAIServer(lambda m, msgs, b: "draft") as srv, pytest.raises(HumanInputExhausted):
        example.main("m", base_url=srv.url, human_input=ScriptedHuman([]))


def test_a_wrongly_typed_or_incomplete_text_call_gets_a_short_readable_error_not_pydantics():
    example = load_example("function_calling")
    replies = iter(['Action: multiply[{"a": "three", "b": 39}]', 'Action: multiply[{"a": 3}]', "Answer: unknown"])
    with FakeOpenAIServer(lambda m, msgs, b: next(replies)) as srv:
        result = example.main("m", base_url=srv.url, native=False)
    errors = [m.content for m in result.history.of_kind(Kind.TOOL)]
    call_as = 'Call it as: Action: multiply[{"a": <number>, "b": <number>}]'
    assert errors == [
        f'error: "a" must be a valid number (got "three"). {call_as}',
        f'error: "b" is missing. {call_as}',
    ]


def test_a_wrongly_typed_or_malformed_function_call_gets_a_short_readable_error_and_does_not_run():
    example = load_example("function_calling")
    calls = iter(
        [
            {"tool_calls": [{"name": "multiply", "arguments": {"a": "three", "b": 39}}]},
            {"tool_calls": [{"name": "multiply", "arguments": {"a": 3, "c": 39}}]},
            "Answer: unknown",
        ]
    )
    with FakeOpenAIServer(lambda m, msgs, b: next(calls)) as srv:
        result = example.main("m", base_url=srv.url, native=True)
        requests = list(srv.requests)
    tools = result.history.of_kind(Kind.TOOL)
    send_as = 'Send the arguments as: {"a": <number>, "b": <number>}'
    assert [(m.content, m.meta["ok"]) for m in tools] == [
        (f'error: "a" must be a valid number (got "three"). {send_as}', False),
        (f'error: "b" is missing; "c" is not a parameter. {send_as}', False),
    ]
    # the model gets the same short line as the tool message answering its call, with the call's id
    answer = requests[1]["messages"][-1]
    assert answer["role"] == "tool" and answer["content"] == tools[0].content
    assert answer["tool_call_id"] == tools[0].meta["call_id"]
    assert not any("pydantic" in m.content or "validation error" in m.content for m in tools)


# -- the examples as written, on the embedded 0.5B model (a few short calls each) ---------------


def test_function_calling_example_runs_as_written_on_the_embedded_model(local_small_model, capsys):
    example = load_example("function_calling")
    result = example.main("local-small", max_tokens=96)
    assert result.path == ["Answer", "Done"]
    tools = result.history.of_kind(Kind.TOOL)
    # The protocol shows the real parameter names: the small model writes a well-formed call.
    assert ("price_of", "39.0", True) in [(m.name, m.content, m.meta["ok"]) for m in tools]
    assert not any("validation error" in m.content for m in result.history)
    assert "[tool] price_of: 39.0" in capsys.readouterr().out


def test_human_in_the_loop_example_runs_as_written_on_the_embedded_model(local_small_model):
    example = load_example("human_in_the_loop")
    person = ScriptedHuman(["yes"])
    result = example.main("local-small", human_input=person, max_tokens=64)
    assert result.path == ["Draft", "Approve", "Done"]
    draft = result.history.last(Kind.LLM)
    assert draft.content.strip() and person.prompts[0].startswith(draft.content.strip()[:20])


def test_own_autogen_agent_example_runs_as_written_on_the_embedded_model(local_small_model, capsys):
    example = load_example("own_autogen_agent")
    result = example.main("local-small", max_tokens=48, max_transitions=2)  # a draft, a review, one revision
    assert result.path[:2] == ["Draft", "Review"] and len(result.path) <= 3
    assert result.stop_reason in ("final", "max_transitions")
    out = capsys.readouterr().out
    assert "writer: " in out and "writer: (no reply)" not in out and "critic: (no reply)" not in out
    assert f"stopped: {example.why_stopped(result, 2)}\n" in out
    by_state = result.usage_by_state()
    assert by_state["Draft"].prompt_tokens > 0 and by_state["Review"].completion_tokens > 0  # the critic's usage

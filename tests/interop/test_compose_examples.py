"""The issue-45 examples (subflow, parallel branches, MCP tools, structured output) run as written:
against a fake OpenAI-compatible server over HTTP, and the MCP and structured-output ones on the
embedded 0.5B model (they take the model lock: ``flock /work/model.lock pytest ... -m local_model``)."""

from __future__ import annotations

import importlib.util
import json

import pytest

from stateflow import Kind
from stateflow.testing.fake_openai import FakeOpenAIServer
from tests.interop.conftest import load_example


def test_subflow_example_names_the_inner_states(capsys):
    example = load_example("subflow")
    replies = iter(
        [
            "Say it boils with sunlight.",
            "A kettle that boils your water with nothing but free sunshine, anywhere you happen to go.",
            "Sun-boiled water.",
        ]
    )
    with FakeOpenAIServer(lambda model, messages, body: next(replies)) as srv:
        result = example.main("m", base_url=srv.url)
    assert result.path == [
        "Plan",
        "Write",
        "Write.Draft",
        "Write.Check",
        "Write.Draft",
        "Write.Check",
        "Write.Ok",
        "Done",
    ]
    assert result.usage_by_state()["Write.Draft"].calls == 2
    assert "Write.Draft" in capsys.readouterr().out


def test_parallel_example_overlaps_its_branches(capsys):
    example = load_example("parallel_branches")
    with FakeOpenAIServer(lambda model, messages, body: "Yes, buy it.") as srv:
        result = example.main("m", base_url=srv.url)
        answer_request = srv.requests[-1]["messages"]
    fan = next(s for s in result.steps if s.output == "parallel")
    assert fan.detail["wall_s"] < fan.detail["branches_s"]  # two 1 s lookups ran side by side
    assert "stock: kettle: 14 in stock" in json.dumps(answer_request)  # the merge reached the next state
    assert result.path == ["Gather", "Answer", "Done"]
    assert "wall" in capsys.readouterr().out


needs_mcp = pytest.mark.skipif(
    importlib.util.find_spec("mcp") is None, reason="the mcp extra is not installed (scripts/setup.sh installs it)"
)


@needs_mcp
def test_mcp_example_calls_the_servers_tool_through_function_calling():
    example = load_example("mcp_tools")

    def respond(model, messages, body):
        if not any(m["role"] == "tool" for m in messages):
            return {"tool_calls": [{"name": "price_of", "arguments": {"item": "kettle"}}]}
        return "One kettle costs 39 euros."

    with FakeOpenAIServer(respond) as srv:
        result = example.main("m", base_url=srv.url)
        offered = [t["function"]["name"] for t in srv.requests[0]["tools"]]
    assert offered == ["price_of", "multiply"]
    assert [(m.name, m.content) for m in result.history.of_kind(Kind.TOOL)] == [("price_of", "39.0")]


def test_structured_output_example_routes_on_the_typed_object():
    example = load_example("structured_output")
    ticket = {"summary": "Nobody can log in", "severity": "high", "component": "login"}
    with FakeOpenAIServer(lambda model, messages, body: json.dumps(ticket)) as srv:
        result = example.main("m", base_url=srv.url)
    assert result.path == ["Triage", "Page"]
    assert result.board.get(example.Ticket).component == "login"


# -- on the embedded 0.5B model --------------------------------------------------------------------


@pytest.mark.local_model
def test_structured_output_example_on_the_embedded_model(local_small_model, capsys):
    example = load_example("structured_output")
    result = example.main("local-small")
    ticket = result.board.get(example.Ticket)
    # the embedded server turned the schema into a grammar: the first reply already validated
    assert ticket is not None and not [s for s in result.steps if s.output.endswith("[invalid]")]
    assert result.history.last(Kind.LLM).meta["parsed"] == ticket.model_dump(mode="json")
    assert result.path[-1] == ("Page" if ticket.severity == "high" else "Queue")
    print(capsys.readouterr().out)


@needs_mcp
@pytest.mark.local_model
def test_mcp_example_on_the_embedded_model(local_small_model, capsys):
    example = load_example("mcp_tools")
    result = example.main("local-small", max_tokens=96)
    calls = [s for s in result.steps if s.output.startswith("tool_call[")]
    # the small model called the MCP server's tool through the text protocol and got its answer
    assert any(s.detail["tool"] == "price_of" and s.detail["ok"] for s in calls), [s.detail for s in calls]
    assert ("price_of", "39.0") in [(m.name, m.content) for m in result.history.of_kind(Kind.TOOL)]
    print(capsys.readouterr().out)

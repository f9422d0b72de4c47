"""MCP tools through autogen.mcp, against real MCP server processes (issue 45, part 3).

Each test starts a FastMCP server written here as its own process over stdio; the model is the
fake OpenAI-compatible server over HTTP (the embedded-model run is in
tests/backends/local/test_compose_local.py).
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("mcp", reason="the mcp extra is not installed (scripts/setup.sh installs it)")

from stateflow import LLM, Flow, Kind, ModelProfile, Prompt, State, Transition, run
from stateflow.fingerprint import flow_fingerprint
from stateflow.mcp_tools import MCPServerError, MCPTools
from stateflow.testing.fake_openai import FakeOpenAIServer

SERVER = '''
import os, sys, time
from mcp.server.fastmcp import FastMCP

mcp = FastMCP("calc")


@mcp.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@mcp.tool()
def die() -> str:
    """The server process exits while answering."""
    os._exit(3)


@mcp.tool()
def hang(seconds: float) -> str:
    """Never answers in time."""
    time.sleep(seconds)
    return "woke"


@mcp.tool()
def garbage() -> str:
    """Writes a line that is not JSON-RPC where the answer should be, then never answers."""
    sys.stdout.write("this is not json-rpc\\n")
    sys.stdout.flush()
    time.sleep(60)
    return "never"


if __name__ == "__main__":
    mcp.run()
'''


@pytest.fixture(scope="module")
def server_file(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("mcp") / "calc_server.py"
    path.write_text(SERVER)
    return path


def _calc(server_file: Path, **kw) -> MCPTools:
    return MCPTools(command=[sys.executable, str(server_file)], name="calc", **kw)


def _flow(tools: MCPTools) -> Flow:
    ask = State("Ask", Prompt("Use the tools."), LLM(tools=(tools,)))
    done = State("Done", final=True)
    return Flow("mcp", initial=ask, transitions=[Transition(ask, done)])


def _calls_then_answers(tool: str, arguments: dict):
    """A fake model that calls ``tool`` once, then answers with the tool result it got."""

    def respond(model, messages, body):
        results = [m for m in messages if m["role"] == "tool"]
        if not results:
            return {"tool_calls": [{"name": tool, "arguments": arguments}]}
        return f"RESULT: {results[-1]['content']}"

    return respond


def _profile(url: str) -> ModelProfile:
    return ModelProfile(name="fake", model="fake-model", base_url=url, api_key_env=None, max_retries=0)


def test_the_servers_tools_reach_the_model_with_their_declared_schemas(server_file):
    with FakeOpenAIServer(_calls_then_answers("add", {"a": 2, "b": 3})) as srv:
        r = run(_flow(_calc(server_file)), "T", models=_profile(srv.url), telemetry=False)
        first = srv.requests[0]
    offered = {t["function"]["name"]: t["function"] for t in first["tools"]}
    assert set(offered) == {"add", "die", "hang", "garbage"}
    assert offered["add"]["parameters"]["properties"].keys() == {"a", "b"}
    assert offered["add"]["parameters"]["required"] == ["a", "b"]
    assert offered["add"]["description"] == "Add two integers."
    tool_msgs = r.history.of_kind(Kind.TOOL)
    assert [(m.name, m.content) for m in tool_msgs] == [("add", "5")]
    step = next(s for s in r.steps if s.output == "tool_call[add]")
    assert step.detail["ok"] is True and step.detail["arguments"] == {"a": 2, "b": 3}
    assert r.history.last().content.endswith("RESULT: 5")


@pytest.mark.parametrize(
    ("tool", "arguments", "says"),
    [
        ("die", {}, "closed the connection"),
        ("hang", {"seconds": 30}, "gave no answer to tool 'hang' within 2s"),
        ("garbage", {}, "not MCP"),
    ],
)
def test_a_server_that_dies_hangs_or_answers_garbage_gives_a_tool_error_not_a_hang(server_file, tool, arguments, says):
    t0 = time.monotonic()
    with FakeOpenAIServer(_calls_then_answers(tool, arguments)) as srv:
        r = run(_flow(_calc(server_file, call_timeout_s=2)), "T", models=_profile(srv.url), telemetry=False)
        second = srv.requests[1]
    assert time.monotonic() - t0 < 60  # bounded by the call timeout, not the tool's sleep
    assert r.stop_reason == "final"
    step = next(s for s in r.steps if s.output == f"tool_call[{tool}]")
    assert step.detail["ok"] is False
    told = next(m for m in second["messages"] if m["role"] == "tool")["content"]
    assert "MCP server 'calc'" in told and says in told
    assert step.message is not None and says in step.message.content


def test_a_server_that_cannot_start_fails_the_run_before_any_model_call(tmp_path):
    broken = MCPTools(command=[sys.executable, "-c", "import sys; print('boom', file=sys.stderr); sys.exit(3)"])
    with FakeOpenAIServer(lambda m, msgs, b: "never asked") as srv:
        with pytest.raises(MCPServerError, match="could not start") as exc:
            run(_flow(broken), "T", models=_profile(srv.url), telemetry=False)
        assert srv.requests == []
    assert "boom" in str(exc.value)


def test_mcp_tools_validate_their_arguments_and_enter_the_fingerprint(server_file):
    with pytest.raises(ValueError, match="exactly one of command"):
        MCPTools()
    with pytest.raises(ValueError, match="exactly one of command"):
        MCPTools(command=["x"], url="http://127.0.0.1:1/mcp")
    a, b = _flow(_calc(server_file)), _flow(_calc(server_file))
    assert flow_fingerprint(a) == flow_fingerprint(b)
    assert flow_fingerprint(_flow(_calc(server_file, call_timeout_s=5))) != flow_fingerprint(a)
    assert json.dumps(_calc(server_file, env={"TOKEN": "secret"}).identity()).count("secret") == 0


HTTP_SERVER = '''
import sys
from mcp.server.fastmcp import FastMCP

mcp = FastMCP("calc-http", host="127.0.0.1", port=int(sys.argv[1]))


@mcp.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


if __name__ == "__main__":
    mcp.run(transport="streamable-http")
'''


def test_a_running_server_over_streamable_http_is_reached_by_url(tmp_path):
    import socket
    import subprocess

    with socket.socket() as s:  # a free port on the loopback
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    script = tmp_path / "calc_http.py"
    script.write_text(HTTP_SERVER)
    proc = subprocess.Popen([sys.executable, str(script), str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 60
        while True:  # wait until it listens (a loaded machine starts Python slowly)
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else "server exited"
                assert time.monotonic() < deadline, "the MCP HTTP server did not start listening"
                time.sleep(0.2)
        tools = MCPTools(url=f"http://127.0.0.1:{port}/mcp", name="calc")
        with FakeOpenAIServer(_calls_then_answers("add", {"a": 20, "b": 22})) as srv:
            r = run(_flow(tools), "T", models=_profile(srv.url), telemetry=False)
            offered = {t["function"]["name"]: t["function"] for t in srv.requests[0]["tools"]}
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    assert offered["add"]["parameters"]["required"] == ["a", "b"]
    assert [(m.name, m.content) for m in r.history.of_kind(Kind.TOOL)] == [("add", "42")]
    assert r.history.last().content.endswith("RESULT: 42")

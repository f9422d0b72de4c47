"""MCP tools through autogen.mcp, against real MCP server processes (issue 45, part 3).

Each test starts a FastMCP server written here as its own process over stdio; the model is the
fake OpenAI-compatible server over HTTP (the embedded-model run is in
tests/backends/local/test_compose_local.py).
"""

from __future__ import annotations

import json
import os
import signal
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


# -- issue 57: start-up failures, the start timeout, the server's environment ---------------------

BROKEN_SERVER = """
import sys
# the word is built at run time so that neither the command line nor the server's name holds it
print("kab" + "oom: cannot bind the port", file=sys.stderr, flush=True)
sys.exit(3)
"""

SILENT_SERVER = """
import os, sys, time
open(sys.argv[1], "w").write(str(os.getpid()))
print("wait" + "ing for nothing", file=sys.stderr, flush=True)
time.sleep(600)  # never reads stdin, never answers initialize()
"""

ENV_SERVER = """
import os
from mcp.server.fastmcp import FastMCP

mcp = FastMCP("env")


@mcp.tool()
def getenv(name: str) -> str:
    \"\"\"One environment variable of the server process ('<unset>' when it has none).\"\"\"
    return os.environ.get(name, "<unset>")


if __name__ == "__main__":
    mcp.run()
"""


def _running(pid: int) -> bool:
    """Whether ``pid`` is a live process (a zombie nobody has reaped counts as ended)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state != "Z"


def test_57_6_a_server_that_cannot_start_reports_its_stderr(tmp_path):
    script = tmp_path / "broken_server.py"
    script.write_text(BROKEN_SERVER)
    broken = MCPTools(command=[sys.executable, str(script)], name="broken")
    assert "kaboom" not in repr(broken)  # the word can only come from the server's stderr
    with pytest.raises(MCPServerError, match="MCP server 'broken' could not start") as exc:
        broken.connect()
    assert "server stderr: 'kaboom: cannot bind the port'" in str(exc.value)


def test_57_7_a_server_that_never_answers_fails_at_the_start_timeout_and_is_stopped(tmp_path):
    script, pid_file = tmp_path / "silent_server.py", tmp_path / "pid"
    script.write_text(SILENT_SERVER)
    silent = MCPTools(command=[sys.executable, str(script), str(pid_file)], name="silent", start_timeout_s=3)
    t0 = time.monotonic()
    with pytest.raises(MCPServerError, match=r"MCP server 'silent' did not start and list its tools within 3s") as exc:
        silent.connect()
    elapsed = time.monotonic() - t0
    pid = int(pid_file.read_text())
    try:
        assert not _running(pid), f"the server process {pid} is still running"
    finally:
        if _running(pid):  # do not leave it behind when the assertion fails
            os.kill(pid, signal.SIGKILL)
    # the timeout, then the MCP stdio shutdown (<= 2 s after stdin closes, then SIGTERM): loose bound
    assert elapsed < 3 + 6, f"took {elapsed:.1f}s"
    assert "waiting for nothing" in str(exc.value)


def test_57_8_a_server_gets_the_safe_list_and_env_but_not_the_rest_of_the_environment(tmp_path, monkeypatch):
    script = tmp_path / "env_server.py"
    script.write_text(ENV_SERVER)
    monkeypatch.setenv("SF_TEST_PARENT_SECRET", "s3cret")
    monkeypatch.setenv("HOME", str(tmp_path))
    spec = MCPTools(
        command=[sys.executable, str(script)], name="env", env={"SF_TEST_GIVEN": "given", "HOME": "/nowhere"}
    )
    assert spec.server_environment()["SF_TEST_GIVEN"] == "given"
    assert "SF_TEST_PARENT_SECRET" not in spec.server_environment()
    conn = spec.connect()
    try:
        getenv = next(t for t in conn.tools if t.name == "getenv").func
        seen = {name: getenv(name=name) for name in ("SF_TEST_PARENT_SECRET", "SF_TEST_GIVEN", "PATH", "HOME")}
    finally:
        conn.close()
    assert seen == {
        "SF_TEST_PARENT_SECRET": "<unset>",  # not on the safe list: never passed
        "SF_TEST_GIVEN": "given",  # env= is set
        "PATH": spec.server_environment()["PATH"],  # the safe list is inherited
        "HOME": "/nowhere",  # and env= wins over it
    }


def test_57_8_env_is_refused_for_a_server_reached_by_url():
    with pytest.raises(ValueError, match="env= applies to a server started with command="):
        MCPTools(url="http://127.0.0.1:1/mcp", env={"TOKEN": "x"})

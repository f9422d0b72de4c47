"""The official AG-UI client, ``@ag-ui/client`` 1.0's ``HttpAgent`` under Node, against a served
flow (issue 59 part 4): it verifies the event order itself and fails the run on a violation; it
runs the flow to its interrupt, answers it with ``resume`` and finishes. Needs Debian's nodejs
and the package (``scripts/setup_agui_node.sh``); skips without them."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from stateflow import LLM, Flow, Human, Prompt, State, Transition
from tests.serve.served import served

SCRIPT = Path(__file__).with_name("node") / "agui_client.mjs"


def _module_dir() -> Path:
    default = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "stateflow" / "agui-node"
    return Path(os.environ.get("STATEFLOW_AGUI_NODE", default)) / "node_modules"


def ping(host: str) -> str:
    """Ping a host."""
    return f"{host} is up"


def _flow() -> Flow:
    ask = State("Ask", Prompt("Answer."), LLM(tools=(ping,)))
    approve = State("Approve", Human(prompt="Publish?", defer=True, name="editor"))
    done = State("Done", final=True)
    return Flow("node", initial=ask, transitions=[Transition(ask, approve), Transition(approve, done)])


def _responder(model, messages, body):
    if messages[-1].get("content") == "Answer.":
        return {"tool_calls": [{"name": "ping", "arguments": {"host": "db"}}]}
    return "the db host is up"


@pytest.mark.skipif(shutil.which("node") is None, reason="needs nodejs (scripts/setup_agui_node.sh)")
def test_the_official_agui_client_runs_and_resumes_a_served_flow():
    modules = _module_dir()
    if not (modules / "@ag-ui" / "client").is_dir():
        pytest.skip(f"needs @ag-ui/client in {modules} (scripts/setup_agui_node.sh)")
    with served(_flow(), _responder) as (base, srv, store):
        proc = subprocess.run(
            ["node", str(SCRIPT), str(modules), base, "node-1"], capture_output=True, text=True, timeout=120
        )
        assert proc.returncode == 0, proc.stdout + proc.stderr
        seen = json.loads(proc.stdout.strip().splitlines()[-1])
        first, second = seen["runs"]
        assert first["error"] is None and second["error"] is None
        assert first["outcome"] == "interrupt" and seen["question"].endswith("Publish?")
        assert first["types"][0] == "RUN_STARTED" and first["types"][-1] == "RUN_FINISHED"
        assert {"TEXT_MESSAGE_START", "TEXT_MESSAGE_CONTENT", "TOOL_CALL_START", "TOOL_CALL_RESULT"} <= set(
            first["types"]
        )
        assert second["outcome"] == "success" and second["types"][-1] == "RUN_FINISHED"
        assert "the db host is up" in seen["assistant"]
        assert [t.status.value for t in store.threads()] == ["finished"]
        assert len(srv.requests) == 2  # the resume asked no model again

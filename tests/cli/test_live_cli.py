"""`stateflow run FLOW --task ... --stream` (tokens printed while the model still streams) and
`stateflow serve FLOW` (a real server process on the loopback)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from stateflow.testing.fake_openai import FakeOpenAIServer

ROOT = Path(__file__).resolve().parent.parent.parent

FLOWS = """
from stateflow import LLM, Flow, Prompt, State, Transition

ask = State("Ask", Prompt("Say something."), LLM())
done = State("Done", final=True)
FLOW = Flow("talk", initial=ask, transitions=[Transition(ask, done)])
"""


def test_stream_prints_tokens_as_they_come(tmp_path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    (project / "flows.py").write_text(FLOWS)
    words = [f"word{i}" for i in range(30)]
    with FakeOpenAIServer(lambda model, messages, body: " ".join(words), chunk_delay_s=0.1) as srv:
        (project / "models.toml").write_text(
            f'[profiles.srv]\nmodel = "m"\nprovider = "openai"\nbase_url = "{srv.url}"\napi_key_env = ""\n'
            '[models]\ndefault = "srv"\n'
        )
        env = {**os.environ, "PYTHONPATH": f"{project}{os.pathsep}{ROOT}", "PYTHONUNBUFFERED": "1"}
        cmd = [sys.executable, "-m", "stateflow.cli.main", "run", "flows:FLOW", "--task", "hi"]
        proc = subprocess.Popen(
            [*cmd, "--config", "models.toml", "--stream"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
            cwd=project,
        )
        assert proc.stderr is not None
        seen = ""
        while "word2" not in seen:  # read the console until the first tokens arrived
            char = proc.stderr.read(1)
            assert char, seen
            seen += char
        streaming = srv.active  # the model is still streaming its reply while we read it
        out, rest = proc.communicate(timeout=120)
    assert proc.returncode == 0, seen + rest
    assert streaming == 1
    console = seen + rest
    assert "== Ask" in console and "Ask/assistant: word0 word1" in console and "-> Done (always)" in console
    assert "word29" in console and '"exit_state": "Done"' in out


def test_serve_binds_the_loopback_and_serves_the_flow_over_agui(tmp_path) -> None:
    import json
    import socket
    import time

    import httpx

    project = tmp_path / "project"
    project.mkdir()
    (project / "flows.py").write_text(FLOWS)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with FakeOpenAIServer(lambda model, messages, body: "served reply") as srv:
        (project / "models.toml").write_text(
            f'[profiles.srv]\nmodel = "m"\nprovider = "openai"\nbase_url = "{srv.url}"\napi_key_env = ""\n'
            '[models]\ndefault = "srv"\n'
        )
        env = {**os.environ, "PYTHONPATH": f"{project}{os.pathsep}{ROOT}"}
        cmd = [sys.executable, "-m", "stateflow.cli.main", "serve", "flows:FLOW", "--port", str(port)]
        cmd += ["--config", "models.toml", "--checkpoints", str(tmp_path / "threads.db")]
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=project)
        try:
            base = f"http://127.0.0.1:{port}"
            deadline = time.monotonic() + 60
            while True:
                assert proc.poll() is None, proc.communicate()[1]
                try:
                    if httpx.get(f"{base}/health").status_code == 200:
                        break
                except httpx.TransportError:
                    assert time.monotonic() < deadline
                    time.sleep(0.2)
            listening = [c for c in _listeners(port)]
            assert listening == ["127.0.0.1"]  # the loopback only
            body = {"threadId": "cli-1", "runId": "r1", "messages": [{"id": "1", "role": "user", "content": "hi"}]}
            body |= {"tools": [], "context": [], "forwardedProps": {}}
            with httpx.stream("POST", f"{base}/agui", json=body, timeout=30) as r:
                events = [json.loads(line[6:]) for line in r.iter_lines() if line.startswith("data: ")]
            assert events[-1]["type"] == "RUN_FINISHED" and events[-1]["result"]["exit_state"] == "Done"
            text = "".join(e["delta"] for e in events if e["type"] == "TEXT_MESSAGE_CONTENT")
            assert text == "served reply"
        finally:
            proc.terminate()
            proc.wait(30)


def _listeners(port: int) -> list[str]:
    """The local addresses listening on ``port`` (from /proc/net/tcp and tcp6)."""
    out = []
    for table, width in (("/proc/net/tcp", 8), ("/proc/net/tcp6", 32)):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            local, state = line.split()[1], line.split()[3]
            addr, hex_port = local.split(":")
            if state == "0A" and int(hex_port, 16) == port:  # 0A: LISTEN
                out.append(socket_address(addr, width))
    return out


def socket_address(hex_addr: str, width: int) -> str:
    import ipaddress

    raw = bytes.fromhex(hex_addr)
    if width == 8:
        return str(ipaddress.IPv4Address(raw[::-1]))
    words = b"".join(raw[i : i + 4][::-1] for i in range(0, 16, 4))
    return str(ipaddress.IPv6Address(words))

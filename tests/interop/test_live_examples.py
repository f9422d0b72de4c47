"""The live examples (stream_tokens, many_runs_asyncio, serve_approval) end to end against the
fake OpenAI server over HTTP."""

from __future__ import annotations

import socket
import subprocess
import sys
import time

import httpx

from stateflow.testing.fake_openai import FakeOpenAIServer
from tests.interop.conftest import EXAMPLES, load_example


def test_stream_tokens_prints_tokens_and_transitions(capsys):
    example = load_example("stream_tokens")

    def reply(model, messages, body):
        return "Short: light scatters." if "eight words" in messages[-1]["content"] else "Air scatters blue light most."

    with FakeOpenAIServer(reply) as srv:
        result = example.main("m", base_url=srv.url)
        assert all(r["stream"] for r in srv.requests)
    out = capsys.readouterr().out
    assert result.path == ["Draft", "Shorten", "Done"]
    assert "== Draft\nAir scatters blue light most.\n-> Shorten" in out
    assert "Short: light scatters." in out and "status: finished" in out


def test_many_runs_asyncio_overlaps_the_runs(capsys):
    example = load_example("many_runs_asyncio")
    in_flight: list[int] = []

    def reply(model, messages, body):
        in_flight.append(srv.active)  # completions being answered at this moment, this one included
        i = int(messages[-2]["content"].split()[2])  # "What is I + I?"
        return f"{2 * i}"

    with FakeOpenAIServer(reply, latency_s=0.2) as srv:
        results = example.main("m", base_url=srv.url, runs=8)
    assert [r.history.last().content for r in results] == [str(2 * i) for i in range(1, 9)]
    assert "8 concurrent runs" in capsys.readouterr().out
    assert max(in_flight) > 1  # the awaited runs' model calls overlapped


def test_serve_approval_pauses_over_http_and_resumes_with_the_answer(tmp_path, capsys):
    example = load_example("serve_approval")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with FakeOpenAIServer(lambda m, msgs, b: "Tokens now stream.") as srv:
        cmd = [sys.executable, str(EXAMPLES / "serve_approval.py"), "serve", "--model", "m", "--base-url", srv.url]
        cmd += ["--port", str(port), "--db", str(tmp_path / "approval.db")]
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            url = f"http://127.0.0.1:{port}"
            deadline = time.monotonic() + 60
            while True:
                assert proc.poll() is None, proc.communicate()[1]
                try:
                    if httpx.get(f"{url}/health").status_code == 200:
                        break
                except httpx.TransportError:
                    assert time.monotonic() < deadline
                    time.sleep(0.2)
            last = example.client(url, "yes")
            agui_out = capsys.readouterr().out
            over_a2a = example.a2a_client(url, "yes")  # another agent: input-required, answered, finished
            a2a_out = capsys.readouterr().out
            threads = httpx.get(f"{url}/health").json()
        finally:
            proc.terminate()
            served, _ = proc.communicate(timeout=30)
    # issue 57, item 22: the server says where it serves; the A2A client prints the streamed
    # reply as text (it printed one token per line in green)
    assert served.startswith(f"serving the release-note flow at {url} (AG-UI: POST {url}/agui, A2A: {url}/a2a)\n")
    assert f"client --url {url}" in served
    assert "== Draft\nTokens now stream.\n" in agui_out
    assert "\x1b[" not in a2a_out
    assert a2a_out.splitlines() == [
        "Tokens now stream.",
        "the task is input-required; answering 'yes'",
        "reply: Tokens now stream.",
    ]
    assert last["type"] == "RUN_FINISHED" and last["outcome"]["type"] == "success"
    assert over_a2a == "Tokens now stream." and threads["flow"] == "release-note"
    assert last["result"]["path"] == ["Draft", "Approve", "Published"]
    assert len(srv.requests) == 2  # one draft per thread: answering a question did not ask the model again


def test_serve_approval_on_a_taken_port_says_so_and_announces_nothing(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        cmd = [sys.executable, str(EXAMPLES / "serve_approval.py"), "serve", "--model", "m", "--base-url", "http://x"]
        cmd += ["--port", str(port), "--db", str(tmp_path / "approval.db")]
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert done.returncode == 1 and done.stdout == ""
    [refused] = done.stderr.strip().splitlines()
    assert refused.startswith(f"port {port} cannot be served (Address already in use") and "--port" in refused
    assert not (tmp_path / "approval.db").exists()

"""LeanChatClient over real HTTP on the loopback: replies, tool calls, usage, retries, bad replies."""

from __future__ import annotations

import json
import threading
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import pytest
from autogen import OpenAIWrapper

from stateflow.backends.lean_openai import LeanChatClient, MalformedReplyError
from stateflow.errors import LLMError
from stateflow.testing.fake_openai import FakeOpenAIServer


def _wrapper(url: str, http: httpx.Client, **extra: Any) -> OpenAIWrapper:
    entry = {"model": "m", "api_key": "sk-test", "base_url": url, "max_retries": 2, "price": [1.0, 2.0], **extra}
    w = OpenAIWrapper(config_list=[{**entry, "model_client_cls": "LeanChatClient"}], cache_seed=None)
    w.register_model_client(LeanChatClient, http_client=http)
    return w


def _ask(w: OpenAIWrapper, text: str) -> Any:
    return w.create(messages=[{"role": "user", "content": text}])


def test_a_normal_reply_with_its_usage_and_cost():
    with FakeOpenAIServer(lambda model, msgs, body: f"echo {msgs[-1]['content']}") as srv, httpx.Client() as http:
        w = _wrapper(srv.url, http)
        reply = _ask(w, "hello")
    assert w.extract_text_or_completion_object(reply) == ["echo hello"]
    u = reply.usage
    assert u.prompt_tokens > 0 and u.completion_tokens > 0
    assert reply.cost == pytest.approx((u.prompt_tokens * 1.0 + u.completion_tokens * 2.0) / 1000)


def test_extra_body_fields_reach_the_server_at_the_top_level_as_with_the_openai_client():
    # how a grammar or a repeat penalty reaches the embedded server (ModelProfile.extra_body)
    with FakeOpenAIServer(lambda model, msgs, body: "ok") as srv, httpx.Client() as http:
        _ask(_wrapper(srv.url, http, extra_body={"grammar": 'root ::= "ok"', "top_k": 20}), "x")
    (sent,) = srv.requests
    assert sent["grammar"] == 'root ::= "ok"' and sent["top_k"] == 20 and "extra_body" not in sent


def test_a_tool_call_comes_back_as_a_message_with_tool_calls():
    def answer(model: str, msgs: list[dict[str, Any]], body: dict[str, Any]) -> Any:
        return {"tool_calls": [{"name": "lookup", "arguments": {"q": msgs[-1]["content"]}}]}

    with FakeOpenAIServer(answer) as srv, httpx.Client() as http:
        w = _wrapper(srv.url, http)
        reply = _ask(w, "rows")
    (msg,) = w.extract_text_or_completion_object(reply)
    (call,) = msg.tool_calls
    assert call.function.name == "lookup" and json.loads(call.function.arguments) == {"q": "rows"}


def test_a_500_then_success_is_retried():
    with FakeOpenAIServer(lambda *a: "fine", failures=[500]) as srv, httpx.Client() as http:
        w = _wrapper(srv.url, http)
        reply = _ask(w, "x")
    assert w.extract_text_or_completion_object(reply) == ["fine"]


def test_failures_beyond_max_retries_raise_naming_the_endpoint():
    server = FakeOpenAIServer(lambda *a: "fine", failures=[503, 503])
    with server as srv, httpx.Client() as http, pytest.raises(LLMError, match="HTTP 503") as info:
        _ask(_wrapper(srv.url, http, max_retries=1), "x")
    assert srv.url in str(info.value)


class _RawServer:
    """A loopback server answering every POST with a fixed body; keeps the headers it saw."""

    def __init__(self, body: bytes):
        seen: list[dict[str, str]] = []
        self.seen = seen

        class H(BaseHTTPRequestHandler):
            def log_message(self, *a: Any) -> None:
                pass

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                seen.append(dict(self.headers))
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self._srv = ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.url = f"http://127.0.0.1:{self._srv.server_address[1]}/v1"
        threading.Thread(target=self._srv.serve_forever, daemon=True).start()

    def __enter__(self) -> _RawServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self._srv.shutdown()
        self._srv.server_close()


_GOOD = {"id": "c1", "model": "m", "choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"}}]}


def test_the_api_key_is_sent_as_a_bearer_header():
    with _RawServer(json.dumps(_GOOD).encode()) as srv, httpx.Client() as http:
        _ask(_wrapper(srv.url, http), "x")
    assert srv.seen[0]["Authorization"] == "Bearer sk-test"


@pytest.mark.parametrize(
    ("body", "problem"),
    [
        (b"{not json", "not JSON"),
        (json.dumps({"id": "c1", "model": "m"}).encode(), "'choices' is missing"),
        (json.dumps({**_GOOD, "usage": {"prompt_tokens": "many"}}).encode(), "'usage'"),
    ],
)
def test_a_malformed_reply_gives_one_clear_error_naming_the_endpoint(body: bytes, problem: str):
    with _RawServer(body) as srv, httpx.Client() as http, pytest.raises(MalformedReplyError, match=problem) as info:
        _ask(_wrapper(srv.url, http), "x")
    assert srv.url in str(info.value)


def test_concurrent_calls_each_get_their_own_reply():
    server = FakeOpenAIServer(lambda m, msgs, b: f"echo {msgs[-1]['content']}", latency_s=0.05)
    with server as srv, httpx.Client() as http, ThreadPoolExecutor(16) as pool:
        w = _wrapper(srv.url, http)
        got = list(pool.map(lambda i: _ask(w, f"q{i}"), range(32)))
    assert [w.extract_text_or_completion_object(r) for r in got] == [[f"echo q{i}"] for i in range(32)]


def test_a_refused_connection_is_retried_then_reported():
    with FakeOpenAIServer(lambda *a: "x") as srv:
        url = srv.url  # closed below: nothing listens on this port any more
    with httpx.Client() as http, pytest.raises(LLMError, match="ConnectError after 2 attempts"):
        _ask(_wrapper(url, http, max_retries=1), "x")


def _flow() -> Any:
    from stateflow import LLM, Flow, Prompt, State, Transition

    ask = State("Ask", Prompt("Answer."), LLM())
    end = State("End", final=True)
    return Flow("one-call", initial=ask, transitions=[Transition(ask, end)])


def test_many_aruns_at_once_on_the_lean_client_each_keep_their_own_transcript():
    import asyncio

    from stateflow import ModelProfile
    from stateflow.backends.http import HttpClients
    from stateflow.live import arun

    def answer(model: str, msgs: list[dict[str, Any]], body: dict[str, Any]) -> str:
        task = next(m["content"] for m in msgs if "Task" in (m.get("content") or ""))
        return f"reply to {task.split('Task ')[-1].split()[0]}"

    async def main(url: str, http: HttpClients) -> list[Any]:
        prof = ModelProfile(name="lean", model="m", provider="llamacpp", base_url=url, api_key_env=None, client="lean")
        return await asyncio.gather(*(arun(_flow(), f"Task {i} now", models=prof, http=http) for i in range(20)))

    with FakeOpenAIServer(answer, latency_s=0.05) as srv, HttpClients() as http:
        results = asyncio.run(main(srv.url, http))
    for i, r in enumerate(results):
        (step,) = [s for s in r.steps if s.output == "llm"]
        assert step.message.content == f"reply to {i}" and step.usage.prompt_tokens > 0

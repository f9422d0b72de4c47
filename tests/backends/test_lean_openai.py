"""LeanChatClient over real HTTP on the loopback: replies, tool calls, usage, retries, bad replies."""

from __future__ import annotations

import contextlib
import json
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from email.utils import format_datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import openai
import pytest
from autogen import OpenAIWrapper

from stateflow.backends.lean_openai import MAX_RETRY_AFTER_S, LeanChatClient, MalformedReplyError, retry_after_s
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


def test_failures_beyond_max_retries_raise_the_openai_error_naming_the_endpoint():
    server = FakeOpenAIServer(lambda *a: "fine", failures=[503, 503])
    with server as srv, httpx.Client() as http, pytest.raises(openai.InternalServerError, match="503") as info:
        _ask(_wrapper(srv.url, http, max_retries=1), "x")
    assert srv.url in str(info.value) and info.value.status_code == 503


_GOOD = {"id": "c1", "model": "m", "choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"}}]}


def test_the_api_key_is_sent_as_a_bearer_header():
    with _answering(json.dumps(_GOOD).encode()) as srv, httpx.Client() as http:
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
    with _answering(body) as srv, httpx.Client() as http, pytest.raises(MalformedReplyError, match=problem) as info:
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
    with httpx.Client() as http, pytest.raises(openai.APIConnectionError, match="ConnectError after 2 attempts"):
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


def _answering(body: bytes) -> _ScriptedServer:
    """A server answering every POST with ``body`` (status 200)."""
    return _ScriptedServer([(200, {}, body, 0.0)])


class _ScriptedServer:
    """A loopback server answering POSTs from a script of (status, headers, body, delay_s); the
    last entry answers every later request. Keeps each request's arrival time and headers."""

    def __init__(self, script: list[tuple[int, dict[str, str], bytes, float]]):
        self.arrivals: list[float] = []
        self.seen: list[dict[str, str]] = []
        arrivals, seen, lock = self.arrivals, self.seen, threading.Lock()

        class H(BaseHTTPRequestHandler):
            def log_message(self, *a: Any) -> None:
                pass

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                with lock:
                    arrivals.append(time.monotonic())
                    seen.append(dict(self.headers))
                    status, headers, body, delay = script[min(len(arrivals), len(script)) - 1]
                time.sleep(delay)
                self.send_response(status)
                for k, v in {"Content-Type": "application/json", **headers}.items():
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                with contextlib.suppress(OSError):  # the client gave up (the timeout test)
                    self.wfile.write(body)

        self._srv = ThreadingHTTPServer(("127.0.0.1", 0), H)
        self._srv.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._srv.server_address[1]}/v1"
        threading.Thread(target=self._srv.serve_forever, daemon=True).start()

    def __enter__(self) -> _ScriptedServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self._srv.shutdown()
        self._srv.server_close()


_OK = (200, {}, json.dumps(_GOOD).encode(), 0.0)


def _error(status: int, **headers: str) -> tuple[int, dict[str, str], bytes, float]:
    return (status, headers, json.dumps({"error": {"message": f"status {status}", "code": None}}).encode(), 0.0)


@pytest.mark.parametrize("header", [{"retry-after": "0.6"}, {"retry-after-ms": "600"}])
def test_a_429_waits_as_long_as_retry_after_asks(header: dict[str, str]):
    # the back-off alone would wait 0.375-0.5 s before the first retry: 0.6 s is the server's
    with _ScriptedServer([_error(429, **header), _OK]) as srv, httpx.Client() as http:
        reply = _ask(_wrapper(srv.url, http), "x")
    assert reply.choices[0].message.content == "ok"
    first, second = srv.arrivals
    assert second - first >= 0.6


def test_a_retry_after_beyond_two_minutes_is_not_waited_for():
    too_long = str(int(MAX_RETRY_AFTER_S) + 1)
    script = [_error(429, **{"retry-after": too_long}), _OK]
    with _ScriptedServer(script) as srv, httpx.Client() as http, pytest.raises(openai.RateLimitError, match="429"):
        _ask(_wrapper(srv.url, http), "x")
    assert len(srv.arrivals) == 1


def test_the_server_s_x_should_retry_overrides_the_status():
    script = [_error(503, **{"x-should-retry": "false"}), _OK]
    with _ScriptedServer(script) as srv, httpx.Client() as http, pytest.raises(openai.InternalServerError):
        _ask(_wrapper(srv.url, http), "x")
    assert len(srv.arrivals) == 1
    # a 400 is never retried unless the server says so
    with _ScriptedServer([_error(400, **{"x-should-retry": "true"}), _OK]) as srv, httpx.Client() as http:
        reply = _ask(_wrapper(srv.url, http), "x")
    assert reply.choices[0].message.content == "ok" and len(srv.arrivals) == 2


def test_retry_after_s_reads_milliseconds_seconds_and_http_dates():
    h = httpx.Headers
    assert retry_after_s(h({"retry-after-ms": "250"})) == 0.25
    assert retry_after_s(h({"retry-after": "3"})) == 3.0
    soon = datetime_in(30)
    assert 25 < (retry_after_s(h({"retry-after": soon})) or 0) <= 30
    # unreadable or non-finite values ask for nothing; milliseconds win over seconds
    assert retry_after_s(h({"retry-after": "soon"})) is None
    assert retry_after_s(h({"retry-after": "nan"})) is None
    assert retry_after_s(h({"retry-after-ms": "x", "retry-after": "2"})) == 2.0
    assert retry_after_s(h({})) is None


def datetime_in(seconds: float) -> str:
    from datetime import UTC, datetime, timedelta

    return format_datetime(datetime.now(UTC) + timedelta(seconds=seconds), usegmt=True)


def _run_with(client: str, url: str, **profile: Any) -> BaseException:
    from stateflow import ModelProfile, run

    prof = ModelProfile(
        name=f"p-{client}", model="m", provider="llamacpp", base_url=url, api_key_env=None, client=client, **profile
    )
    with pytest.raises(LLMError) as info:
        run(_flow(), "Task", models=prof)
    assert f"profile 'p-{client}'" in str(info.value)
    return info.value


def _failed_type(err: BaseException) -> str:
    # "model call to profile 'p' failed: RateLimitError: ..." -> "RateLimitError"
    return str(err).split(" failed: ", 1)[1].split(":", 1)[0]


@pytest.mark.parametrize("status", [400, 401, 403, 404, 409, 422, 429, 500, 502, 418])
def test_an_error_status_fails_a_run_exactly_as_with_the_openai_client(status: int):
    failed: dict[str, str] = {}
    for client in ("openai", "lean"):
        with _ScriptedServer([_error(status)]) as srv:
            err = _run_with(client, srv.url, max_retries=0)
        failed[client] = _failed_type(err)
        assert len(srv.arrivals) == 1  # no retries asked for
    assert failed["lean"] == failed["openai"] != ""


def test_a_timeout_fails_a_run_exactly_as_with_the_openai_client():
    failed: dict[str, str] = {}
    for client in ("openai", "lean"):
        with _ScriptedServer([(200, {}, json.dumps(_GOOD).encode(), 2.0)]) as srv:
            err = _run_with(client, srv.url, max_retries=0, timeout=0.3)
        failed[client] = _failed_type(err)
    # AutoGen turns the openai client's APITimeoutError into its own TimeoutError
    assert failed["lean"] == failed["openai"] == "TimeoutError"


@pytest.mark.parametrize(
    ("profile", "lean"),
    [
        ({"provider": "local", "local_model": "qwen2.5-coder-0.5b"}, True),
        ({"provider": "llamacpp", "base_url": "http://127.0.0.1:9/v1"}, True),
        ({"provider": "openai", "base_url": "http://127.0.0.1:9/v1"}, True),  # a compatible server
        ({"provider": "openai"}, False),  # OpenAI's own API keeps the openai library
        ({"provider": "openai", "base_url": "https://api.openai.com/v1"}, False),
        ({"provider": "vllm", "base_url": "http://127.0.0.1:9/v1", "client": "openai"}, False),
        ({"provider": "openai", "client": "lean"}, True),
    ],
)
def test_the_auto_client_is_lean_except_on_openai_s_own_api(profile: dict[str, Any], lean: bool):
    from stateflow import ModelProfile

    assert ModelProfile(name="p", model="m", **profile).uses_lean_client() is lean


def test_a_default_profile_on_a_compatible_server_calls_it_through_the_lean_client():
    from stateflow import ModelProfile, run
    from stateflow.backends.http import HttpClients

    # one server and one shared pool for both runs: the profiles differ only in their client, so
    # a wrapper shared by settings alone would serve the second run with the first one's client
    with HttpClients() as http, _answering(json.dumps(_GOOD).encode()) as srv:
        prof = ModelProfile(name="p", model="m", provider="llamacpp", base_url=srv.url, api_key_env=None)
        run(_flow(), "Task", models=prof, http=http)
        run(_flow(), "Task", models=prof.with_overrides(client="openai"), http=http)
    auto, openai_client = ({k.lower(): v for k, v in h.items()} for h in srv.seen)
    # the openai library announces itself; the lean client sends httpx's plain headers
    assert "x-stainless-lang" in openai_client
    assert "x-stainless-lang" not in auto

"""A fake OpenAI-compatible HTTP server on 127.0.0.1, for tests and benchmarks (opt-in only).

AutoGen talks to it for real over HTTP (``base_url=server.url``). Replies are chosen by a
``responder(model, messages, body) -> str`` function and cut at the request's ``stop`` sequences,
as a real server does; errors can be injected per request to test retries. Every request body is
recorded. A responder may also return ``{"tool_calls": [{"name": ..., "arguments": {...}}]}``
(optionally with ``"content"``): the reply then carries OpenAI ``tool_calls`` with
``finish_reason="tool_calls"``, as a server with function calling does.

A request with ``"stream": true`` is answered with server-sent events (``text/event-stream``,
chunked), as OpenAI's API and llama.cpp's server do: one ``chat.completion.chunk`` per word of the
reply (``chunk_delay_s`` apart), tool calls as deltas, a usage chunk when
``stream_options.include_usage`` asks for it, then ``data: [DONE]``. A client that goes away
mid-stream is noticed at the next chunk: :attr:`FakeOpenAIServer.active` counts the completions
in flight and :attr:`FakeOpenAIServer.aborted` those whose client left before the end.

>>> from stateflow.testing.fake_openai import FakeOpenAIServer
>>> with FakeOpenAIServer(lambda model, messages, body: "pong") as srv:
...     import openai
...     client = openai.OpenAI(base_url=srv.url, api_key="x")
...     reply = client.chat.completions.create(model="m", messages=[{"role": "user", "content": "ping"}])
...     reply.choices[0].message.content
'pong'
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["FakeOpenAIServer", "Responder"]

Responder = Callable[[str, list[dict[str, Any]], dict[str, Any]], "str | dict[str, Any]"]


def _tool_call_message(reply: dict[str, Any]) -> tuple[dict[str, Any], str]:
    """An assistant message with ``tool_calls`` (ids are unique per call) and its text."""
    calls = []
    for i, call in enumerate(reply.get("tool_calls") or []):
        args = call.get("arguments", {})
        calls.append(
            {
                "id": f"call_{time.monotonic_ns()}_{i}",
                "type": "function",
                "function": {"name": call["name"], "arguments": args if isinstance(args, str) else json.dumps(args)},
            }
        )
    text = str(reply.get("content") or "")
    return {"role": "assistant", "content": text or None, "tool_calls": calls}, text


class _QuietServer(ThreadingHTTPServer):
    """A client that closes its keep-alive connection (or leaves mid-stream) is normal here: no
    traceback for it on stderr; any other handler error is still printed."""

    # socketserver's listen backlog is 5: 50 clients connecting at once overflowed it (the kernel
    # dropped their SYNs, retried after 1 s, or reset them). Model servers listen with a long
    # backlog (uvicorn's is 2048), so the fake one does too.
    request_queue_size = 128

    def handle_error(self, request: Any, client_address: Any) -> None:
        import sys

        if isinstance(sys.exc_info()[1], ConnectionError):
            return
        super().handle_error(request, client_address)


class FakeOpenAIServer:
    """A threaded HTTP server implementing ``POST /v1/chat/completions`` and ``GET /v1/models``.

    Args:
        responder: picks the reply text for a request (by model name, messages, full body).
        latency_s: sleep this long before answering each completion (simulates a slow model).
        failures: HTTP status codes returned, in order, by the first completion requests
            (e.g. ``[429, 503]`` makes the first two calls fail), to exercise client retries.
        chunk_delay_s: with ``stream``, the pause between two chunks (simulates decoding).
        prefix_cache: report ``usage.prompt_tokens_details.cached_tokens`` as a server with a
            prompt cache does: the longest prefix (in tokens, here words) that the prompt shares
            with any earlier request; :attr:`cached_counts` keeps what was reported.
    """

    def __init__(
        self,
        responder: Responder,
        *,
        latency_s: float = 0.0,
        failures: list[int] | None = None,
        chunk_delay_s: float = 0.0,
        prefix_cache: bool = False,
    ):
        self.responder = responder
        self.latency_s = latency_s
        self.chunk_delay_s = chunk_delay_s
        self.prefix_cache = prefix_cache
        #: ``(prompt tokens, cached tokens)`` of each answered completion, with ``prefix_cache``
        self.cached_counts: list[tuple[int, int]] = []
        self._seen: list[list[str]] = []
        #: completions being answered now, and streams whose client disconnected before the end
        self.active = 0
        self.aborted = 0
        self._failures = list(failures or [])
        self._lock = threading.Lock()
        self.requests: list[dict[str, Any]] = []
        #: ``(prompt tokens, completion tokens)`` of each completion answered (failures excluded), in order
        self.billed: list[tuple[int, int]] = []
        #: the client ``(host, port)`` of each completion request, in order: one port per TCP
        #: connection, so tests can see whether clients share a connection pool.
        self.peers: list[tuple[str, int]] = []
        self._server = _QuietServer(("127.0.0.1", 0), self._handler_class())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name="fake-openai", daemon=True)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}/v1"

    def start(self) -> FakeOpenAIServer:
        """Start serving in a background thread (``with`` does this too); returns self."""
        self._thread.start()
        return self

    def __enter__(self) -> FakeOpenAIServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def _next_failure(self) -> int | None:
        with self._lock:
            return self._failures.pop(0) if self._failures else None

    def _count(self, active: int, aborted: int = 0) -> None:
        with self._lock:
            self.active += active
            self.aborted += aborted

    def _cached(self, words: list[str]) -> int:
        """Words of ``words`` a prefix cache holds (see ``prefix_cache``); remembers ``words``."""
        with self._lock:
            best = 0
            for seen in self._seen:
                n = 0
                for a, b in zip(seen, words, strict=False):
                    if a != b:
                        break
                    n += 1
                best = max(best, n)
            self._seen.append(words)
            # a fully cached prompt still evaluates its last token (as llama.cpp does)
            cached = min(best, len(words) - 1) if words else 0
            self.cached_counts.append((len(words), cached))
            return cached

    def _record(self, body: dict[str, Any], peer: tuple[str, int]) -> None:
        with self._lock:
            self.requests.append(body)
            self.peers.append(peer)

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True  # headers and body go out in two writes

            def log_message(self, format: str, *args: Any) -> None:  # quiet
                pass

            def _send(self, status: int, payload: dict[str, Any]) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                if self.path.rstrip("/").endswith("/models"):
                    self._send(200, {"object": "list", "data": [{"id": "fake", "object": "model"}]})
                else:
                    self._send(404, {"error": {"message": "not found"}})

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                data = self.rfile.read(length)
                if len(data) < length:
                    # The client died mid-request (e.g. a test's kill -9 between the headers and
                    # the body): no request arrived, so none is recorded or answered.
                    return
                try:
                    body = json.loads(data or b"{}")
                except json.JSONDecodeError:
                    self._send(400, {"error": {"message": "invalid JSON"}})
                    return
                if not self.path.rstrip("/").endswith("/chat/completions"):
                    self._send(404, {"error": {"message": f"no route {self.path}"}})
                    return
                server._record(body, (str(self.client_address[0]), int(self.client_address[1])))
                failure = server._next_failure()
                if failure is not None:
                    self._send(failure, {"error": {"message": f"injected failure {failure}", "type": "server_error"}})
                    return
                server._count(+1)
                try:
                    self._complete(body)
                finally:
                    server._count(-1)

            def _complete(self, body: dict[str, Any]) -> None:
                if server.latency_s:
                    time.sleep(server.latency_s)
                messages = body.get("messages", [])
                reply = server.responder(body.get("model", ""), messages, body)
                if isinstance(reply, dict):
                    message, text = _tool_call_message(reply)
                    finish = "tool_calls"
                else:
                    text, finish = reply, "stop"
                    stop = body.get("stop") or []
                    for s in [stop] if isinstance(stop, str) else stop:
                        if s and s in text:  # like a real server: cut at the first stop sequence
                            text = text[: text.index(s)]
                    message = {"role": "assistant", "content": text}
                words = [w for m in messages for w in [f"<{m.get('role')}>", *str(m.get("content") or "").split()]]
                prompt_tokens = sum(len(str(m.get("content") or "").split()) for m in messages)
                completion_tokens = len(text.split())
                usage: dict[str, Any] = {
                    "prompt_tokens": prompt_tokens,
                    "completion_tokens": completion_tokens,
                    "total_tokens": prompt_tokens + completion_tokens,
                }
                if server.prefix_cache:
                    usage["prompt_tokens"] = len(words)
                    usage["total_tokens"] = len(words) + completion_tokens
                    usage["prompt_tokens_details"] = {"cached_tokens": server._cached(words)}
                with server._lock:  # what was billed: a usage-conservation test's ground truth
                    server.billed.append((usage["prompt_tokens"], usage["completion_tokens"]))
                model = body.get("model", "fake")
                head = {"id": f"fake-{time.monotonic_ns()}", "created": int(time.time()), "model": model}
                if body.get("stream"):
                    include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
                    self._stream(head, message, finish, usage if include_usage else None)
                    return
                choice = {"index": 0, "finish_reason": finish, "message": message}
                self._send(200, {**head, "object": "chat.completion", "choices": [choice], "usage": usage})

            def _chunk(self, payload: dict[str, Any] | str) -> None:
                data = payload if isinstance(payload, str) else json.dumps(payload)
                frame = f"data: {data}\n\n".encode()
                # HTTP/1.1 chunked transfer encoding: the length of each piece, then the piece
                self.wfile.write(f"{len(frame):x}\r\n".encode() + frame + b"\r\n")
                self.wfile.flush()

            def _stream(
                self, head: dict[str, Any], message: dict[str, Any], finish: str, usage: dict[str, Any] | None
            ) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                base = {**head, "object": "chat.completion.chunk"}
                deltas: list[dict[str, Any]] = [{"role": "assistant", "content": ""}]
                deltas += [{"content": piece} for piece in re.findall(r"\s*\S+\s*|\s+", message.get("content") or "")]
                for i, call in enumerate(message.get("tool_calls") or []):
                    deltas.append({"tool_calls": [{"index": i, **call}]})
                try:
                    for n, delta in enumerate(deltas):
                        if n and server.chunk_delay_s:
                            time.sleep(server.chunk_delay_s)
                        self._chunk({**base, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]})
                    self._chunk({**base, "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]})
                    if usage is not None:
                        self._chunk({**base, "choices": [], "usage": usage})
                    self._chunk("[DONE]")
                    self.wfile.write(b"0\r\n\r\n")
                    self.wfile.flush()
                except (BrokenPipeError, ConnectionResetError):
                    server._count(0, aborted=1)
                    self.close_connection = True

        return Handler

"""ShardedTransport keeps one pool's limits and connection reuse over several pools, over real
HTTP on the loopback; HttpClients uses it unless the environment names a proxy."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest

from stateflow.backends.http import HttpClients
from stateflow.backends.sharded_transport import ShardedTransport
from stateflow.testing.fake_openai import FakeOpenAIServer

_BODY = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}


class _Concurrency:
    """A responder that holds each request ``hold`` seconds and records the most held at once."""

    def __init__(self, hold: float):
        self.hold = hold
        self.now = self.peak = 0
        self._lock = threading.Lock()

    def __call__(self, model: str, messages: list[dict[str, Any]], body: dict[str, Any]) -> str:
        with self._lock:
            self.now += 1
            self.peak = max(self.peak, self.now)
        time.sleep(self.hold)
        with self._lock:
            self.now -= 1
        return "ok"


def _post_many(client: httpx.Client, url: str, n: int) -> list[int]:
    with ThreadPoolExecutor(n) as pool:
        return list(pool.map(lambda _: client.post(f"{url}/chat/completions", json=_BODY).status_code, range(n)))


def test_capacities_split_the_limit_and_never_exceed_it():
    assert ShardedTransport(max_connections=64, shards=8).capacities == (8,) * 8
    assert ShardedTransport(max_connections=10, shards=4).capacities == (3, 3, 2, 2)
    assert ShardedTransport(max_connections=3, shards=8).capacities == (1, 1, 1)
    with pytest.raises(ValueError, match="max_connections and shards"):
        ShardedTransport(max_connections=0)


def test_requests_use_every_free_connection_and_no_more_and_reuse_them():
    # 6 connections over 3 pools of 2: 6 requests at once must all be served at once (a request
    # waits only when every pool is full), 12 at once no more than 6 at a time, and three waves
    # reuse the same 6 connections (each pool keeps its connections alive).
    seen = _Concurrency(hold=0.3)
    transport = ShardedTransport(max_connections=6, shards=3)
    with FakeOpenAIServer(seen) as srv, httpx.Client(transport=transport) as client:
        assert _post_many(client, srv.url, 6) == [200] * 6
        assert seen.peak == 6
        seen.peak = 0
        assert _post_many(client, srv.url, 12) == [200] * 12
        assert seen.peak == 6
        assert _post_many(client, srv.url, 6) == [200] * 6
        assert len(set(srv.peers)) == 6
        assert transport.in_flight() == (0, 0, 0)


def test_a_streamed_reply_holds_its_connection_until_closed_and_a_failure_gives_it_back():
    transport = ShardedTransport(max_connections=2, shards=2)
    with FakeOpenAIServer(lambda *a: "one two three") as srv, httpx.Client(transport=transport) as client:
        with client.stream("POST", f"{srv.url}/chat/completions", json={**_BODY, "stream": True}) as resp:
            assert resp.status_code == 200
            assert sorted(transport.in_flight()) == [0, 1]
            assert b"three" in resp.read()
        assert transport.in_flight() == (0, 0)
    dead = ShardedTransport(max_connections=2, shards=2)
    with httpx.Client(transport=dead) as client, pytest.raises(httpx.ConnectError):
        client.post("http://127.0.0.1:1/v1/chat/completions", json=_BODY)
    assert dead.in_flight() == (0, 0)


def test_http_clients_go_through_a_proxy_named_in_the_environment(monkeypatch):
    for var in ("NO_PROXY", "no_proxy", "ALL_PROXY", "all_proxy", "HTTPS_PROXY", "https_proxy"):
        monkeypatch.delenv(var, raising=False)
    with FakeOpenAIServer(lambda *a: "ok") as srv:
        monkeypatch.delenv("HTTP_PROXY", raising=False)
        monkeypatch.delenv("http_proxy", raising=False)
        with HttpClients() as http:
            assert http.get(srv.url, 5.0).post(f"{srv.url}/chat/completions", json=_BODY).status_code == 200
        # A proxy that refuses connections: the request must try it rather than go direct.
        monkeypatch.setenv("HTTP_PROXY", "http://127.0.0.1:1")
        with HttpClients() as http, pytest.raises((httpx.ProxyError, httpx.ConnectError)):
            http.get(srv.url, 5.0).post(f"{srv.url}/chat/completions", json=_BODY)
        assert len(srv.requests) == 1

"""Browser-safe by default (issue 59 part 1), over plain HTTP: each refusal of `ServeGuard` with
its status, nothing run and nothing recorded; what is allowed still works, with the official
clients the other serve tests use (an httpx SSE reader, AG2's `A2aRemoteAgent`)."""

from __future__ import annotations

import asyncio
import uuid

import httpx
import pytest

from stateflow import LLM, Flow, Prompt, State, Transition
from stateflow.errors import ConfigError
from stateflow.serve import ServeAccess
from stateflow.serve.guard import is_loopback
from tests.serve.served import agui_input, served

TOKEN = "t0ken-for-the-tests-0123456789"


def _flow() -> Flow:
    ask = State("Ask", Prompt("Talk."), LLM())
    return Flow("plain", initial=ask, transitions=[Transition(ask, State("Done", final=True))])


def _reply(model, messages, body):
    return "hello"


def _a2a_body(text: str = "hi", context: str = "c1") -> dict:
    message = {"role": "user", "parts": [{"kind": "text", "text": text}], "messageId": uuid.uuid4().hex,
               "contextId": context}  # fmt: skip
    return {"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": {"message": message}}


def _nothing_ran(srv, store) -> None:
    assert srv.requests == []  # no model call
    assert store.threads() == []  # no thread recorded


def test_a_host_that_is_not_allowed_gets_421_and_nothing_runs():
    with served(_flow(), _reply) as (base, srv, store):
        port = base.rsplit(":", 1)[1]
        for host in ("evil.example", f"evil.example:{port}", f"127.0.0.1.nip.io:{port}", "localhost:x", ""):
            r = httpx.post(f"{base}/agui", json=agui_input("t"), headers={"host": host})
            assert r.status_code == 421, (host, r.text)
            assert "not served here" in r.json()["error"] and "--allow-host" in r.json()["error"]
            r = httpx.post(f"{base}/a2a/", json=_a2a_body(), headers={"host": host})
            assert r.status_code == 421, host
            assert httpx.get(f"{base}/health", headers={"host": host}).status_code == 421  # reads too
        _nothing_ran(srv, store)
        for host in (f"localhost:{port}", f"LOCALHOST:{port}", f"[::1]:{port}", "127.0.0.1"):
            assert httpx.get(f"{base}/health", headers={"host": host}).status_code == 200, host


def test_allowed_hosts_are_configurable():
    with served(_flow(), _reply, access=ServeAccess(hosts=("myserver.lan",))) as (base, _srv, _store):
        assert httpx.get(f"{base}/health", headers={"host": "myserver.lan:80"}).status_code == 200
        assert httpx.get(f"{base}/health").status_code == 421  # the defaults were replaced
    with pytest.raises(ConfigError, match="without scheme or port"):
        ServeAccess(hosts=("http://myserver.lan",))
    with pytest.raises(ConfigError, match="without scheme or port"):
        ServeAccess(hosts=("myserver.lan:8321",))
    assert ServeAccess(hosts=("::1", "LocalHost")).hosts == ("[::1]", "localhost")


def test_a_foreign_origin_gets_403_on_every_state_changing_request():
    with served(_flow(), _reply) as (base, srv, store):
        for origin in ("http://evil.example", "http://127.0.0.1:1", "http://localhost", "null", "file://"):
            r = httpx.post(f"{base}/agui", json=agui_input("t"), headers={"origin": origin})
            assert r.status_code == 403, (origin, r.text)
            assert "may not call this server" in r.json()["error"]
            assert httpx.post(f"{base}/a2a/", json=_a2a_body(), headers={"origin": origin}).status_code == 403
            r = httpx.options(f"{base}/agui", headers={"origin": origin, "access-control-request-method": "POST"})
            assert r.status_code == 403 and "access-control-allow-origin" not in r.headers  # no preflight pass
        _nothing_ran(srv, store)
        # a read from a foreign page is answered without CORS headers: the browser hides it
        r = httpx.get(f"{base}/health", headers={"origin": "http://evil.example"})
        assert r.status_code == 200 and "access-control-allow-origin" not in r.headers
        # the server's own origin, and no Origin at all (a program, not a page), may post
        r = httpx.post(f"{base}/agui", json=agui_input("own"), headers={"origin": base})
        assert r.status_code == 200 and '"RUN_FINISHED"' in r.text
        assert httpx.post(f"{base}/agui", json=agui_input("none")).status_code == 200
        assert len(srv.requests) == 2


def test_a_configured_origin_may_call_the_server_and_gets_cors_answers():
    front = "http://localhost:3000"
    with served(_flow(), _reply, access=ServeAccess(origins=(front + "/",))) as (base, _srv, _store):
        r = httpx.options(
            f"{base}/agui",
            headers={"origin": front, "access-control-request-method": "POST", "access-control-request-headers": "x"},
        )
        assert r.status_code == 204 and r.headers["access-control-allow-origin"] == front
        assert "content-type" in r.headers["access-control-allow-headers"]
        r = httpx.post(f"{base}/agui", json=agui_input("front"), headers={"origin": front})
        assert r.status_code == 200 and r.headers["access-control-allow-origin"] == front
        assert r.headers["vary"].lower() == "origin"
        r = httpx.post(f"{base}/agui", json=agui_input("other"), headers={"origin": "http://localhost:3001"})
        assert r.status_code == 403
    with pytest.raises(ConfigError, match="scheme://host"):
        ServeAccess(origins=("localhost:3000",))


@pytest.mark.parametrize(
    "content_type",
    [
        "text/plain",
        "text/plain;charset=UTF-8",
        "application/x-www-form-urlencoded",
        "multipart/form-data; boundary=x",
        None,
        "application/jsonx",
    ],
)
def test_a_body_that_is_not_json_gets_415(content_type):
    import json

    with served(_flow(), _reply) as (base, srv, store):
        headers = {} if content_type is None else {"content-type": content_type}
        for path, body in (("/agui", agui_input("t")), ("/a2a/", _a2a_body())):
            r = httpx.post(f"{base}{path}", content=json.dumps(body).encode(), headers=headers)
            assert r.status_code == 415, (path, r.text)
            assert "application/json" in r.json()["error"]
        _nothing_ran(srv, store)
        ok = {"content-type": "application/json; charset=utf-8"}
        assert httpx.post(f"{base}/agui", content=json.dumps(agui_input("ok")), headers=ok).status_code == 200


def test_with_a_token_every_request_needs_it():
    from autogen.a2a import A2aRemoteAgent, HttpxClientFactory

    with served(_flow(), _reply, access=ServeAccess(token=TOKEN)) as (base, srv, store):
        for headers in ({}, {"authorization": "Bearer wrong-token-0123456789"}, {"authorization": TOKEN},
                        {"authorization": f"Basic {TOKEN}"}):  # fmt: skip
            r = httpx.post(f"{base}/agui", json=agui_input("t"), headers=headers)
            assert r.status_code == 401 and r.headers["www-authenticate"] == "Bearer", headers
            assert TOKEN not in r.text and "Authorization: Bearer TOKEN" in r.json()["error"]
            assert httpx.post(f"{base}/a2a/", json=_a2a_body(), headers=headers).status_code == 401
            assert httpx.get(f"{base}/a2a/.well-known/agent-card.json", headers=headers).status_code == 401
            assert httpx.get(f"{base}/threads/t", headers=headers).status_code == 401
        _nothing_ran(srv, store)
        auth = {"authorization": f"Bearer {TOKEN}"}
        with httpx.stream("POST", f"{base}/agui", json=agui_input("t"), headers=auth, timeout=30) as r:
            assert r.status_code == 200
            assert any('"RUN_FINISHED"' in line for line in r.iter_lines())
        card = httpx.get(f"{base}/a2a/.well-known/agent-card.json", headers=auth).json()
        declared = card["securitySchemes"]["bearer"]  # the card declares the token (0.3 and 1.x fields)
        assert declared["scheme"] == "bearer" and declared["httpAuthSecurityScheme"]["scheme"] == "bearer"
        assert card["security"] == [{"bearer": []}]
        # AG2's A2A client, given the header, works as without a token
        remote = A2aRemoteAgent(url=f"{base}/a2a", name="remote", client=HttpxClientFactory(headers=auth))
        ok, reply = asyncio.run(remote.a_generate_remote_reply(messages=[{"role": "user", "content": "hi"}]))
        assert ok and reply is not None and reply["content"] == "hello"
        assert len(store.threads()) == 2


def test_a_token_is_checked_and_never_shown():
    access = ServeAccess(token=TOKEN)
    assert TOKEN not in repr(access)
    for bad in ("short", "has a space in it 0123456789", "tab\tin-it-0123456789abc"):
        with pytest.raises(ConfigError, match="at least 16 visible ASCII") as err:
            ServeAccess(token=bad)
        assert bad not in str(err.value)


def test_loopback_addresses():
    assert all(is_loopback(h) for h in ("127.0.0.1", "127.1.2.3", "::1", "[::1]", "localhost", "LOCALHOST"))
    assert not any(is_loopback(h) for h in ("0.0.0.0", "::", "192.168.1.5", "example.com", "localhost.evil"))


def test_serve_refuses_a_non_loopback_address_without_a_token():
    from stateflow import MemoryCheckpointer
    from stateflow.serve import FlowService, serve

    with pytest.raises(ConfigError, match="serves other machines: give a token"):
        serve(FlowService(_flow(), MemoryCheckpointer()), host="0.0.0.0", port=1)


def test_a_header_that_decides_a_check_may_not_come_twice():
    with served(_flow(), _reply) as (base, srv, store):
        for name, values in (
            ("origin", ["http://evil.example", base]),
            ("content-type", ["text/plain", "application/json"]),
        ):
            headers = [(name, v) for v in values] + [("accept", "text/event-stream")]
            r = httpx.post(f"{base}/agui", json=agui_input("t"), headers=httpx.Headers(headers))
            assert r.status_code == 400 and f"more than one '{name}'" in r.json()["error"], r.text
        _nothing_ran(srv, store)

"""`stateflow serve` end to end on the loopback: an SSE client reading the AG-UI stream, AG2's
own A2A client calling the served flow, durable threads answered over HTTP, bad requests,
disconnects and concurrent requests for one thread. The model is the fake OpenAI server."""

from __future__ import annotations

import asyncio
import json
import threading
import time
import uuid

import httpx

from stateflow import LLM, Flow, Human, ModelProfile, Prompt, State, Transition, run
from tests.serve.served import JSON as _JSON
from tests.serve.served import agui_input as _input
from tests.serve.served import served as _served
from tests.serve.served import server_tasks as _server_tasks


def ping(host: str) -> str:
    """Ping a host."""
    return f"{host} is up"


def _flow() -> Flow:
    ask = State("Ask", Prompt("Answer."), LLM(tools=(ping,)))
    approve = State("Approve", Human(prompt="Publish?", defer=True, name="editor"))
    done = State("Done", final=True)
    return Flow("served", initial=ask, transitions=[Transition(ask, approve), Transition(approve, done)])


def _plain_flow() -> Flow:
    ask = State("Ask", Prompt("Talk."), LLM())
    done = State("Done", final=True)
    return Flow("plain", initial=ask, transitions=[Transition(ask, done)])


def _responder(model, messages, body):
    if messages[-1].get("content") == "Answer.":
        return {"tool_calls": [{"name": "ping", "arguments": {"host": "db"}}]}
    return "the db host is up"


def _sse(base: str, body: dict) -> list[dict]:
    """POST to /agui and read the server-sent events to the end (an SSE client)."""
    events = []
    with httpx.stream("POST", f"{base}/agui", json=body, headers={"accept": "text/event-stream"}, timeout=30) as r:
        assert r.status_code == 200, r.read()
        assert r.headers["content-type"].startswith("text/event-stream")
        for line in r.iter_lines():
            if line.startswith("data: "):
                events.append(json.loads(line[len("data: ") :]))
    return events


def _live_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("stateflow-run-")]


def test_an_agui_client_watches_states_tokens_and_tools_then_answers_the_interrupt():
    with _served(_flow(), _responder) as (base, srv, _store):
        events = _sse(base, _input("t1"))
        types = [e["type"] for e in events]
        assert types[0] == "RUN_STARTED" and types[-1] == "RUN_FINISHED"
        assert [e["stepName"] for e in events if e["type"] == "STEP_STARTED"] == ["Ask", "Approve"]
        tokens = "".join(e["delta"] for e in events if e["type"] == "TEXT_MESSAGE_CONTENT")
        assert tokens == "the db host is up"  # streamed token by token from the model
        assert sum(t == "TEXT_MESSAGE_CONTENT" for t in types) == 5
        start = next(e for e in events if e["type"] == "TOOL_CALL_START")
        args = next(e for e in events if e["type"] == "TOOL_CALL_ARGS")
        result = next(e for e in events if e["type"] == "TOOL_CALL_RESULT")
        assert start["toolCallName"] == "ping" and json.loads(args["delta"]) == {"host": "db"}
        assert result["toolCallId"] == start["toolCallId"] and result["content"] == "db is up"
        moves = [e["value"] for e in events if e["type"] == "CUSTOM" and e["name"] == "stateflow.transition"]
        assert [(m["source"], m["target"]) for m in moves] == [("Ask", "Approve")]
        outcome = events[-1]["outcome"]
        assert outcome["type"] == "interrupt"
        pause = outcome["interrupts"][0]
        assert pause["message"].endswith("Publish?")
        # the thread waits in the checkpointer, visible over HTTP
        status = httpx.get(f"{base}/threads/t1").json()
        assert status["status"] == "paused" and status["interrupt_id"] == pause["id"]
        # a request that does not answer the question, or answers another one, is refused
        r = httpx.post(f"{base}/agui", json=_input("t1"))
        assert r.status_code == 409 and pause["id"] in r.json()["error"]
        wrong = [{"interruptId": "t1@9", "status": "resolved", "payload": "yes"}]
        assert httpx.post(f"{base}/agui", json=_input("t1", resume=wrong)).status_code == 409
        answer = [{"interruptId": pause["id"], "status": "resolved", "payload": "yes"}]
        calls = len(srv.requests)
        done = _sse(base, _input("t1", None, resume=answer))
        assert done[-1]["type"] == "RUN_FINISHED" and done[-1]["outcome"]["type"] == "success"
        assert done[-1]["result"]["exit_state"] == "Done" and len(srv.requests) == calls  # no model asked again
        assert httpx.get(f"{base}/threads/t1").json()["status"] == "finished"
        again = httpx.post(f"{base}/agui", json=_input("t1", resume=answer))
        assert again.status_code == 409 and "finished" in again.json()["error"]
    assert _live_threads() == []


def test_malformed_requests_get_a_4xx_with_a_reason():
    with _served(_plain_flow(), lambda m, msgs, b: "hi") as (base, srv, store):
        r = httpx.post(f"{base}/agui", content=b"{not json", headers=_JSON)
        assert r.status_code == 422 and "RunAgentInput" in r.json()["error"]
        r = httpx.post(f"{base}/agui", json={"threadId": "x"})
        assert r.status_code == 422 and any(d["loc"] == ["runId"] for d in r.json()["detail"])
        r = httpx.post(f"{base}/agui", json=_input("t", text=None))
        assert r.status_code == 400 and "no user message" in r.json()["error"]
        r = httpx.post(f"{base}/agui", json=_input("../../etc"))
        assert r.status_code == 400 and "thread_id" in r.json()["error"]
        r = httpx.post(f"{base}/agui", content=b"x" * (2 << 20), headers=_JSON)
        assert r.status_code == 413
        resume = [{"interruptId": "nope@0", "status": "resolved", "payload": "y"}]
        assert httpx.post(f"{base}/agui", json=_input("nope", resume=resume)).status_code == 404
        assert httpx.get(f"{base}/threads/missing").status_code == 404
        assert srv.requests == []  # nothing reached the model
        assert store.threads() == []  # nothing was recorded
        other = Flow(
            "other", initial=(s := State("S", Prompt("x"), LLM())), transitions=[Transition(s, State("E", final=True))]
        )
        profile = ModelProfile(name="p", model="m", base_url=srv.url, api_key_env=None)
        run(other, "t", models=profile, checkpointer=store, thread_id="foreign")
        r = httpx.post(f"{base}/agui", json=_input("foreign"))
        assert r.status_code == 409 and "another flow" in r.json()["error"]


def test_a_client_that_disconnects_cancels_its_run_and_nothing_leaks():
    words = " ".join(f"w{i}" for i in range(300))
    with _served(_plain_flow(), lambda m, msgs, b: words, chunk_delay_s=0.01) as (base, srv, store):
        idle_tasks = _server_tasks(base)
        with httpx.stream("POST", f"{base}/agui", json=_input("gone"), timeout=30) as r:
            for line in r.iter_lines():
                if '"TEXT_MESSAGE_CONTENT"' in line:
                    break  # leave after the first token: the connection closes
        deadline = time.monotonic() + 10
        while (srv.active or _live_threads()) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _live_threads() == []  # the run's thread ended
        while _server_tasks(base) > idle_tasks and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _server_tasks(base) == idle_tasks  # no task of the request is left on the server's loop
        assert srv.active == 0 and srv.aborted == 1  # its model stream was closed, not read to the end
        info = store.latest("gone")
        assert info is not None and info.status.value == "failed"  # resumable from its checkpoint
        assert "RunCancelled" in json.dumps(info.payload)


def test_concurrent_requests_for_one_thread_are_served_one_at_a_time():
    active = []
    overlap = []
    lock = threading.Lock()

    def responder(model, messages, body):
        with lock:
            active.append(1)
            if len(active) > 1:
                overlap.append(True)
        time.sleep(0.3)
        with lock:
            active.pop()
        return "done"

    with _served(_plain_flow(), responder) as (base, srv, _store):

        async def both() -> list[list[dict]]:
            async with httpx.AsyncClient(timeout=30) as client:

                async def one() -> list[dict]:
                    out = []
                    async with client.stream("POST", f"{base}/agui", json=_input("same")) as r:
                        if r.status_code != 200:
                            return [{"type": "HTTP", "status": r.status_code}]
                        async for line in r.aiter_lines():
                            if line.startswith("data: "):
                                out.append(json.loads(line[6:]))
                    return out

                return await asyncio.gather(one(), one())

        a, b = asyncio.run(both())
    finished = [s for s in (a, b) if s and s[-1]["type"] == "RUN_FINISHED"]
    refused = [s for s in (a, b) if s and s[-1]["type"] in ("RUN_ERROR", "HTTP")]
    assert len(finished) == 1 and len(refused) == 1  # the second saw the finished thread
    assert not overlap and len(srv.requests) == 1


def test_ag2_a2a_client_calls_the_served_flow():
    from autogen.a2a import A2aRemoteAgent

    with _served(_plain_flow(), lambda m, msgs, b: "forty-two") as (base, srv, store):
        card = httpx.get(f"{base}/a2a/.well-known/agent-card.json").json()
        assert card["name"] == "plain" and card["url"].endswith("/a2a/")
        remote = A2aRemoteAgent(url=f"{base}/a2a", name="remote")
        ok, reply = asyncio.run(remote.a_generate_remote_reply(messages=[{"role": "user", "content": "the answer?"}]))
        assert ok and reply is not None and reply["content"] == "forty-two"
        assert srv.requests[-1]["messages"][-1]["content"] == "Talk."
        assert any(m.get("content") == "the answer?" for m in srv.requests[-1]["messages"])
        assert [t.status.value for t in store.threads()] == ["finished"]
    assert _live_threads() == []


def _asking_flow() -> Flow:
    ask = State("Ask", Prompt("Draft."), LLM())
    approve = State("Approve", Human(prompt="Publish the draft?", defer=True, name="editor"))
    done = State("Done", final=True)
    return Flow("asking", initial=ask, transitions=[Transition(ask, approve), Transition(approve, done)])


def test_a_paused_flow_uses_a2a_input_required_and_the_answer_resumes_its_thread():
    from autogen.a2a import A2aRemoteAgent

    class Answering(A2aRemoteAgent):
        """AG2's client; the human it would ask on input-required answers from a list."""

        def __init__(self, answers: list[str], **kw):
            super().__init__(**kw)
            self.answers, self.prompts = answers, []

        async def a_get_human_input(self, prompt: str, **kw) -> str:
            self.prompts.append(prompt)
            return self.answers.pop(0)

    with _served(_asking_flow(), lambda m, msgs, b: "a short draft") as (base, srv, store):
        remote = Answering(["yes, publish"], url=f"{base}/a2a", name="remote")
        ok, reply = asyncio.run(remote.a_generate_remote_reply(messages=[{"role": "user", "content": "write it"}]))
        assert ok and reply is not None
        # the task went to input-required once (AG2's client shows its human the task history's
        # last message, the caller's own, not the status message that carries the question:
        # the question's text is checked on the protocol in the next test)
        assert len(remote.prompts) == 1
        (thread,) = store.threads()  # the question and its answer were one conversation: one thread
        assert thread.thread_id.startswith("a2a-") and thread.status.value == "finished"
        assert thread.state == "Done"
        assert len(srv.requests) == 1  # the answer resumed the thread: the model was not asked again
        statuses = [c.status.value for c in store.list(thread.thread_id)]
        assert "paused" in statuses and statuses[-1] == "finished"  # paused, then answered on the same thread


def test_an_a2a_conversation_is_one_thread_and_input_required_is_the_task_state():
    # the protocol itself, with the a2a SDK's JSON-RPC over HTTP: the first message pauses the
    # task in input-required with the question; the next one on the same task finishes it
    def send(text: str, context_id: str, task_id: str | None = None) -> dict:
        message = {"role": "user", "parts": [{"kind": "text", "text": text}], "messageId": uuid.uuid4().hex,
                   "contextId": context_id}  # fmt: skip
        if task_id is not None:
            message["taskId"] = task_id
        body = {"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": {"message": message}}
        r = httpx.post(f"{base}/a2a/", json=body, timeout=30)
        assert r.status_code == 200, r.text
        return r.json()["result"]

    with _served(_asking_flow(), lambda m, msgs, b: "a short draft") as (base, srv, store):
        first = send("write it", "conv-1")
        assert first["status"]["state"] == "input-required"
        assert "Publish the draft?" in first["status"]["message"]["parts"][0]["text"]
        assert [(t.thread_id, t.status.value) for t in store.threads()] == [("a2a-conv-1", "paused")]
        second = send("yes", "conv-1", task_id=first["id"])
        assert second["status"]["state"] == "completed"
        assert [(t.thread_id, t.status.value) for t in store.threads()] == [("a2a-conv-1", "finished")]
        again = send("and again", "conv-1")  # a finished conversation is not restarted silently
        assert again["status"]["state"] == "rejected"
        assert "finished" in again["status"]["message"]["parts"][0]["text"]
        other = send("write another", "conv-2")  # another conversation, another thread
        assert other["status"]["state"] == "input-required"
        assert len(store.threads()) == 2 and len(srv.requests) == 2
    assert _live_threads() == []


def test_an_a2a_task_cancelled_by_its_client_stops_its_run():
    def rpc(method: str, params: dict) -> dict:
        r = httpx.post(f"{base}/a2a/", json={"jsonrpc": "2.0", "id": 1, "method": method, "params": params}, timeout=30)
        assert r.status_code == 200, r.text
        return r.json()

    words = " ".join(f"w{i}" for i in range(400))
    with _served(_plain_flow(), lambda m, msgs, b: words, chunk_delay_s=0.02) as (base, srv, store):
        message = {"role": "user", "parts": [{"kind": "text", "text": "talk"}], "messageId": "m1", "contextId": "c1"}
        started = rpc("message/send", {"message": message, "configuration": {"blocking": False}})["result"]
        deadline = time.monotonic() + 10
        while not srv.active and time.monotonic() < deadline:  # the model is streaming its reply
            time.sleep(0.02)
        assert srv.active == 1
        cancelled = rpc("tasks/cancel", {"id": started["id"]})
        assert cancelled["result"]["status"]["state"] == "canceled", cancelled
        deadline = time.monotonic() + 10
        while (_live_threads() or srv.active) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _live_threads() == [] and srv.active == 0  # the run and its model stream ended
        assert [t.status.value for t in store.threads()] == ["failed"]  # continued by a next message


def test_a_conversation_id_from_a_client_becomes_a_safe_thread_id():
    from stateflow.serve.a2a import thread_for_context
    from stateflow.serve.app import _THREAD_ID

    assert thread_for_context("conv-1") == "a2a-conv-1"
    for hostile in ("../../etc/passwd", "x" * 500, "ü nicode", "", "a\nb", "-leading"):
        thread = thread_for_context(hostile)
        assert _THREAD_ID.match(thread) and thread == thread_for_context(hostile), hostile
    assert thread_for_context("a b") != thread_for_context("a_b")  # distinct ids stay distinct


def test_concurrent_a2a_messages_of_one_conversation_are_served_one_at_a_time():
    def slow(model, messages, body):
        time.sleep(0.3)
        return "done"

    with _served(_plain_flow(), slow) as (base, srv, store):

        async def both() -> list[dict]:
            async with httpx.AsyncClient(timeout=30) as client:

                async def one(n: int) -> dict:
                    message = {"role": "user", "parts": [{"kind": "text", "text": "go"}], "messageId": f"m{n}",
                               "contextId": "shared"}  # fmt: skip
                    body = {"jsonrpc": "2.0", "id": n, "method": "message/send", "params": {"message": message}}
                    r = await client.post(f"{base}/a2a/", json=body)
                    return r.json()["result"]

                return await asyncio.gather(one(1), one(2))

        results = asyncio.run(both())
        states = sorted(r["status"]["state"] for r in results)
        # the second waited for the first, then found the conversation's thread finished
        assert states == ["completed", "rejected"]
        assert len(srv.requests) == 1 and [t.thread_id for t in store.threads()] == ["a2a-shared"]

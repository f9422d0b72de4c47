"""Limits on every endpoint (issue 59 part 2): body size on AG-UI (runs and resumes) and A2A alike,
messages and their length, runs at once (503 + Retry-After), a run time-out. Each refusal has its
status and a JSON reason naming the limit, and leaves the checkpointer as it was."""

from __future__ import annotations

import json
import threading
import time
import uuid

import httpx

from stateflow import LLM, Flow, Human, Prompt, SQLiteCheckpointer, State, Transition
from stateflow.serve import ServeLimits
from tests.serve.served import JSON, agui_input, served


def _flow() -> Flow:
    ask = State("Ask", Prompt("Talk."), LLM())
    return Flow("plain", initial=ask, transitions=[Transition(ask, State("Done", final=True))])


def _asking() -> Flow:
    ask = State("Ask", Prompt("Draft."), LLM())
    approve = State("Approve", Human(prompt="Publish?", defer=True, name="editor"))
    done = State("Done", final=True)
    return Flow("asking", initial=ask, transitions=[Transition(ask, approve), Transition(approve, done)])


def _reply(model, messages, body):
    return "hello"


def _a2a(parts: list[dict], context: str = "c1", method: str = "message/send") -> dict:
    message = {"role": "user", "parts": parts, "messageId": uuid.uuid4().hex, "contextId": context}
    return {"jsonrpc": "2.0", "id": 1, "method": method, "params": {"message": message}}


def _text(text: str) -> dict:
    return {"kind": "text", "text": text}


def _refused(r: httpx.Response, status: int, *words: str) -> None:
    assert r.status_code == status, r.text
    assert r.headers["content-type"] == "application/json"
    reason = r.json()["error"]
    assert all(w in reason for w in words), reason


def _snapshot(store) -> list:
    return [(t.thread_id, [(c.step, c.status.value) for c in store.list(t.thread_id)]) for t in store.threads()]


def test_a_10_mb_a2a_message_is_refused_like_an_agui_body():
    # the case: A2A had no body limit (a 10 MB message/send was run and checkpointed)
    with served(_flow(), _reply) as (base, srv, store):
        big = "x" * (10 << 20)
        _refused(httpx.post(f"{base}/a2a/", json=_a2a([_text(big)]), timeout=60), 413, "--max-body")
        _refused(httpx.post(f"{base}/agui", json=agui_input("t", big), timeout=60), 413, "--max-body")

        def chunks():  # no Content-Length: counted while read
            for _ in range(40):
                yield b"x" * 65536

        r = httpx.post(f"{base}/a2a/", content=chunks(), headers=JSON, timeout=60)
        _refused(r, 413, "larger than 1048576 bytes")
        assert srv.requests == [] and store.threads() == []


def test_the_body_limit_is_configurable_and_counts_bytes():
    with served(_flow(), _reply, limits=ServeLimits(max_body_bytes=2000)) as (base, srv, store):
        body = agui_input("small", "y" * 500)
        assert len(json.dumps(body)) < 2000
        assert httpx.post(f"{base}/agui", json=body).status_code == 200
        _refused(httpx.post(f"{base}/agui", json=agui_input("big", "é" * 1000)), 413, "2000 bytes")  # 2,000+ bytes
        _refused(httpx.post(f"{base}/a2a/", json=_a2a([_text("z" * 2000)])), 413, "2000 bytes")
        assert [t.thread_id for t in store.threads()] == ["small"] and len(srv.requests) == 1


def test_too_many_messages_or_too_long_a_message_is_refused():
    limits = ServeLimits(max_messages=3, max_message_chars=50)
    with served(_flow(), _reply, limits=limits) as (base, srv, store):
        body = agui_input("many")
        body["messages"] = [{"id": str(i), "role": "user", "content": "hi"} for i in range(4)]
        _refused(httpx.post(f"{base}/agui", json=body), 413, "4 messages", "at most 3", "--max-messages")
        _refused(httpx.post(f"{base}/agui", json=agui_input("long", "w" * 51)), 413, "51 characters", "at most 50")
        body = agui_input("multi")
        body["messages"][0]["content"] = [{"type": "text", "text": "v" * 60}]
        _refused(httpx.post(f"{base}/agui", json=body), 413, "--max-message-chars")
        _refused(httpx.post(f"{base}/a2a/", json=_a2a([_text("a")] * 4)), 413, "4 parts", "--max-messages")
        long_a2a = _a2a([_text("a" * 30), _text("b" * 30)], method="message/stream")
        _refused(httpx.post(f"{base}/a2a/", json=long_a2a), 413, "60 characters", "--max-message-chars")
        v1 = _a2a([{"text": "c" * 51}], method="SendMessage")  # A2A 1.x method and part shape
        _refused(httpx.post(f"{base}/a2a/", json=v1), 413, "51 characters")
        assert srv.requests == [] and store.threads() == []
        body = agui_input("fits", "w" * 50)
        body["messages"] = [body["messages"][0]] * 3
        assert httpx.post(f"{base}/agui", json=body).status_code == 200
        r = httpx.post(f"{base}/a2a/", json=_a2a([_text("a" * 25), _text("b" * 25)]))
        assert r.status_code == 200 and r.json()["result"]["status"]["state"] == "completed"


def test_a_long_answer_to_an_interrupt_is_refused_and_the_paused_thread_is_unchanged():
    with served(_asking(), _reply, limits=ServeLimits(max_message_chars=20)) as (base, srv, store):
        events = httpx.post(f"{base}/agui", json=agui_input("p", "draft it"), timeout=30).text
        pause = next(json.loads(line[6:]) for line in events.splitlines() if '"RUN_FINISHED"' in line)
        interrupt = pause["outcome"]["interrupts"][0]["id"]
        before = _snapshot(store)
        answer = [{"interruptId": interrupt, "status": "resolved", "payload": "y" * 21}]
        _refused(httpx.post(f"{base}/agui", json=agui_input("p", None, resume=answer)), 413, "21 characters")
        assert _snapshot(store) == before and len(srv.requests) == 1
        answer[0]["payload"] = "yes"
        assert '"success"' in httpx.post(f"{base}/agui", json=agui_input("p", None, resume=answer), timeout=30).text


def test_runs_beyond_the_limit_get_503_with_retry_after():
    release = threading.Event()

    def slow(model, messages, body):
        release.wait(20)
        return "done"

    limits = ServeLimits(max_runs=1, retry_after_s=7)
    with served(_flow(), slow, limits=limits) as (base, srv, store):
        first: list[str] = []
        runner = threading.Thread(
            target=lambda: first.append(httpx.post(f"{base}/agui", json=agui_input("first"), timeout=30).text)
        )
        runner.start()
        deadline = time.monotonic() + 10
        while not srv.active and time.monotonic() < deadline:
            time.sleep(0.02)
        before = _snapshot(store)
        r = httpx.post(f"{base}/agui", json=agui_input("second"))
        _refused(r, 503, "1 runs at once", "--max-runs")
        assert r.headers["retry-after"] == "7"
        r = httpx.post(f"{base}/a2a/", json=_a2a([_text("hi")]))
        _refused(r, 503, "--max-runs")
        assert r.headers["retry-after"] == "7"
        assert _snapshot(store) == before and len(srv.requests) == 1
        release.set()
        runner.join(30)
        assert '"RUN_FINISHED"' in first[0]
        assert httpx.post(f"{base}/agui", json=agui_input("third"), timeout=30).status_code == 200  # slot back
        assert sorted(t.thread_id for t in store.threads()) == ["first", "third"]


def test_a_run_past_the_time_out_is_cancelled_and_its_slot_freed():
    words = " ".join(f"w{i}" for i in range(400))
    limits = ServeLimits(run_timeout_s=1.0, max_runs=1)
    with served(_flow(), lambda m, msgs, b: words, limits=limits, chunk_delay_s=0.02) as (base, srv, store):
        started = time.monotonic()
        text = httpx.post(f"{base}/agui", json=agui_input("slow"), timeout=30).text
        took = time.monotonic() - started
        events = [json.loads(line[6:]) for line in text.splitlines() if line.startswith("data: ")]
        assert events[-1]["type"] == "RUN_ERROR" and events[-1]["code"] == "timeout", events[-1]
        assert "time-out of 1 s" in events[-1]["message"] and "--timeout" in events[-1]["message"]
        assert 1.0 <= took < 5  # the 400 words would take 8 s
        assert store.latest("slow").status.value == "failed"  # continuable from its last checkpoint
        deadline = time.monotonic() + 10
        while srv.active and time.monotonic() < deadline:
            time.sleep(0.05)
        assert srv.active == 0 and srv.aborted == 1  # its model stream was closed
        # A2A: the same time-out makes a failed task (the one slot was given back)
        r = httpx.post(f"{base}/a2a/", json=_a2a([_text("talk")]), timeout=30)
        result = r.json()["result"]
        assert result["status"]["state"] == "failed"
        assert "time-out of 1 s" in result["status"]["message"]["parts"][0]["text"]


def test_served_threads_leave_no_lock_files(tmp_path):
    # issue 59 part 3: one empty .lock file per thread stayed in the claims folder forever
    store = SQLiteCheckpointer(tmp_path / "threads.db")
    with served(_asking(), _reply, store=store) as (base, _srv, _store):
        for n in range(5):
            assert '"RUN_FINISHED"' in httpx.post(f"{base}/agui", json=agui_input(f"t{n}"), timeout=30).text
        r = httpx.post(f"{base}/a2a/", json=_a2a([_text("hi")]), timeout=30)
        assert r.json()["result"]["status"]["state"] == "input-required"
    assert len(store.threads()) == 6 and {t.status.value for t in store.threads()} == {"paused"}
    assert list((tmp_path / "threads.db.claims").iterdir()) == []
    store.close()


def test_a_run_slot_comes_back_however_its_request_ended():
    words = " ".join(f"w{i}" for i in range(100))
    limits = ServeLimits(max_runs=1)
    with served(_flow(), lambda m, msgs, b: words, limits=limits, chunk_delay_s=0.01) as (base, srv, store):
        with httpx.stream("POST", f"{base}/agui", json=agui_input("gone"), timeout=30) as r:
            for line in r.iter_lines():
                if '"TEXT_MESSAGE_CONTENT"' in line:
                    break  # the client leaves mid-stream
        deadline = time.monotonic() + 10
        while (srv.active or store.latest("gone").status.value == "running") and time.monotonic() < deadline:
            time.sleep(0.05)
        while True:  # the one slot comes back once the run's thread has ended (without it: 503 for ever)
            r = httpx.post(f"{base}/a2a/", json=_a2a([_text("next")]), timeout=30)
            if r.status_code != 503 or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        assert r.status_code == 200 and r.json()["result"]["status"]["state"] == "completed"
        r = httpx.post(f"{base}/agui", json=agui_input("after-a2a"), timeout=30)  # and after the A2A run
        assert r.status_code == 200 and '"RUN_FINISHED"' in r.text

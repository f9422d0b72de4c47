"""A2A artifacts as the protocol describes them (issue 59 part 4), read with the official
``a2a-sdk`` client: a run's reply streams as chunks of one artifact (``append``), its last chunk
says so (``lastChunk``), and the artifact holds the answer once. The SDK's own
``append_artifact_to_task`` rebuilds the artifact from the stream as a client does, and
``tasks/get`` shows what the server's task store kept.

Before: the chunks of every state's reply were appended to one artifact, then the whole answer
again as its last chunk ("draft words herethe final answerthe final answer"); a task paused on a
question and answered in the same task held two artifacts with the same text."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import httpx

from stateflow import LLM, Flow, Human, Prompt, State, Transition
from tests.serve.served import served


def _two_states() -> Flow:
    draft = State("Draft", Prompt("Draft."), LLM())
    final = State("Final", Prompt("Final."), LLM())
    return Flow(
        "two", initial=draft, transitions=[Transition(draft, final), Transition(final, State("Done", final=True))]
    )


def _two_replies(model: str, messages: list, body: dict) -> str:
    return "draft words here" if messages[-1].get("content") == "Draft." else "the final answer"


def _approval() -> Flow:
    ask = State("Ask", Prompt("Answer."), LLM())
    approve = State("Approve", Human(prompt="Publish?", defer=True, name="editor"))
    done = State("Done", final=True)
    return Flow("approval", initial=ask, transitions=[Transition(ask, approve), Transition(approve, done)])


def _text(artifact: Any) -> str:
    return "".join(p.text for p in artifact.parts)


async def _send(client: Any, text: str, context: str, task_id: str | None = None) -> tuple[Any, list[Any]]:
    """Send ``text`` with the SDK's client; the task rebuilt from the stream and its artifact updates."""
    from a2a.server.tasks.task_manager import append_artifact_to_task
    from a2a.types import Message, Part, Role, SendMessageRequest, Task

    message = Message(role=Role.ROLE_USER, parts=[Part(text=text)], message_id=uuid.uuid4().hex, context_id=context)
    if task_id is not None:
        message.task_id = task_id
    task, updates = Task(), []
    async for event in client.send_message(SendMessageRequest(message=message)):
        kind = event.WhichOneof("payload")
        if kind == "task":
            task.CopyFrom(event.task)
        elif kind == "artifact_update":
            updates.append(event.artifact_update)
            append_artifact_to_task(task, event.artifact_update)
        elif kind == "status_update":
            task.id = task.id or event.status_update.task_id  # a task the server knew: no task event
            task.status.CopyFrom(event.status_update.status)
    return task, updates


async def _client(base: str) -> Any:
    from a2a.client import ClientConfig, create_client

    return await create_client(f"{base}/a2a", ClientConfig(streaming=True, httpx_client=httpx.AsyncClient(timeout=60)))


async def _stored(client: Any, task_id: str) -> Any:
    from a2a.types import GetTaskRequest

    return await client.get_task(GetTaskRequest(id=task_id))


def test_streamed_chunks_then_the_last_one_and_the_answer_once():
    from a2a.types import TaskState

    async def talk(base: str) -> None:
        client = await _client(base)
        task, updates = await _send(client, "go", "two-1")
        assert task.status.state == TaskState.TASK_STATE_COMPLETED
        assert [_text(a) for a in task.artifacts] == ["the final answer"]  # as a client rebuilds it
        stored = await _stored(client, task.id)
        assert [_text(a) for a in stored.artifacts] == ["the final answer"]  # as the server keeps it
        assert len({u.artifact.artifact_id for u in updates}) == 1
        # each reply starts the artifact afresh (append false), its chunks follow (append true)
        starts = [i for i, u in enumerate(updates) if not u.append]
        assert len(starts) == 2 and starts[0] == 0
        assert "".join(_text(u.artifact) for u in updates[: starts[1]]) == "draft words here"
        final = updates[starts[1] :]
        assert "".join(_text(u.artifact) for u in final) == "the final answer"  # never the text twice
        assert len(final) > 1 and all(u.append for u in final[1:])  # streamed, not sent whole
        assert [u.last_chunk for u in updates] == [False] * (len(updates) - 1) + [True]  # one last chunk
        await client.close()

    with served(_two_states(), _two_replies) as (base, _srv, _store):
        asyncio.run(talk(base))


def test_a_paused_then_resumed_task_holds_one_artifact():
    from a2a.types import TaskState

    async def talk(base: str) -> None:
        client = await _client(base)
        paused, before = await _send(client, "check the db", "pause-1")
        assert paused.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
        assert paused.status.message.parts[0].text.endswith("Publish?")
        assert before and not any(u.last_chunk for u in before)  # the reply streamed, the task goes on
        done, after = await _send(client, "yes, publish", "pause-1", task_id=paused.id)
        assert done.id == paused.id and done.status.state == TaskState.TASK_STATE_COMPLETED
        stored = await _stored(client, paused.id)
        assert [_text(a) for a in stored.artifacts] == ["the db host is up"]  # one artifact, not two
        # the answer, whole, replaces the artifact the first message started; it is the last chunk
        assert [(u.append, u.last_chunk, _text(u.artifact)) for u in after] == [(False, True, "the db host is up")]
        assert {u.artifact.artifact_id for u in before + after} == {stored.artifacts[0].artifact_id}
        await client.close()

    with served(_approval(), lambda model, messages, body: "the db host is up") as (base, _srv, _store):
        asyncio.run(talk(base))


def test_a_reply_before_a_tool_call_is_replaced_by_the_next_reply():
    def ping(host: str) -> str:
        """Ping a host."""
        return f"{host} is up"

    ask = State("Ask", Prompt("Answer."), LLM(tools=(ping,)))
    flow = Flow("tooled", initial=ask, transitions=[Transition(ask, State("Done", final=True))])

    def responder(model: str, messages: list, body: dict) -> Any:
        if messages[-1].get("content") == "Answer.":
            return {"content": "let me check", "tool_calls": [{"name": "ping", "arguments": {"host": "db"}}]}
        return "the db host is up"

    async def talk(base: str) -> None:
        client = await _client(base)
        task, updates = await _send(client, "go", "tool-1")
        stored = await _stored(client, task.id)
        assert [_text(a) for a in task.artifacts] == [_text(a) for a in stored.artifacts] == ["the db host is up"]
        last_start = max(i for i, u in enumerate(updates) if not u.append)
        assert "".join(_text(u.artifact) for u in updates[last_start:]) == "the db host is up"
        assert [u.last_chunk for u in updates] == [False] * (len(updates) - 1) + [True]
        await client.close()

    with served(flow, responder) as (base, _srv, _store):
        asyncio.run(talk(base))


def test_the_server_keeps_a_bounded_number_of_finished_a2a_tasks():
    # the soak's last growth (~4 KiB per A2A task): AG2's server kept every task in memory
    from stateflow.serve import ServeLimits

    def send(base: str, context: str, task_id: str | None = None, text: str = "go") -> dict:
        message = {"role": "user", "parts": [{"kind": "text", "text": text}], "messageId": uuid.uuid4().hex,
                   "contextId": context, "kind": "message"}  # fmt: skip
        if task_id is not None:
            message["taskId"] = task_id
        body = {"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": {"message": message}}
        return httpx.post(f"{base}/a2a/", json=body, timeout=60).json()["result"]

    def kept(base: str, task_id: str) -> bool:
        body = {"jsonrpc": "2.0", "id": 2, "method": "tasks/get", "params": {"id": task_id}}
        return "result" in httpx.post(f"{base}/a2a/", json=body, timeout=60).json()

    limits = ServeLimits(max_finished_tasks=3)
    with served(_approval(), lambda model, messages, body: "the db host is up", limits=limits) as (base, _srv, _s):
        paused = [send(base, f"c{i}") for i in range(5)]
        assert {t["status"]["state"] for t in paused} == {"input-required"}
        assert all(kept(base, t["id"]) for t in paused)  # a task waiting for its answer is never dropped
        done = [send(base, t["contextId"], t["id"], "yes") for t in paused]
        assert {t["status"]["state"] for t in done} == {"completed"}
        assert [kept(base, t["id"]) for t in paused] == [False, False, True, True, True]  # the 3 latest

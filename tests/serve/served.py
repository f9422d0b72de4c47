"""A flow served on the loopback for the serve tests: the real application (`build_app`) under
uvicorn in a thread, the fake OpenAI server as its model, a memory (or given) checkpointer."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import uvicorn

from stateflow import Flow, MemoryCheckpointer, ModelProfile
from stateflow.checkpoint import Checkpointer
from stateflow.serve import FlowService, ServeAccess, ServeLimits, build_app
from stateflow.testing.fake_openai import FakeOpenAIServer

__all__ = ["JSON", "agui_input", "free_port", "served", "server_tasks"]

JSON = {"content-type": "application/json"}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def served(
    flow: Flow,
    responder: Callable[..., Any],
    *,
    access: ServeAccess | None = None,
    limits: ServeLimits | None = None,
    store: Checkpointer | None = None,
    wrap: Callable[[Any], Any] | None = None,
    **fake: Any,
) -> Iterator[tuple[str, FakeOpenAIServer, Any]]:
    """``(base URL, fake model server, checkpointer)`` of ``flow`` served with ``access`` and
    ``limits``; ``wrap`` wraps the application (e.g. to record what it answered)."""
    with FakeOpenAIServer(responder, **fake) as srv:
        store = store if store is not None else MemoryCheckpointer()
        profile = ModelProfile(name="p", model="m", base_url=srv.url, api_key_env=None)
        port = free_port()
        base = f"http://127.0.0.1:{port}"
        app: Any = build_app(FlowService(flow, store, models=profile), base_url=base, access=access, limits=limits)
        if wrap is not None:
            app = wrap(app)
        server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
        loops: list[asyncio.AbstractEventLoop] = []

        def serve() -> None:
            with asyncio.Runner() as runner:  # as uvicorn.run: leftover tasks are cancelled at the end
                loops.append(runner.get_loop())
                runner.run(server.serve())

        thread = threading.Thread(target=serve, daemon=True)
        thread.start()
        while not server.started:
            time.sleep(0.02)
        _LOOPS[base] = loops[0]
        try:
            yield base, srv, store
        finally:
            server.should_exit = True
            thread.join(10)
            del _LOOPS[base]


_LOOPS: dict[str, asyncio.AbstractEventLoop] = {}  # the server's event loop, by base URL (test-only)


def server_tasks(base: str) -> int:
    """How many asyncio tasks the server's event loop has now."""

    async def count() -> int:
        return len(asyncio.all_tasks())

    return asyncio.run_coroutine_threadsafe(count(), _LOOPS[base]).result(5)


def agui_input(thread: str, text: str | None = "check the db", resume: list | None = None) -> dict:
    """An AG-UI ``RunAgentInput`` body for ``thread`` with one user message (``text``)."""
    body: dict[str, Any] = {
        "threadId": thread,
        "runId": f"run-{time.monotonic_ns()}",
        "state": {},
        "messages": [{"id": "m1", "role": "user", "content": text}] if text is not None else [],
        "tools": [],
        "context": [],
        "forwardedProps": {},
    }
    if resume is not None:
        body["resume"] = resume
    return body

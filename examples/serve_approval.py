"""A flow as a service: an approval flow served over AG-UI and A2A, its paused thread answered over HTTP.

Serve it (embedded model; threads kept in approval.db) and talk to it from another terminal:

    python examples/serve_approval.py serve --model local-small --port 8321
    python examples/serve_approval.py client --url http://127.0.0.1:8321 --answer yes
    python examples/serve_approval.py a2a-client --url http://127.0.0.1:8321 --answer yes

or the same with the command line: ``stateflow serve examples.serve_approval:FLOW --port 8321``.
The client is a plain SSE client of the AG-UI protocol (httpx): it starts a run, prints the states
and tokens it sees, gets the interrupt the paused run waits on (the flow's ``Human(defer=True)``),
and answers it with AG-UI's ``resume`` on the same thread. The run waits in the checkpointer,
so the server may even restart in between. ``a2a-client`` does the same as another agent would,
over A2A with AG2's own ``autogen.a2a.A2aRemoteAgent``: the paused run is an ``input-required``
task, and the answer (which AG2's client asks its human for) resumes the conversation's thread.

Tested against the fake OpenAI server in tests/interop/test_live_examples.py.
"""

from __future__ import annotations

import argparse
import json
import socket
import uuid
from typing import Any

import httpx

from stateflow import LLM, Flow, Human, ModelProfile, Prompt, SQLiteCheckpointer, State, Transition

draft = State("Draft", Prompt("Write a one-line release note for the task."), LLM())
approve = State("Approve", Human(prompt="Publish this note? (yes/no)", defer=True, name="editor"))
published = State("Published", final=True)
FLOW = Flow("release-note", initial=draft, transitions=[Transition(draft, approve), Transition(approve, published)])


def serve(model: str = "local", base_url: str | None = None, port: int = 8321, db: str = "approval.db") -> None:
    from stateflow.serve import FlowService
    from stateflow.serve import serve as run_server

    try:  # a taken port fails here, before anything is created or announced
        socket.create_server(("127.0.0.1", port)).close()
    except OSError as err:
        raise SystemExit(f"port {port} cannot be served ({err.strerror}): give another with --port") from err
    models: str | ModelProfile = model
    if base_url is not None:
        models = ModelProfile(name="notes", model=model, base_url=base_url, api_key_env=None, max_tokens=64)
    service = FlowService(FLOW, SQLiteCheckpointer(db), models=models, flow_ref="examples.serve_approval:FLOW")
    url = f"http://127.0.0.1:{port}"
    print(f"serving the {FLOW.name} flow at {url} (AG-UI: POST {url}/agui, A2A: {url}/a2a)", flush=True)
    print(f"threads are kept in {db}; Ctrl-C stops the server. From another terminal:", flush=True)
    print(f"  python examples/serve_approval.py client --url {url} --answer yes", flush=True)
    run_server(service, host="127.0.0.1", port=port)


def _post(url: str, body: dict[str, Any]) -> list[dict[str, Any]]:
    """One AG-UI request: the events of its server-sent stream, printed as they come."""
    events = []
    with httpx.stream("POST", f"{url}/agui", json=body, headers={"accept": "text/event-stream"}, timeout=600) as r:
        if r.status_code != 200:
            raise SystemExit(f"HTTP {r.status_code}: {r.read().decode()}")
        for line in r.iter_lines():
            if not line.startswith("data: "):
                continue
            event = json.loads(line[len("data: ") :])
            events.append(event)
            if event["type"] == "STEP_STARTED":
                print(f"\n== {event['stepName']}")
            elif event["type"] == "TEXT_MESSAGE_CONTENT":
                print(event["delta"], end="", flush=True)
    print()
    return events


def client(url: str, answer: str, task: str = "the server now streams tokens") -> dict[str, Any]:
    """Start a run on a new thread, then answer the question it pauses on; returns the last event."""
    thread = f"note-{uuid.uuid4().hex[:8]}"
    common = {"threadId": thread, "state": {}, "tools": [], "context": [], "forwardedProps": {}}
    first = _post(url, {**common, "runId": "r1", "messages": [{"id": "1", "role": "user", "content": task}]})
    outcome = first[-1].get("outcome") or {}
    if outcome.get("type") != "interrupt":
        return first[-1]
    question = outcome["interrupts"][0]
    print(f"the run waits: {question['message']!r} (interrupt {question['id']})")
    resume = [{"interruptId": question["id"], "status": "resolved", "payload": answer}]
    last = _post(url, {**common, "runId": "r2", "messages": [], "resume": resume})[-1]
    print(f"{last['type']}: {json.dumps(last.get('result', {}).get('path'))}")
    return last


class TokenPrinter:
    """An AG2 output stream that prints streamed text as it comes, on one line and uncoloured
    (AG2's default console stream prints each streamed piece in green on a line of its own)."""

    def __init__(self) -> None:
        self.midline = False  # tokens were printed and their line is not ended yet

    def print(self, *objects: Any, sep: str = " ", end: str = "\n", flush: bool = False) -> None:
        self.end_line()
        print(*objects, sep=sep, end=end, flush=flush)

    def send(self, message: Any) -> None:
        from autogen.events.client_events import StreamEvent

        if isinstance(message, StreamEvent):  # AG2 wraps each event: the wrapper's content is the event
            print(message.content.content, end="", flush=True)
            self.midline = True
        else:
            message.print(self.print)

    def input(self, prompt: str = "", *, password: bool = False) -> str:
        self.end_line()
        return input(prompt)

    def end_line(self) -> None:
        if self.midline:
            print()
            self.midline = False


def a2a_client(url: str, answer: str, task: str = "the server now streams tokens") -> str:
    """Call the flow over A2A with AG2's client and answer its question; returns the reply text."""
    import asyncio

    from autogen.a2a import A2aRemoteAgent
    from autogen.io.base import IOStream

    out = TokenPrinter()

    class Caller(A2aRemoteAgent):
        """AG2's A2A client whose human always gives ``answer``."""

        async def a_get_human_input(self, prompt: str, **kwargs: Any) -> str:
            out.print(f"the task is input-required; answering {answer!r}")
            return answer

    remote = Caller(url=f"{url}/a2a", name="caller")
    with IOStream.set_default(out):
        _, reply = asyncio.run(remote.a_generate_remote_reply(messages=[{"role": "user", "content": task}]))
    text = str((reply or {}).get("content") or "")
    out.print(f"reply: {text}")
    return text


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("serve")
    s.add_argument("--model", default="local")
    s.add_argument("--base-url")
    s.add_argument("--port", type=int, default=8321)
    s.add_argument("--db", default="approval.db")
    c = sub.add_parser("client")
    c.add_argument("--url", default="http://127.0.0.1:8321")
    c.add_argument("--answer", default="yes")
    a = sub.add_parser("a2a-client")
    a.add_argument("--url", default="http://127.0.0.1:8321")
    a.add_argument("--answer", default="yes")
    args = ap.parse_args()
    if args.cmd == "serve":
        serve(args.model, args.base_url, args.port, args.db)
    elif args.cmd == "a2a-client":
        a2a_client(args.url, args.answer)
    else:
        client(args.url, args.answer)

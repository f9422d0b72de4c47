"""Several `stateflow serve` processes on one PostgreSQL store ([serve] part 5).

Two real server processes, the real PostgreSQL server the checkpoint tests start, and the fake
model server in this process counting every request by the state that asked it:

* a thread started through one server is listed, resumed and answered through the other;
* a server killed with SIGKILL in the middle of a run leaves a thread the other server continues
  from its last checkpoint, and no model call that finished before the kill is sent again;
* two servers asked to continue one thread at once: one runs it, the other answers 409.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from urllib.parse import quote

import httpx
import pytest

from stateflow.testing.fake_openai import FakeOpenAIServer
from tests.core.checkpoint.pg_server import PgServer, ServerUnavailable
from tests.serve.served import agui_input, free_port

ROOT = Path(__file__).resolve().parents[2]
_SERVE = [sys.executable, "-m", "stateflow.cli.main", "serve", "flows:FLOW"]

FLOWS = """
from stateflow import LLM, Flow, Human, Prompt, State, Transition

draft = State("Draft", Prompt("DRAFT the note."), LLM())
approve = State("Approve", Human(prompt="Publish?", defer=True, name="editor"))
publish = State("Publish", Prompt("PUBLISH it."), LLM())
polish = State("Polish", Prompt("POLISH it."), LLM())
done = State("Done", final=True)
FLOW = Flow("release", initial=draft, max_transitions=8, transitions=[
    Transition(draft, approve),
    Transition(approve, publish),
    Transition(publish, polish),
    Transition(polish, done),
])
"""


class Model:
    """The fake model's answers, counting requests by the state that asked (its prompt's word);
    a state can be made to wait until released."""

    def __init__(self) -> None:
        self.asked: list[str] = []
        self.hold: dict[str, threading.Event] = {}
        self.arrived: dict[str, threading.Event] = {}
        self._lock = threading.Lock()

    def __call__(self, model: str, messages: list[dict], body: dict) -> str:
        word = next(w for w in ("DRAFT", "PUBLISH", "POLISH") if w in str(messages[-1].get("content")))
        with self._lock:
            self.asked.append(word)
        self.arrived.setdefault(word, threading.Event()).set()
        if word in self.hold:
            self.hold[word].wait(60)
        return f"{word.lower()} done"

    def block(self, word: str) -> None:
        self.hold[word] = threading.Event()
        self.arrived[word] = threading.Event()


@pytest.fixture(scope="module")
def pg_url() -> Iterator[Callable[[str], str]]:
    try:
        server = PgServer()
        server.start()
    except ServerUnavailable as err:
        pytest.skip(f"no PostgreSQL server for the tests: {err}")

    def database(name: str) -> str:
        server.create_database(name)
        return f"postgresql://stateflow@/{name}?host={quote(str(server.root))}&port=5432"

    yield database
    server.destroy()


@pytest.fixture
def model() -> Iterator[tuple[Model, str]]:
    m = Model()
    with FakeOpenAIServer(m) as srv:
        yield m, srv.url
    for event in m.hold.values():
        event.set()


class Server:
    """One `stateflow serve` process."""

    def __init__(self, project: Path, store: str, name: str):
        self.store = store
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(project), str(ROOT)]), "PYTHONUNBUFFERED": "1"}
        env.pop("STATEFLOW_SERVE_TOKEN", None)
        self.log = project / f"{name}.log"
        self.process = subprocess.Popen(
            [*_SERVE, "--port", str(self.port), "--checkpoints", store, "--config", "models.toml"],
            cwd=project,
            env=env,
            stdout=self.log.open("w"),
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise AssertionError(f"server {name} exited: {self.log.read_text()}")
            try:
                if httpx.get(f"{self.base}/health", timeout=1).status_code == 200:
                    return
            except httpx.HTTPError:
                time.sleep(0.2)
        raise AssertionError(f"server {name} did not start: {self.log.read_text()}")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


@pytest.fixture
def servers(tmp_path: Path, pg_url: Callable[[str], str], model: tuple[Model, str]) -> Iterator[list[Server]]:
    project = tmp_path / "project"
    project.mkdir()
    (project / "flows.py").write_text(FLOWS)
    (project / "models.toml").write_text(
        f'[profiles.srv]\nmodel = "m"\nprovider = "openai"\nbase_url = "{model[1]}"\napi_key_env = ""\n'
        '[models]\ndefault = "srv"\n'
    )
    store = pg_url(f"two{time.monotonic_ns()}")
    started = [Server(project, store, "a"), Server(project, store, "b")]
    yield started
    for s in started:
        s.stop()


def _events(base: str, body: dict, timeout: float = 60) -> tuple[int, list[dict]]:
    events = []
    with httpx.stream("POST", f"{base}/agui", json=body, headers={"accept": "text/event-stream"}, timeout=timeout) as r:
        if r.status_code != 200:
            return r.status_code, [json.loads(r.read())]
        for line in r.iter_lines():
            if line.startswith("data: "):
                events.append(json.loads(line[len("data: ") :]))
    return 200, events


def _pause(base: str, thread: str) -> str:
    """Start ``thread`` (it pauses at Approve); the interrupt id to answer."""
    status, events = _events(base, agui_input(thread, "release v2"))
    assert status == 200
    finished = [e for e in events if e["type"] == "RUN_FINISHED"]
    assert finished and finished[-1]["outcome"]["type"] == "interrupt", events
    return finished[-1]["outcome"]["interrupts"][0]["id"]


def _answer(interrupt: str) -> list[dict]:
    return [{"interruptId": interrupt, "status": "resolved", "payload": "yes"}]


def test_a_thread_started_on_one_server_is_listed_and_answered_on_another(servers, model):
    a, b = servers
    asked = model[0].asked
    interrupt = _pause(a.base, "h1")
    listed = httpx.get(f"{b.base}/threads/h1").json()
    assert listed["status"] == "paused" and listed["state"] == "Approve" and listed["interrupt_id"] == interrupt
    status, events = _events(b.base, agui_input("h1", None, resume=_answer(interrupt)))
    assert status == 200 and events[-1]["type"] == "RUN_FINISHED", events
    assert httpx.get(f"{a.base}/threads/h1").json()["status"] == "finished"
    assert asked == ["DRAFT", "PUBLISH", "POLISH"]  # each state asked once, across both servers


def test_a_server_killed_mid_run_leaves_a_thread_the_other_continues_without_repeating_a_call(servers, model):
    a, b = servers
    m = model[0]
    interrupt = _pause(a.base, "k1")
    m.block("POLISH")
    answering = ThreadPoolExecutor(1).submit(_events, a.base, agui_input("k1", None, resume=_answer(interrupt)))
    assert m.arrived["POLISH"].wait(60), "the run never reached Polish"
    a.process.send_signal(signal.SIGKILL)  # mid-run: Polish's request is open, Publish's reply is saved
    a.process.wait(10)
    with pytest.raises(httpx.HTTPError):
        answering.result(30)
    m.hold.pop("POLISH").set()  # the new request for Polish is answered at once
    assert httpx.get(f"{b.base}/threads/k1").json()["status"] == "running"
    status, events = _events(b.base, agui_input("k1", None))  # continue from its last checkpoint
    assert status == 200 and events[-1]["type"] == "RUN_FINISHED", events
    assert httpx.get(f"{b.base}/threads/k1").json()["status"] == "finished"
    # Draft and Publish finished before the kill: never sent again; only the cut Polish call is
    assert m.asked == ["DRAFT", "PUBLISH", "POLISH", "POLISH"]


def test_two_servers_continuing_one_thread_at_once_one_runs_it_and_the_other_answers_409(servers, model, tmp_path):
    a, b = servers
    m = model[0]
    interrupt = _pause(a.base, "c1")
    m.block("POLISH")
    cut = ThreadPoolExecutor(1).submit(_events, a.base, agui_input("c1", None, resume=_answer(interrupt)))
    assert m.arrived["POLISH"].wait(60)
    a.process.send_signal(signal.SIGKILL)  # leaves c1 running: any server may continue it
    a.process.wait(10)
    with pytest.raises(httpx.HTTPError):
        cut.result(30)
    m.hold.pop("POLISH").set()
    c = Server(tmp_path / "project", b.store, "c")  # a third server on the same store
    servers.append(c)
    m.block("POLISH")
    body = agui_input("c1", None)
    with ThreadPoolExecutor(1) as pool:
        first = pool.submit(_events, b.base, body)
        assert m.arrived["POLISH"].wait(60)  # server b holds the thread's claim, inside Polish
        second = _events(c.base, {**body, "runId": "run-c"})
        m.hold["POLISH"].set()
        assert second[0] == 409 and "c1" in second[1][0]["error"], second
        status, events = first.result(60)
    assert status == 200 and events[-1]["type"] == "RUN_FINISHED", events
    assert m.asked == ["DRAFT", "PUBLISH", "POLISH", "POLISH"]  # c ran nothing

"""The runner makes the embedded model ready before its first episode (issue 15).

Starting a llama.cpp server and loading a model takes seconds; inside the first episode it would
be counted in that episode's time (and its timeout). The pool's server for a test-only model key
is a double that answers through a fake OpenAI server and logs when it starts; everything else
is real: the runner, the thread executor, AutoGen's HTTP client and the episode on an in-memory
environment.
"""

from __future__ import annotations

import uuid
from typing import Any

from stateflow.tasks.bash.benchmark import INTERCODE_BASH
from stateflow.tasks.harness.runner import RunSpec, evaluate

from stateflow import ModelAssignment, ModelProfile
from stateflow.backends.local import default_pool
from stateflow.testing.fake_openai import FakeOpenAIServer
from tests.tasks.fakes import FakeEnv


class LoggedServer:
    """A managed-server double: logs its start, then serves from ``url``."""

    def __init__(self, url: str, events: list[str]):
        self.url, self.events, self.started = url, events, False

    def ensure_running(self) -> str:
        if not self.started:
            self.started = True
            self.events.append("server started")
        return self.url

    def check(self) -> None:
        pass

    def alive(self) -> bool:
        return self.started

    def stop(self) -> None:
        pass


class LoggedEnv(FakeEnv):
    def __init__(self, events: list[str]):
        super().__init__(n=2)
        self.events = events

    def reset(self, index: int) -> tuple[Any, dict[str, Any]]:
        self.events.append(f"episode {index} started")
        return super().reset(index)


def test_model_is_started_and_warmed_before_the_first_episode(tmp_path):
    events: list[str] = []

    def respond(model: str, messages: list[dict[str, Any]], body: dict[str, Any]) -> str:
        events.append(f"request max_tokens={body.get('max_tokens')}")
        return "Thought: done.\nAction: submit"

    key = f"start-test-{uuid.uuid4().hex[:8]}"  # a key of its own: the process-wide pool is shared
    with FakeOpenAIServer(respond) as fake:
        default_pool().attach(key, LoggedServer(fake.url, events))
        profile = ModelProfile(name="loc", model="m", provider="local", local_model=key, max_retries=0, timeout=10)
        spec = _bash_spec(profile, tmp_path, tasks="0:2")
        summary = evaluate(spec, env_factory=lambda _: LoggedEnv(events), progress=False)
    assert summary.finished == 2
    first_episode = events.index("episode 0 started")
    # Started, then one 1-token warm-up request, and only then the first episode.
    assert events[:2] == ["server started", "request max_tokens=1"]
    assert first_episode == 2
    assert "episode 1 started" in events


def _bash_spec(profile: ModelProfile, tmp_path, **kw) -> RunSpec:
    """The demo Bash run both tests make, served by ``profile``."""
    return RunSpec(
        INTERCODE_BASH,
        ("stateflow",),
        models=ModelAssignment.of(profile),
        models_label="default=loc",
        out=tmp_path / "out",
        dataset="demo",
        **kw,
    )


def test_oracle_runs_start_no_model(tmp_path):
    events: list[str] = []
    key = f"start-test-{uuid.uuid4().hex[:8]}"
    default_pool().attach(key, LoggedServer("http://127.0.0.1:9/v1", events))
    profile = ModelProfile(name="loc", model="m", provider="local", local_model=key, max_retries=0, timeout=10)
    spec = _bash_spec(profile, tmp_path, tasks="0:1", oracle=True)
    assert evaluate(spec, env_factory=lambda _: LoggedEnv(events), progress=False).finished == 1
    assert "server started" not in events

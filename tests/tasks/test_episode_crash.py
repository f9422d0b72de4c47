"""An episode whose embedded model server died says so in its record (check_server wired in).

The pool's server for a test-only model key is a dead double: its endpoint refuses connections
and its ``check`` reports the crash as :class:`ManagedServer` does. Everything else is real: the
runtime, AutoGen's HTTP client and the episode runner on the in-memory environment.
"""

from __future__ import annotations

import socket
import uuid

from stateflow.tasks.bash.benchmark import INTERCODE_BASH
from stateflow.tasks.harness.episode import EpisodeSpec, crashed_local_servers, run_episode

from stateflow import ModelAssignment, ModelProfile
from stateflow.backends.local import ServerCrashedError, default_pool
from tests.tasks.fakes import FakeEnv


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class DeadServer:
    """A managed server that was killed: nothing listens on its port any more."""

    def __init__(self) -> None:
        self.url = f"http://127.0.0.1:{_closed_port()}/v1"

    def ensure_running(self) -> str:
        return self.url

    def check(self) -> None:
        raise ServerCrashedError("exited with signal 9 (SIGKILL); log tail: ggml_abort")

    def alive(self) -> bool:
        return False

    def stop(self) -> None:
        pass


def _profile(key: str) -> ModelProfile:
    return ModelProfile(name="loc", model="m", provider="local", local_model=key, max_retries=0, timeout=5)


def test_a_crashed_local_server_is_named_in_the_episode_error() -> None:
    key = f"crash-test-{uuid.uuid4().hex[:8]}"  # a key of its own: the process-wide pool is shared
    default_pool().attach(key, DeadServer())
    spec = EpisodeSpec(
        benchmark=INTERCODE_BASH,
        dataset="demo",
        method="stateflow",
        models=ModelAssignment.of(_profile(key)),
        models_label="default=loc",
    )
    record = run_episode(FakeEnv(n=1), 0, spec)
    assert record["status"] == "error"
    assert (
        f"local model server {key!r} crashed: exited with signal 9 (SIGKILL); log tail: ggml_abort" in record["error"]
    )


def test_live_or_remote_servers_add_nothing() -> None:
    remote = ModelProfile(name="r", model="m", base_url="http://127.0.0.1:9/v1", api_key_env=None)
    assert crashed_local_servers(ModelAssignment.of(remote)) == []
    # a local profile whose server this process never started: nothing to report
    assert crashed_local_servers(ModelAssignment.of(_profile(f"never-{uuid.uuid4().hex[:8]}"))) == []

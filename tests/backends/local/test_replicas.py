"""One pinned server per core (issue 49 part 4), without the model.

The replica set's process handling runs on real processes: a stand-in server (a tiny HTTP server
child pinned the way ``server_app`` pins itself) replaces the llama.cpp child, so routing, pinning,
crash reports and restarts are checked here; ``test_server.py``'s driver checks the same with
the real model.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import pytest

from stateflow.backends.local import LocalServerPool, ModelStore, ServerConfig, ServerCrashedError
from stateflow.backends.local.replicas import ReplicaSet, Router, current_route, partition_cores, route_requests
from stateflow.errors import ConfigError
from stateflow.profiles import ModelProfile

CORES = sorted(os.sched_getaffinity(0))
two_cores = pytest.mark.skipif(len(CORES) < 2, reason="needs 2 cores")

# A stand-in server: serves GET / with its own pid and allowed cores, pinned before it serves.
_STAND_IN = """
import http.server, json, os, sys
os.sched_setaffinity(0, json.loads(sys.argv[1]))
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = json.dumps({"pid": os.getpid(), "cpus": sorted(os.sched_getaffinity(0))}).encode()
        self.send_response(200); self.end_headers(); self.wfile.write(body)
    def log_message(self, *a): pass
srv = http.server.HTTPServer(("127.0.0.1", 0), H)
print(srv.server_address[1], flush=True)
srv.serve_forever()
"""


@dataclass
class StandIn:
    """A :class:`ManagedServer`-like handle around the stand-in child (start, crash, restart)."""

    config: ServerConfig
    label: str
    proc: subprocess.Popen[str] | None = None
    port: int = 0
    crash: str | None = None
    starts: int = 0

    def ensure_running(self) -> str:
        if self.alive():
            return self.url
        self.proc = subprocess.Popen(
            [sys.executable, "-c", _STAND_IN, str(list(self.config.cpus))], stdout=subprocess.PIPE, text=True
        )
        assert self.proc.stdout is not None
        self.port = int(self.proc.stdout.readline())
        self.starts += 1
        return self.url

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.alive() and self.proc else None

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def check(self) -> None:
        if self.proc is not None and not self.alive():
            raise ServerCrashedError(f"server ({self.label}) exited with {self.proc.returncode}")

    def stop(self) -> None:
        if self.alive() and self.proc:
            self.proc.terminate()
            self.proc.wait(5)

    def stats(self) -> dict[str, int]:
        return {"requests": self.starts, "note": "x"}  # type: ignore[dict-item]


def _get(url: str) -> dict:
    import json

    with urllib.request.urlopen(url, timeout=5) as resp:
        return json.loads(resp.read())


@pytest.fixture
def replicas(tmp_path):
    config = ServerConfig(model_path=tmp_path / "m.gguf", alias="m", n_threads=len(CORES))
    rs = ReplicaSet(config, partition_cores(CORES, 2), make_server=StandIn)
    yield rs
    rs.stop()


def test_cores_are_split_into_disjoint_groups_and_never_overbooked():
    assert partition_cores([0, 1], 2) == [(0,), (1,)]
    assert partition_cores([0, 1, 2], 2) == [(0, 1), (2,)]
    assert partition_cores([4, 5], 1) == [(4, 5)]
    with pytest.raises(ConfigError, match=r"replicas = 3 but this process may run on 2 core\(s\) \(0, 1\)"):
        partition_cores([0, 1], 3)
    with pytest.raises(ConfigError, match="replicas must be >= 1"):
        partition_cores([0, 1], 0)


def test_router_keeps_a_context_on_its_replica_and_sends_new_ones_to_the_least_busy():
    r = Router(2)
    assert r.acquire("db1") == 0
    assert r.acquire("db2") == 1  # db1 is in flight on 0
    r.release("db1")
    assert r.acquire("db3") == 0  # 0 is free again
    assert r.acquire("db1") == 0  # sticky: db1's prefix is in replica 0's cache
    r.release("db2")
    assert r.peek("db4") == 1
    assert r.peek("db2") == 1


def test_routes_nest_and_end_with_their_block():
    assert current_route() is None
    with route_requests("a") as outer:
        with route_requests("b") as inner:
            assert current_route() is inner
        assert current_route() is outer
    assert current_route() is None


def test_a_route_is_private_to_its_thread():
    seen: dict[str, object] = {}
    with route_requests("main"):
        t = threading.Thread(target=lambda: seen.update(other=current_route()))
        t.start()
        t.join()
    assert seen["other"] is None


@two_cores
def test_each_replica_runs_pinned_to_its_own_core_with_one_thread(replicas):
    urls = replicas.start_all()
    cpus = [tuple(_get(u)["cpus"]) for u in urls]
    assert cpus == [(CORES[0],), (CORES[1],)]
    assert [m.config.n_threads for m in replicas.members] == [1, 1]
    assert [m.config.cpus for m in replicas.members] == [(CORES[0],), (CORES[1],)]
    assert replicas.alive() and len(set(replicas.pids)) == 2


@two_cores
def test_two_contexts_in_flight_go_to_different_replicas_and_stay_there(replicas):
    with route_requests("db1"):
        a = _get(replicas.ensure_running())["pid"]
        with route_requests("db2"):
            b = _get(replicas.ensure_running())["pid"]
        assert _get(replicas.ensure_running())["pid"] == a  # resolved again in db1's block
    assert a != b
    with route_requests("db2"):
        assert _get(replicas.ensure_running())["pid"] == b  # later: db2 is still on its replica
    with route_requests("db3"):  # nothing in flight: the least busy, lowest index
        assert _get(replicas.ensure_running())["pid"] == a


@two_cores
def test_a_dead_replica_fails_its_own_route_with_its_name_and_restarts_on_its_core(replicas):
    replicas.start_all()
    with route_requests("db1"):  # two episodes in flight: db1 on replica 0, db2 on replica 1
        replicas.ensure_running()
        with route_requests("db2"):
            replicas.ensure_running()
    victim = replicas.members[1]
    os.kill(victim.pid, signal.SIGKILL)
    victim.proc.wait(5)
    with route_requests("db1"):
        replicas.check()  # the other replica's contexts are unaffected
    with route_requests("db2"), pytest.raises(ServerCrashedError, match=r"replica 1 of 2, core"):
        replicas.check()
    with route_requests("db2"):
        url = replicas.ensure_running()  # the next episode of db2 restarts it, on the same core
    assert victim.starts == 2
    assert _get(url)["cpus"] == [CORES[1]]


@two_cores
def test_pool_serves_a_model_from_pinned_replicas_on_request(tmp_path):
    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"GGUF" + bytes(32))
    pool = LocalServerPool(ModelStore(tmp_path / "cache"))
    server = pool.server(str(gguf), replicas=2)
    assert isinstance(server, ReplicaSet)
    assert [m.config.cpus for m in server.members] == [tuple(g) for g in partition_cores(CORES, 2)]
    assert server.members[0].label.startswith("replica 0 of 2, core")
    assert pool.replicas(str(gguf)) == 2
    assert pool.server(str(gguf)) is server  # no count asked: what runs
    with pytest.raises(ConfigError, match=r"already served by 2 replica\(s\); a run asks for replicas=1"):
        pool.server(str(gguf), replicas=1)
    pool.discard(str(gguf))
    assert pool.replicas(str(gguf)) is None
    with pytest.raises(ConfigError, match=r"replicas = \d+ but this process may run on"):
        pool.server(str(gguf), replicas=len(CORES) + 1)


def test_replica_logs_are_kept_apart(tmp_path):
    from stateflow.backends.local import ManagedServer

    a = ManagedServer(ServerConfig(model_path=Path("m.gguf"), alias="m", cpus=(0,)), log_dir=tmp_path)
    b = ManagedServer(ServerConfig(model_path=Path("m.gguf"), alias="m", cpus=(1,)), log_dir=tmp_path)
    assert a.log_path != b.log_path
    assert ServerConfig(model_path=Path("m"), alias="m", cpus=(1,)).child_config(5)["cpus"] == [1]


def test_replicas_is_a_setting_of_local_profiles_only():
    ModelProfile(name="l", model="m", provider="local", local_model="local-small", replicas=2)
    with pytest.raises(ConfigError, match="replicas = 2 applies to the embedded model only"):
        ModelProfile(name="o", model="m", provider="vllm", base_url="http://127.0.0.1:1/v1", replicas=2)
    with pytest.raises(ConfigError, match="replicas"):
        ModelProfile(name="l", model="m", provider="local", local_model="local-small", replicas=0)


@two_cores
def test_stats_of_a_replica_set_are_summed_numbers(replicas):
    replicas.start_all()
    assert replicas.stats() == {"requests": 2}  # one start each; the text field is left out


def test_default_workers_follow_the_embedded_model_and_replicas_never_exceed_workers_or_cores(monkeypatch):
    from stateflow import ModelAssignment
    from stateflow.backends.local import defaults

    remote = ModelProfile(name="r", model="m", provider="vllm", base_url="http://127.0.0.1:1/v1", api_key_env=None)
    assert defaults.default_workers(ModelAssignment.of(remote)) == 1
    assert defaults.default_workers(ModelAssignment.of("local")) == defaults.local_workers()
    mixed = ModelAssignment.of({"default": remote, "Solve": "local-small"})
    assert defaults.default_workers(mixed) == defaults.local_workers()
    assert 1 <= defaults.local_workers() <= min(2, len(CORES))  # measured on 2 cores: no more by default
    monkeypatch.setattr(defaults, "PINNED_REPLICAS", True)
    assert defaults.local_replicas(1) == 1
    assert defaults.local_replicas(1) == 1
    assert defaults.local_replicas(64) == len(CORES)
    monkeypatch.setattr(defaults, "PINNED_REPLICAS", False)
    assert defaults.local_replicas(2) == 1

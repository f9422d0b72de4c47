"""The Docker SQL backend beyond the shared contract (``TestDockerBackend`` in test_contract.py):
Spider gold replay, isolation of the server container, recovery, and cleanup (also after
``kill -9`` of the process that opened it)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from stateflow.envs.base import EnvironmentError_
from stateflow.envs.docker_engine import OWNER_LABEL, SESSION_LABEL, connect_engine, owner_id, sweep_stale
from stateflow.envs.sql import SqlEnv, open_sql_env

from .conftest import FAST_LIMITS, needs_spider
from .test_spider_replay import CORRUPT_GOLDS

PROJECT = Path(__file__).resolve().parents[3]


def _engine_problem() -> str | None:
    try:
        connect_engine(sweep=False)
    except EnvironmentError_ as err:
        return str(err)
    return None


ENGINE_PROBLEM = _engine_problem()
pytestmark = [
    pytest.mark.docker,
    pytest.mark.skipif(ENGINE_PROBLEM is not None, reason=f"no Docker engine: {ENGINE_PROBLEM}"),
]


@pytest.fixture(scope="module")
def client() -> Any:
    return connect_engine()


@pytest.fixture
def env() -> Iterator[SqlEnv]:
    environment = open_sql_env("demo", backend="docker", limits=FAST_LIMITS)
    yield environment
    environment.close()


def _labelled(client: Any, label: str) -> list[str]:
    """Names of the containers carrying ``label`` (one API call: no races with removals)."""
    return [c["Names"][0].lstrip("/") for c in client.api.containers(all=True, filters={"label": label})]


def test_container_is_isolated(env: SqlEnv, client: Any) -> None:
    container = client.containers.get(env.server.container.id)  # type: ignore[attr-defined]
    host = container.attrs["HostConfig"]
    assert host["NetworkMode"] == "none" and not host.get("PortBindings")
    assert host["CapDrop"] == ["ALL"] and not host.get("CapAdd") and host["Privileged"] is False
    assert "no-new-privileges" in host["SecurityOpt"]
    assert host["Memory"] == host["MemorySwap"] == 2**30 and host["PidsLimit"] > 0 and host["NanoCpus"] > 0
    networks = container.attrs["NetworkSettings"]["Networks"]
    assert all(not net.get("IPAddress") for net in networks.values())
    # the server runs as the unprivileged mysql user and listens on no TCP port
    users = {row[1] for row in container.top(ps_args="-o pid,user")["Processes"]}
    assert users <= {"3306", "mysql"}, users
    env.reset(0)
    assert env.step("SELECT @@skip_networking, @@secure_file_priv")[0] == [(1, "/var/lib/mysql-files/")]
    # the agent's account reads its own database and nothing else
    grants = env.step("SHOW GRANTS")[0]
    # default scope "benchmark": SELECT and SHOW VIEW on each of the benchmark's databases, nothing else
    assert grants[0][0].startswith("GRANT USAGE ON *.*"), grants
    assert len(grants) > 2 and all(g[0].startswith("GRANT SELECT, SHOW VIEW ON `") for g in grants[1:]), grants
    assert any("ON `library`.*" in g[0] for g in grants[1:]), grants
    socket_dir = Path(str(env.server.endpoint)).parent
    assert socket_dir.stat().st_mode & 0o077 == 0 and socket_dir.parent.stat().st_mode & 0o077 == 0


def test_a_dead_server_container_is_replaced(env: SqlEnv, client: Any) -> None:
    env.reset(0)
    first = env.server.container.id  # type: ignore[attr-defined]
    client.containers.get(first).kill()
    obs = env.step("SELECT count(*) FROM book")[0]
    if obs != [(10,)]:  # the step that hit the dead server reports the error; the next one works
        assert env.step("SELECT count(*) FROM book")[0] == [(10,)]
    assert env.server.container.id != first  # type: ignore[attr-defined]


def test_close_leaves_nothing(client: Any) -> None:
    environment = open_sql_env("demo", backend="docker")
    session = environment.server._session  # type: ignore[attr-defined]
    run_dir = session.run_dir_path()
    assert _labelled(client, f"{SESSION_LABEL}={session.token}") and run_dir.is_dir()
    environment.close()
    assert not _labelled(client, f"{SESSION_LABEL}={session.token}")
    assert not run_dir.exists()


_RUNNER = """
import sys, time
from stateflow.envs.bash import open_bash_env
from stateflow.envs.sql import open_sql_env
envs = [open_sql_env("demo", backend="docker")]
if sys.argv[1] == "both":
    bash = open_bash_env("demo", backend="docker")
    bash.reset(0)
    envs.append(bash)
print("ready", flush=True)
time.sleep(600)
"""


def test_kill_9_of_the_runner_leaves_nothing(client: Any) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-c", _RUNNER, "both"],
        stdout=subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": str(PROJECT)},
        cwd=PROJECT,
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == b"ready"
        owner = owner_id(proc.pid)
        created = _labelled(client, f"{OWNER_LABEL}={owner}")
        assert any("-sql-server-" in n for n in created) and any("-bash-agent-" in n for n in created), created
        run_dirs = list(Path("/tmp").glob(f"sf-docker-{proc.pid}-*"))
        assert run_dirs
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and (
            _labelled(client, f"{OWNER_LABEL}={owner}") or any(p.exists() for p in run_dirs)
        ):
            time.sleep(0.2)
        assert not _labelled(client, f"{OWNER_LABEL}={owner}")
        assert not any(p.exists() for p in run_dirs)
    finally:
        if proc.poll() is None:
            proc.kill()


def test_stale_labels_are_swept_on_connect(client: Any) -> None:
    from stateflow.envs.sql.docker_server import server_image

    dead = f"{owner_id().split('/')[0]}/999999999/0"  # no such pid: its owner is gone
    stale = client.containers.create(server_image(client), labels={OWNER_LABEL: dead}, network_mode="none")
    alive = client.containers.create(server_image(client), labels={OWNER_LABEL: owner_id()}, network_mode="none")
    try:
        removed = sweep_stale(client)
        names = {c["Names"][0].lstrip("/") for c in client.api.containers(all=True)}
        assert stale.name in removed and stale.name not in names
        assert alive.name in names  # this process is alive: its containers stay
    finally:
        alive.remove(force=True)


@pytest.mark.slow
@pytest.mark.shared_data
@needs_spider
def test_full_spider_gold_replay_on_docker() -> None:
    not_one: dict[int, float] = {}
    corrupt: set[int] = set()
    with open_sql_env("spider", backend="docker") as environment:
        assert len(environment) == 1034
        for index in range(len(environment)):
            environment.reset(index)
            environment.step(environment.task(index).gold)
            _, reward, done, info = environment.step("submit")
            assert done
            if info["corrupt_gold"]:
                corrupt.add(index)
            if reward != 1.0:
                not_one[index] = reward
    print(f"\nSpider gold replay on docker: {1034 - len(not_one)} of 1034 scored 1")
    assert corrupt == CORRUPT_GOLDS
    assert set(not_one) == CORRUPT_GOLDS, not_one


@pytest.mark.parametrize("benchmark", ["intercode-sql", "intercode-bash"])
def test_cli_runs_both_benchmarks_on_docker_with_workers(benchmark: str, tmp_path: Path, client: Any) -> None:
    """``stateflow run ... --backend docker --workers 2`` (gold replay policy): every episode
    scores 1 and no container is left afterwards."""
    out = tmp_path / "run"
    options = ["--policy", "oracle", "--backend", "docker", "--workers", "2", "--tasks", "0:6", "--out", str(out)]
    proc = subprocess.Popen(
        [sys.executable, "-m", "stateflow.cli.main", "run", benchmark, *options],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(PROJECT)},
        cwd=PROJECT,
    )
    _, stderr = proc.communicate(timeout=600)
    assert proc.returncode == 0, stderr[-2000:]
    records = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert len(records) == 6 and all(r["reward"] == 1.0 for r in records), records
    prefix = f"{owner_id().split('/')[0]}/{proc.pid}/"
    left = client.api.containers(all=True, filters={"label": OWNER_LABEL})
    assert not [c for c in left if c["Labels"][OWNER_LABEL].startswith(prefix)]

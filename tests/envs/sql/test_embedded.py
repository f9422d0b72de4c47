"""The embedded MariaDB backend: sharing, threads, restarts and no orphaned servers."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest
from stateflow.envs.base import EnvironmentError_
from stateflow.envs.sql import EmbeddedServerPool, SqlEnv, SqlLimits, open_sql_env
from stateflow.envs.sql.mariadb_process import sweep_stale_instances

from .conftest import FAST_LIMITS, needs_mariadb

pytestmark = needs_mariadb


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie still answers kill(0); it is dead for our purposes
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except OSError:
        return False


def _wait_dead(pid: int, seconds: float = 10.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not _alive(pid):
            return True
        time.sleep(0.05)
    return False


def test_envs_share_one_server_and_the_last_close_stops_it(sql_pool: EmbeddedServerPool) -> None:
    starts = sql_pool.starts
    first = open_sql_env("demo", pool=sql_pool)
    second = open_sql_env("demo", pool=sql_pool)
    assert first.server is second.server
    assert sql_pool.starts == starts + 1
    pid = first.server.process.pid  # type: ignore[attr-defined]
    first.close()
    assert _alive(pid)
    second.reset(0)
    assert second.step("SELECT 1")[0] == [(1,)]
    second.close()
    assert _wait_dead(pid)
    assert sql_pool.running() == 0


def test_concurrent_envs_in_threads(sql_pool: EmbeddedServerPool) -> None:
    results: dict[int, list[float]] = {}
    errors: list[BaseException] = []

    def worker(slot: int) -> None:
        try:
            with open_sql_env("demo", pool=sql_pool) as env:
                rewards = []
                for index in range(slot, len(env), 4):
                    env.reset(index)
                    env.step(env.task(index).gold)
                    rewards.append(env.step("submit")[1])
                results[slot] = rewards
        except BaseException as err:  # surfaced below
            errors.append(err)

    threads = [threading.Thread(target=worker, args=(slot,)) for slot in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors, errors
    assert sorted(r for rewards in results.values() for r in rewards) == [1.0] * 20


def test_server_started_from_a_finished_thread_survives(sql_pool: EmbeddedServerPool) -> None:
    # the parent-death signal follows the *thread* that forked the server: it must not be the caller's
    box: list[SqlEnv] = []
    t = threading.Thread(target=lambda: box.append(open_sql_env("demo", pool=sql_pool)))
    t.start()
    t.join()
    env = box[0]
    try:
        time.sleep(0.2)
        env.reset(0)
        assert env.step("SELECT count(*) FROM book")[0] == [(10,)]
    finally:
        env.close()


def test_dead_server_is_restarted_with_pristine_data(sql_pool: EmbeddedServerPool) -> None:
    with open_sql_env("demo", pool=sql_pool, limits=FAST_LIMITS) as env:
        env.reset(0)
        server = env.server
        generation = server.generation
        old_pid = server.process.pid  # type: ignore[attr-defined]
        os.kill(old_pid, signal.SIGKILL)
        assert _wait_dead(old_pid)
        obs, _, done, info = env.step("SELECT count(*) FROM book")
        assert isinstance(obs, str) and obs.startswith("Error executing query") and not done
        assert info["action_executed"] is False
        assert env.step("SELECT count(*) FROM book")[0] == [(10,)]
        assert server.generation == generation + 1
        assert server.process.pid != old_pid  # type: ignore[attr-defined]
        env.reset(10)
        env.step(env.task(10).gold)
        assert env.step("submit")[1] == 1.0


def test_killed_owner_leaves_no_server_and_sweep_cleans_up(tmp_path: Path) -> None:
    run_root = Path("/dev/shm" if Path("/dev/shm").is_dir() else "/tmp") / f"sf-orphan-{os.getpid()}"
    script = textwrap.dedent(
        f"""
        import sys, time
        from pathlib import Path
        from stateflow.envs.sql import EmbeddedServerPool, open_sql_env
        env = open_sql_env("demo", pool=EmbeddedServerPool(run_root=Path({str(run_root)!r})))
        print(env.server.process.pid, env.server.process.instance_dir, flush=True)
        time.sleep(60)
        """
    )
    child = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        line = child.stdout.readline() if child.stdout else ""
        pid_text, instance_dir = line.split()
        server_pid = int(pid_text)
        assert _alive(server_pid)
        child.kill()  # no atexit, no cleanup: only the parent-death signal can stop the server
        child.wait(10)
        assert _wait_dead(server_pid), "mariadbd outlived its killed owner"
        assert Path(instance_dir).is_dir()  # left behind by the killed owner...
        removed = sweep_stale_instances(run_root, min_age=0)
        assert Path(instance_dir) in removed and not Path(instance_dir).exists()  # ...and swept
    finally:
        if child.poll() is None:
            child.kill()
        sweep_stale_instances(run_root, min_age=0)
        if run_root.exists():
            run_root.rmdir()


def test_open_sql_env_argument_errors() -> None:
    with pytest.raises(ValueError, match="unknown SQL backend"):
        open_sql_env("demo", backend="oracle")
    with pytest.raises(ValueError, match="needs dsn"):
        open_sql_env("demo", backend="dsn")
    with pytest.raises(ValueError, match="unsupported scheme"):
        open_sql_env("demo", backend="dsn", dsn="postgres://u:p@h:1")
    with pytest.raises(EnvironmentError_, match="cannot connect"):
        open_sql_env("demo", backend="dsn", dsn="mysql://u:p@127.0.0.1:1")


def test_step_before_reset_is_an_error(sql_pool: EmbeddedServerPool) -> None:
    with open_sql_env("demo", pool=sql_pool) as env, pytest.raises(EnvironmentError_, match="reset"):
        env.step("SELECT 1")


def test_sweep_leaves_live_instances_alone(sql_pool: EmbeddedServerPool) -> None:
    with open_sql_env("demo", pool=sql_pool) as env:
        instance = env.server.process.instance_dir  # type: ignore[attr-defined]
        assert instance not in sweep_stale_instances(instance.parent, min_age=0)
        env.reset(0)
        assert env.step("SELECT 1")[0] == [(1,)]


@pytest.mark.parametrize(("max_rows", "too_large"), [(12, False), (11, True)])
def test_row_cap_boundary(sql_pool: EmbeddedServerPool, max_rows: int, too_large: bool) -> None:
    limits = SqlLimits(max_rows=max_rows)
    with open_sql_env("demo", pool=sql_pool, limits=limits) as env:
        env.reset(10)  # weather.reading has 12 rows
        obs = env.step("SELECT * FROM reading")[0]
        assert isinstance(obs, str) == too_large
        assert env.step("SELECT count(*) FROM reading")[0] == [(12,)]

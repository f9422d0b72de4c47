"""Concurrency and clean-up: several environments in threads, nothing left on the host."""

from __future__ import annotations

import gc
import os
import signal
import subprocess
from concurrent.futures import ThreadPoolExecutor

from stateflow.envs.bash import open_bash_env

from .conftest import leftovers, needs_sandbox

pytestmark = needs_sandbox


def _worker(k: int) -> tuple[list[float], str, str]:
    with open_bash_env("demo") as env:
        env.reset(0)
        env.step(f"echo worker{k} > /root/mine.txt")
        mine = env.step("cat /root/mine.txt")[0]
        rewards = []
        for i in range(k % 3, len(env), 3):
            env.reset(i)
            env.step(env.task(i).gold)
            rewards.append(env.step("submit")[1])
        env.reset(0)
        after_reset = env.step("cat /root/mine.txt")[0]
    return rewards, mine, after_reset


def test_environments_in_parallel_threads_are_isolated() -> None:
    with ThreadPoolExecutor(max_workers=4) as pool:
        results = list(pool.map(_worker, range(4)))
    for k, (rewards, mine, after_reset) in enumerate(results):
        assert rewards and all(r == 1.0 for r in rewards), (k, rewards)
        assert mine == f"worker{k}\n"  # each sees only its own writes
        assert "No such file" in after_reset
    assert not any(leftovers().values())


def test_mounts_never_reach_the_host_mount_table() -> None:
    with open_bash_env("demo") as env:
        env.reset(0)
        assert env.step("findmnt -rn -o FSTYPE / ")[0] == "overlay\n"
        host = subprocess.run(["findmnt", "-rn"], capture_output=True, text=True).stdout
        assert "sf-bash" not in host
        assert [p for p in leftovers()["processes"] if "sf-bash-keeper" in p]  # the keeper holds them
    assert not any(leftovers().values())


def test_an_unclosed_environment_is_released_by_the_garbage_collector() -> None:
    env = open_bash_env("demo")
    env.reset(0)
    env.step("submit")  # starts the gold sandbox too
    assert len([p for p in leftovers()["processes"] if "sf-bash-keeper" in p]) == 2
    del env
    gc.collect()
    assert not any(leftovers().values())


def test_a_dead_spawner_is_replaced() -> None:
    with open_bash_env("demo") as env:
        env.reset(0)
        spawner = env._agent._box._spawner.proc
        os.kill(spawner.pid, signal.SIGKILL)
        spawner.wait()
        assert env.step("echo still works")[0] == "still works\n"
        assert env._agent._box._spawner.proc.pid != spawner.pid

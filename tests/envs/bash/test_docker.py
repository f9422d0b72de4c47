"""The Docker bash backend: build context, isolation, hostile actions, reset fidelity, cleanup.

The execution-semantics tests and the demo gold replay run on Docker through the parametrized
``demo_env``/``fast_env`` fixtures (conftest.BACKENDS); the backend-neutral hostile-action tests
of test_containment.py run here against a Docker ``hostile`` fixture.
"""

from __future__ import annotations

import io
import os
import subprocess
import tarfile
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from stateflow.envs.base import EnvironmentError_
from stateflow.envs.bash import BashEnv, open_bash_env
from stateflow.envs.bash.docker_backend import _context_tar
from stateflow.envs.bash.layers import GITIGNORE
from stateflow.envs.bash.tasks import demo_source
from stateflow.envs.docker_engine import SESSION_LABEL

from .conftest import DOCKER_PROBLEM, FAST, needs_shared_data
from .test_containment import (  # noqa: F401 - collected here, run against the Docker fixture
    test_background_daemons_do_not_outlive_the_step,
    test_binary_output,
    test_host_files_are_not_visible,
    test_kill_everything,
    test_memory_hog_is_stopped,
    test_no_network,
    test_only_loopback_interface,
    test_ten_megabytes_of_output_are_capped,
    test_yes_into_a_file_stops_at_the_file_size_limit,
)
from .test_gold_replay import NONDETERMINISTIC, _replay

needs_engine = pytest.mark.skipif(DOCKER_PROBLEM is not None, reason=f"no Docker engine: {DOCKER_PROBLEM}")
# Gold outputs that differ between two Docker containers besides the sandbox's list: 96 and 157
# print `df` of the container root, an overlay on the host disk whose usage other processes
# change between the two runs (the sandbox's root is a private tmpfs). 55 (fs_1 #55) runs
# `grep -r Hello *` from `/`: in a container it never ends within the 10 s command timeout
# (measured: the bare `grep -r Hello *` timed out on every try), so its output is whatever grep
# printed before the kill, which depends on the machine's load (it failed once in a full CI run
# with answer_similarity 0.2, and passed alone).
DOCKER_NONDETERMINISTIC = NONDETERMINISTIC | {55, 96, 157}


def test_build_context_holds_dockerfile_gitignore_and_the_task_tree() -> None:
    with tarfile.open(fileobj=io.BytesIO(_context_tar(demo_source()))) as ctx:
        assert sorted(ctx.getnames()) == ["Dockerfile", "fs.tar.gz", "gitignore", "pid1.py", "setup.sh"]
        assert ctx.extractfile("gitignore").read().decode() == GITIGNORE
        assert b"FROM ${BASE}" in ctx.extractfile("Dockerfile").read()
        fs_bytes = ctx.extractfile("fs.tar.gz").read()
    with tarfile.open(fileobj=io.BytesIO(fs_bytes)) as fs:
        assert "./demo/data/sales.csv" in fs.getnames()
    assert _context_tar(demo_source()) == _context_tar(demo_source())  # same inputs, same image hash


def test_no_engine_is_a_clear_error() -> None:
    if DOCKER_PROBLEM is None:
        pytest.skip("a Docker engine is available here")
    with pytest.raises(EnvironmentError_, match="backend='sandbox'"):
        open_bash_env("demo", backend="docker")


def test_unknown_backend_is_rejected() -> None:
    with pytest.raises(EnvironmentError_, match="sandbox, docker"):
        open_bash_env("demo", backend="podman")


@pytest.fixture(scope="module")
def hostile() -> Iterator[tuple[BashEnv, dict[str, str]]]:
    """A Docker demo environment with short limits; afterwards a host marker file is intact."""
    if DOCKER_PROBLEM is not None:
        pytest.skip(f"no Docker engine: {DOCKER_PROBLEM}")
    env = open_bash_env("demo", backend="docker", limits=FAST)
    env.reset(0)
    image = env._agent._container.image.id
    marker = Path(f"/tmp/sf-host-marker-{os.getpid()}")
    marker.write_text("host\n")
    yield env, {"marker": "host\n"}
    try:
        assert marker.read_text() == "host\n", "a host file changed"
        assert env._agent._client.images.get(image).id == image
    finally:
        marker.unlink()
        env.close()


def _next_task_is_clean(env: BashEnv) -> None:
    env.reset(13)  # "find /demo -type d | wc -l"
    env.step(env.task(13).gold)
    assert env.step("submit")[1] == 1.0
    env.reset(0)


@pytest.mark.docker
@needs_engine
def test_rm_rf_root_is_undone_by_reset(hostile: tuple[BashEnv, dict]) -> None:
    env, _ = hostile
    env.reset(0)
    removal = env.step("rm -rf --no-preserve-root / 2>/dev/null")[0]
    if removal != "Command timed out":  # a loaded machine may stop it part-way at the 3 s limit
        obs, _, _, info = env.step("ls /demo")
        assert not info["action_executed"] and "no such file" in obs.lower()
    _next_task_is_clean(env)


@pytest.mark.docker
@needs_engine
def test_fork_bomb_hits_the_pids_cap(hostile: tuple[BashEnv, dict]) -> None:
    env, _ = hostile
    env.reset(0)
    count = "ps -eo pid= | wc -l"
    idle = env.step(count)[0]  # pid 1 and this step's own processes
    _, _, _, info = env.step(":(){ :|:& };:")
    assert not info["action_executed"]
    assert env.step("echo still here")[0] == "still here\n"
    assert subprocess.run(["true"]).returncode == 0  # the host can still fork
    assert env.step(count)[0] == idle  # nothing of the bomb survived the step
    _next_task_is_clean(env)


@pytest.mark.docker
@needs_engine
def test_container_is_isolated(hostile: tuple[BashEnv, dict]) -> None:
    env, _ = hostile
    env.reset(0)
    container: Any = env._agent._container
    container.reload()
    host = container.attrs["HostConfig"]
    assert host["NetworkMode"] == "none" and not host.get("PortBindings") and host["Privileged"] is False
    assert host["CapDrop"] == ["ALL"] and set(host["CapAdd"]) <= {"CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID"}
    assert "no-new-privileges" in host["SecurityOpt"]
    assert host["Memory"] == host["MemorySwap"] == FAST.memory_bytes and host["PidsLimit"] == FAST.processes
    assert host["NanoCpus"] > 0 and {u["Name"] for u in host["Ulimits"]} == {"fsize", "nofile", "cpu"}
    # inside: no capability beyond the four, no network interface but lo, no privilege gain
    cap_eff = int(env.step("grep CapEff /proc/self/status | cut -f2")[0], 16)
    assert cap_eff & ~((1 << 0) | (1 << 1) | (1 << 3) | (1 << 4)) == 0
    assert env.step("grep NoNewPrivs /proc/self/status")[0].split() == ["NoNewPrivs:", "1"]
    _, _, _, info = env.step("mount -t tmpfs none /mnt")
    assert not info["action_executed"]


@pytest.mark.docker
@needs_engine
def test_reset_restores_the_whole_root() -> None:
    with open_bash_env("demo", backend="docker") as env:
        env.reset(0)
        taken = env._agent.replacements
        env.step("ls /demo")  # reads only: the container is kept
        env.reset(0)
        assert env._agent.replacements == taken
        # /tmp does not exist after a reset (upstream's git clean removes it): made here to be undone
        env.step("echo x >> /demo/README.md; touch /etc/evil /usr/bin/evil; mkdir /tmp; touch /tmp/t; rm /bin/ls")
        before = env.step("stat -c %Y /demo /demo/docs")[0]
        env.reset(0)
        assert env._agent.replacements == taken + 1
        obs = env.step("ls /etc/evil /usr/bin/evil /tmp/t 2>&1 | wc -l; git -C / status --short; ls /bin/ls")[0]
        assert obs == "3\n/bin/ls\n", obs
        assert env.step("stat -c %Y /demo /demo/docs")[0] == before  # pristine timestamps too


@pytest.mark.docker
@needs_engine
def test_close_leaves_no_container() -> None:
    env = open_bash_env("demo", backend="docker")
    env.reset(0)
    env.step("true")
    env.step("submit")
    tokens = [env._agent._session.token, env._eval._session.token]
    client = env._agent._client
    env.close()
    for token in tokens:
        assert client.api.containers(all=True, filters={"label": f"{SESSION_LABEL}={token}"}) == []


def _replay_part(indices: list[int]) -> dict[int, tuple[float, dict, str]]:
    with open_bash_env("nl2bash", backend="docker") as env:
        assert len(env) == 200
        return {i: (*_replay(env, i), env.task(i).gold) for i in indices}


@pytest.mark.slow
@pytest.mark.shared_data
@pytest.mark.docker
@needs_engine
@needs_shared_data
def test_nl2bash_gold_replay_on_docker() -> None:
    with ThreadPoolExecutor(max_workers=4) as pool:
        parts = pool.map(_replay_part, [list(range(k, 200, 4)) for k in range(4)])
    results = {i: r for part in parts for i, r in part.items()}
    assert sorted(results) == list(range(200))
    failures = {}
    for i, (reward, info, gold) in sorted(results.items()):
        if i in DOCKER_NONDETERMINISTIC:
            assert info["reward"]["file_diff"] == info["reward"]["file_changes"] == 0.33
        elif reward != 1.0:
            failures[i] = (gold, info["reward"], info["diff_miss"], info["diff_extra"])
    ones = sum(1 for reward, _, _ in results.values() if reward == 1.0)
    print(f"\nNL2Bash gold replay on docker: {ones} of 200 scored 1; may vary: {sorted(DOCKER_NONDETERMINISTIC)}")
    assert not failures
    assert ones >= 196


@pytest.mark.docker
@needs_engine
def test_a_stopped_container_is_an_error_observation_then_replaced() -> None:
    with open_bash_env("demo", backend="docker") as env:
        env.reset(0)
        env._agent._container.kill()
        obs, _, _, info = env.step("echo hi")
        assert not info["action_executed"] and "container is not running or not reachable" in obs
        env.reset(0)
        assert env.step("echo hi")[0] == "hi\n"

"""Fixtures for the bash environment tests: real sandboxes that never outlive the session."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from stateflow.envs.base import EnvironmentError_
from stateflow.envs.bash import BashEnv, SandboxLimits, open_bash_env
from stateflow.envs.bash.cgroups import CGROUP_ROOT
from stateflow.envs.datasets import DataNotFoundError, locate_intercode_dir

# A short wall-clock limit keeps timeout and fork-bomb tests at a few seconds each; a small disk
# keeps the "write a gigabyte" test quick.
FAST = SandboxLimits(timeout_s=3.0, cpu_seconds=5, disk_bytes=160 * 2**20, memory_bytes=512 * 2**20)


def _sandbox_problem() -> str | None:
    try:
        from stateflow.envs.bash.rootfs import locate_base_root
        from stateflow.envs.bash.sandbox import check_sandbox_support

        check_sandbox_support()
        locate_base_root()
    except EnvironmentError_ as err:
        return str(err)
    return None


SANDBOX_PROBLEM = _sandbox_problem()
needs_sandbox = pytest.mark.skipif(SANDBOX_PROBLEM is not None, reason=f"bash sandbox unavailable: {SANDBOX_PROBLEM}")


def _docker_problem() -> str | None:
    try:
        from stateflow.envs.bash.docker_backend import connect_docker

        connect_docker()
    except EnvironmentError_ as err:
        return str(err)
    return None


DOCKER_PROBLEM = _docker_problem()
# Fixtures parametrized with BACKENDS run their tests on every backend (the contract).
BACKENDS = [pytest.param("sandbox"), pytest.param("docker", marks=pytest.mark.docker)]


def open_backend(backend: str, **kwargs: object) -> BashEnv:
    """The demo environment on ``backend``, or a skip naming why that backend is unavailable."""
    problem = SANDBOX_PROBLEM if backend == "sandbox" else DOCKER_PROBLEM
    if problem is not None:
        pytest.skip(f"bash {backend} backend unavailable: {problem}")
    return open_bash_env("demo", backend=backend, **kwargs)  # type: ignore[arg-type]


def bash_data_dir() -> Path | None:
    try:
        return locate_intercode_dir(need="bash") / "bash"
    except DataNotFoundError:
        return None


needs_shared_data = pytest.mark.skipif(
    bash_data_dir() is None, reason="InterCode bash data (../shared/data/intercode/bash) not found"
)


def leftovers() -> dict[str, list[str]]:
    """This process's sandbox resources visible from the host: mounts, processes, cgroups, state dirs.

    Names carry the creating pid, so sandboxes of other processes (a parallel test run) are ignored.
    """
    tag = f"sf-bash-{os.getpid()}-"
    mounts = subprocess.run(["findmnt", "-rn", "-o", "TARGET,SOURCE"], capture_output=True, text=True).stdout
    procs = subprocess.run(["pgrep", "-af", "sf-bash-"], capture_output=True, text=True).stdout
    groups = []
    for sub in ("", "pids", "memory"):
        if (CGROUP_ROOT / sub).is_dir():
            groups += [str(p) for p in (CGROUP_ROOT / sub).glob(f"stateflow-bash-{os.getpid()}-*")]
    return {
        "mounts": [line for line in mounts.splitlines() if "sf-bash" in line],
        "processes": [
            line
            for line in procs.splitlines()
            if any(t in line for t in (tag, f"sf-bash-keeper-{os.getpid()}", f"sf-bash-spawner-{os.getpid()}"))
            and "pgrep" not in line
        ],
        "cgroups": groups,
        "state_dirs": [str(p) for p in Path("/tmp").glob(f"{tag}*")],
    }


@pytest.fixture(scope="session", autouse=True)
def _nothing_left_behind() -> Iterator[None]:
    """After the whole bash test session, no sandbox resource may remain on the host."""
    yield
    if SANDBOX_PROBLEM is None:
        import gc

        gc.collect()
        left = leftovers()
        assert not any(left.values()), f"sandbox resources left behind: {left}"


@pytest.fixture(scope="module", params=BACKENDS)
def demo_env(request: pytest.FixtureRequest) -> Iterator[BashEnv]:
    with open_backend(request.param) as env:
        yield env


@pytest.fixture(scope="module", params=BACKENDS)
def fast_env(request: pytest.FixtureRequest) -> Iterator[BashEnv]:
    """Demo tasks with a 2 s command timeout (for timeouts and hostile actions)."""
    with open_backend(request.param, limits=FAST) as env:
        yield env

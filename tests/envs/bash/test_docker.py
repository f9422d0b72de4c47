"""Optional Docker backend: build context always; real containers only where an engine runs."""

from __future__ import annotations

import io
import tarfile

import pytest

from envs.base import EnvironmentError_
from envs.bash import open_bash_env
from envs.bash.docker_backend import _context_tar, connect_docker
from envs.bash.layers import GITIGNORE
from envs.bash.tasks import demo_source


def _engine_problem() -> str | None:
    try:
        connect_docker()
    except EnvironmentError_ as err:
        return str(err)
    return None


ENGINE_PROBLEM = _engine_problem()
needs_engine = pytest.mark.skipif(ENGINE_PROBLEM is not None, reason=f"no Docker engine: {ENGINE_PROBLEM}")


def test_build_context_holds_dockerfile_gitignore_and_the_task_tree() -> None:
    with tarfile.open(fileobj=io.BytesIO(_context_tar(demo_source()))) as ctx:
        assert sorted(ctx.getnames()) == ["Dockerfile", "fs.tar.gz", "gitignore"]
        assert ctx.extractfile("gitignore").read().decode() == GITIGNORE
        assert b"ARG PACKAGES" in ctx.extractfile("Dockerfile").read()
        fs_bytes = ctx.extractfile("fs.tar.gz").read()
    with tarfile.open(fileobj=io.BytesIO(fs_bytes)) as fs:
        assert "./demo/data/sales.csv" in fs.getnames()


def test_no_engine_is_a_clear_error() -> None:
    if ENGINE_PROBLEM is None:
        pytest.skip("a Docker engine is available here")
    with pytest.raises(EnvironmentError_, match="backend='sandbox'"):
        open_bash_env("demo", backend="docker")


def test_unknown_backend_is_rejected() -> None:
    with pytest.raises(EnvironmentError_, match="sandbox, docker"):
        open_bash_env("demo", backend="podman")


@pytest.mark.docker
@needs_engine
def test_docker_gold_replay_on_demo() -> None:
    with open_bash_env("demo", backend="docker") as env:
        for i in range(len(env)):
            env.reset(i)
            env.step(env.task(i).gold)
            assert env.step("submit")[1] == 1.0, env.task(i).gold


@pytest.mark.docker
@needs_engine
def test_docker_execution_semantics() -> None:
    with open_bash_env("demo", backend="docker") as env:
        env.reset(0)
        assert env.step('echo "a  b"')[0] == "a\n"
        env.step("cd /demo/docs")
        assert env.step("pwd")[0] == "/demo/docs\n"
        assert env.step('echo "unbalanced')[0] == "Malformed command"

"""Fixtures for runner tests: skip with a reason when an environment backend cannot start here."""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from stateflow.envs.datasets import DataNotFoundError, locate_intercode_dir
from stateflow.tasks.harness.registry import default_registry
from stateflow.tasks.harness.runner import RunSpec, RunSummary, evaluate

from tests.tasks.test_runner import ORACLE_SPEC

if TYPE_CHECKING:
    from stateflow.envs.sql.env import SqlEnv


@pytest.fixture(scope="session")
def sql_available() -> None:
    if shutil.which("mariadbd") is None and shutil.which("mysqld") is None:
        pytest.skip("no MariaDB/MySQL server binary: run scripts/setup.sh (installs mariadb-server)")


@pytest.fixture
def sql_env(sql_available: None) -> Iterator[SqlEnv]:
    """The SQL environment on the demo databases (a fresh one per test), closed afterwards."""
    from stateflow.envs.sql import open_sql_env

    env = open_sql_env("demo")
    yield env
    env.close()


@pytest.fixture(scope="session")
def bash_available() -> None:
    if shutil.which("bwrap") is None:
        pytest.skip("bubblewrap is not installed: run scripts/setup.sh")


@pytest.fixture(scope="session")
def shared_data() -> Path:
    try:
        return locate_intercode_dir(need="sql")
    except DataNotFoundError as err:
        pytest.skip(f"InterCode data not present ({err})")


@pytest.fixture(scope="session")
def full_oracle_run(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str, str], RunSummary]:
    """``run(benchmark, dataset)``: the oracle StateFlow run over a whole dataset with two threads.

    Computed once per session (a full Spider pass is ~15 s of CPU): the full-dataset test checks it
    against the known broken golds, and the Ray test compares its own run with it task by task.
    """
    done: dict[tuple[str, str], RunSummary] = {}

    def run(benchmark: str, dataset: str) -> RunSummary:
        if (benchmark, dataset) not in done:
            out = tmp_path_factory.mktemp(f"oracle-{dataset}")
            spec = RunSpec(
                default_registry().get(benchmark), ("stateflow",), out=out, dataset=dataset, workers=2, **ORACLE_SPEC
            )
            done[benchmark, dataset] = evaluate(spec, progress=False)
        return done[benchmark, dataset]

    return run

"""Fixtures for runner tests: skip with a reason when an environment backend cannot start here."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from stateflow.envs.datasets import DataNotFoundError, locate_intercode_dir


@pytest.fixture(scope="session")
def sql_available() -> None:
    if shutil.which("mariadbd") is None and shutil.which("mysqld") is None:
        pytest.skip("no MariaDB/MySQL server binary: run scripts/setup.sh (installs mariadb-server)")


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

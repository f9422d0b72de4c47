"""Fixtures for the SQL environment tests: private server pools that never outlive the session."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from stateflow.envs.datasets import DataNotFoundError, locate_intercode_dir
from stateflow.envs.sql import EmbeddedServerPool, SqlLimits

# Short limits so timeout and watchdog tests take about a second.
FAST_LIMITS = SqlLimits(statement_timeout=1.0, watchdog_grace=0.5, max_rows=5_000, max_chars=500_000)


def mariadb_missing() -> bool:
    path = "/usr/sbin:/usr/bin:/usr/local/sbin:/usr/local/bin"
    return shutil.which("mariadbd", path=path) is None or shutil.which("mariadb-install-db", path=path) is None


needs_mariadb = pytest.mark.skipif(mariadb_missing(), reason="MariaDB server not installed (run scripts/setup_sql.sh)")


def spider_dir() -> Path | None:
    try:
        root = locate_intercode_dir(need="sql") / "sql"
    except DataNotFoundError:
        return None
    return root if (root / "ic_spider_dev.json").is_file() and (root / "ic_spider_dbs.sql").is_file() else None


needs_spider = pytest.mark.skipif(spider_dir() is None, reason="InterCode Spider data (../shared/data) not present")


@pytest.fixture(scope="session")
def sql_pool(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedServerPool]:
    """A private pool (its own run directory) closed at the end of the session."""
    if mariadb_missing():
        pytest.skip("MariaDB server not installed (run scripts/setup_sql.sh)")
    pool = EmbeddedServerPool(run_root=Path("/dev/shm" if Path("/dev/shm").is_dir() else "/tmp") / "sf-test-sql")
    yield pool
    pool.close_all()

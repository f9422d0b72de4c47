"""`stateflow data`: locate and fetch, the download tested against a local HTTP server."""

from __future__ import annotations

import functools
import hashlib
import shutil
import threading
from collections.abc import Iterator
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from stateflow.tasks.cli.data import DATA_FILES, FetchError, fetch_files, locate_files

from stateflow.cli.main import main

from .conftest import needs_spider, spider_dir


class _QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:  # keep pytest output clean
        pass


@pytest.fixture
def http_root(tmp_path: Path) -> Iterator[tuple[Path, str]]:
    """A directory served on 127.0.0.1 and its base URL."""
    root = tmp_path / "served"
    root.mkdir()
    handler = functools.partial(_QuietHandler, directory=str(root))
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield root, f"http://127.0.0.1:{server.server_address[1]}/"
    server.shutdown()
    server.server_close()


@needs_spider
def test_fetch_from_upstream_and_mirror_layouts(http_root: tuple[Path, str], tmp_path: Path) -> None:
    root, url = http_root
    source = spider_dir()
    assert source is not None
    # upstream's repository layout for the dump, a mirror layout (sql/...) for the others
    (root / "data/sql/spider").mkdir(parents=True)
    shutil.copy(source / "ic_spider_dbs.sql", root / "data/sql/spider/ic_spider_dbs.sql")
    (root / "sql").mkdir()
    for name in ("ic_spider_dev.json", "sql_queries.csv"):
        shutil.copy(source / name, root / "sql" / name)
    dest = tmp_path / "dest"
    results = dict((f.path, outcome) for f, outcome in fetch_files(dest, base_url=url, component="sql"))
    assert results["sql/ic_spider_dbs.sql"] == f"downloaded from {url}data/sql/spider/ic_spider_dbs.sql"
    assert results["sql/ic_spider_dev.json"] == f"downloaded from {url}sql/ic_spider_dev.json"
    assert [status for _, _, status in locate_files(str(dest), "sql")] == ["ok"] * 3
    # second run: nothing to download
    assert {o for _, o in fetch_files(dest, base_url=url, component="sql")} == {"present"}
    assert main(["data", "locate", "--data", str(dest), "--only", "sql"]) == 0


def test_fetch_rejects_a_wrong_checksum(http_root: tuple[Path, str], tmp_path: Path) -> None:
    root, url = http_root
    (root / "sql").mkdir()
    (root / "sql" / "sql_queries.csv").write_text("query,gold,db\ntampered,SELECT 1,x\n")
    with pytest.raises(FetchError, match="does not match"):
        fetch_files(tmp_path / "dest", base_url=url, component="sql")
    assert not (tmp_path / "dest" / "sql" / "sql_queries.csv").exists()


def test_fetch_offline_reports_unavailable(http_root: tuple[Path, str], tmp_path: Path) -> None:
    _, url = http_root  # serves nothing: every file 404s
    results = fetch_files(tmp_path / "dest", base_url=url, component="bash")
    assert all(outcome.startswith("unavailable") for _, outcome in results)
    assert main(["data", "fetch", "--dest", str(tmp_path / "d2"), "--base-url", url, "--only", "sql"]) == 1


def test_locate_flags_damaged_files(tmp_path: Path) -> None:
    (tmp_path / "sql").mkdir()
    (tmp_path / "sql" / "sql_queries.csv").write_text("not the real file")
    statuses = {f.path: status for f, _, status in locate_files(str(tmp_path), "sql")}
    if statuses["sql/sql_queries.csv"] != "checksum mismatch":
        pytest.fail(f"damaged file not detected: {statuses}")
    assert main(["data", "locate", "--data", str(tmp_path), "--only", "sql"]) == 1


def test_manifest_matches_shared_data() -> None:
    source = spider_dir()
    if source is None:
        pytest.skip("InterCode data (../shared/data) not present")
    base = source.parent
    for item in DATA_FILES:
        path = base / item.path
        if path.exists():
            assert hashlib.sha256(path.read_bytes()).hexdigest() == item.sha256, item.path

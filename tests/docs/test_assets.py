"""The site's one third-party script is fetched pinned: kept only when its sha512 matches, and
from the cache afterwards (scripts/docs_assets.py), against a registry on 127.0.0.1."""

from __future__ import annotations

import base64
import hashlib
import http.server
import io
import sys
import tarfile
import threading
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))
from docs_assets import IFRAME_WORKER, fetch  # scripts/ is not a package

SHIM = b"/* shim */ window.Worker = window.Worker;\n"


def _tarball(content: bytes) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        info = tarfile.TarInfo("package/shim/index.js")
        info.size = len(content)
        tar.addfile(info, io.BytesIO(content))
    return buf.getvalue()


def _integrity(data: bytes) -> str:
    return "sha512-" + base64.b64encode(hashlib.sha512(data).digest()).decode()


@pytest.fixture
def registry() -> Iterator[tuple[str, list[str]]]:
    """A one-package npm registry on 127.0.0.1; yields its URL and the paths requested."""
    body, requested = _tarball(SHIM), []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            requested.append(self.path)
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}", requested
    server.shutdown()
    server.server_close()


def test_a_matching_tarball_is_kept_and_then_read_from_the_cache(registry, tmp_path, monkeypatch) -> None:
    url, requested = registry
    monkeypatch.setenv("STATEFLOW_CACHE_DIR", str(tmp_path))
    item = replace(IFRAME_WORKER, registry=url, integrity=_integrity(_tarball(SHIM)))
    path = fetch(item)
    assert path.read_bytes() == SHIM and path.is_relative_to(tmp_path)
    assert requested == [f"/iframe-worker/-/iframe-worker-{IFRAME_WORKER.version}.tgz"]
    assert fetch(item) == path and len(requested) == 1  # no second download


def test_a_tarball_with_another_hash_is_refused_and_nothing_is_kept(registry, tmp_path, monkeypatch) -> None:
    url, _ = registry
    monkeypatch.setenv("STATEFLOW_CACHE_DIR", str(tmp_path))
    item = replace(IFRAME_WORKER, registry=url)  # the real pin; the served tarball differs
    with pytest.raises(ValueError, match="is not the pinned"):
        fetch(item)
    assert not item.path().exists() and not list(tmp_path.rglob("*.js"))

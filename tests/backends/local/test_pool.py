"""Pool and server plumbing that needs no model: profile checks, explicit GGUF paths, settings."""

from __future__ import annotations

import socket
import threading

import pytest

from stateflow.backends.local import (
    LocalServerPool,
    ManagedServer,
    ModelNotFoundError,
    ModelStore,
    ServerConfig,
    ServerStartError,
    cpu_cores,
    default_pool,
    resolve_endpoint,
    runtime_available,
)
from stateflow.errors import ConfigError
from stateflow.profiles import BUILTIN_PROFILES, ModelProfile


def test_resolve_endpoint_rejects_non_local_profiles():
    with pytest.raises(ConfigError, match="not served by the embedded local LLM"):
        resolve_endpoint(BUILTIN_PROFILES["gpt-4o-mini"], LocalServerPool())


def test_default_pool_is_one_object_per_process():
    pools: list[LocalServerPool] = []
    threads = [threading.Thread(target=lambda: pools.append(default_pool())) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len({id(p) for p in pools}) == 1


def test_explicit_gguf_path_as_local_model(tmp_path):
    gguf = tmp_path / "my-model.gguf"
    gguf.write_bytes(b"GGUF" + bytes(32))
    pool = LocalServerPool(ModelStore(tmp_path / "cache"), n_ctx=16384, cache_bytes=0)
    server = pool.server(str(gguf))
    assert server.config.model_path == gguf.resolve()
    assert server.config.alias == "my-model"
    assert (server.config.n_ctx, server.config.cache_bytes) == (16384, 0)
    assert pool.location(str(gguf)).source == "explicit"
    assert pool.server(str(gguf)) is server  # one server per model per pool
    assert pool.running() == {}  # nothing started yet


def test_missing_catalogued_model_is_reported_before_any_process_starts(tmp_path):
    pool = LocalServerPool(ModelStore(tmp_path / "empty"), allow_network=False)
    profile = ModelProfile(name="p", model="m", provider="local", local_model="local-small", api_key_env=None)
    with pytest.raises(ModelNotFoundError, match=r"scripts/setup_local_llm\.sh"):
        resolve_endpoint(profile, pool)


def test_server_defaults_follow_platform_settings(tmp_path):
    config = ServerConfig(model_path=tmp_path / "x.gguf", alias="a")
    assert config.host == "127.0.0.1" and config.port == 0
    assert config.n_ctx >= 8192 and config.n_threads == cpu_cores() >= 1
    child = config.child_config(4321)
    assert child["port"] == 4321 and child["model_path"] == str(tmp_path / "x.gguf")
    assert "start_timeout" not in child


def test_missing_model_file_is_a_start_error(tmp_path):
    if runtime_available():
        pytest.skip(f"runtime absent ({runtime_available()}); run scripts/setup_local_llm.sh")
    server = ManagedServer(ServerConfig(model_path=tmp_path / "absent.gguf", alias="a"), log_dir=tmp_path)
    with pytest.raises(ServerStartError, match="does not exist"):
        server.ensure_running()
    assert not server.alive()


def test_profile_n_threads_sets_the_servers_thread_count(tmp_path):
    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"GGUF" + bytes(32))
    pool = LocalServerPool(ModelStore(tmp_path / "cache"), n_threads=3)
    assert pool.server(str(gguf), n_threads=1).config.n_threads == 1  # the profile's count wins
    assert pool.server(str(gguf)).config.n_threads == 1  # no count asked: the running server is fine
    other = tmp_path / "other.gguf"
    other.write_bytes(b"GGUF" + bytes(32))
    assert pool.server(str(other)).config.n_threads == 3  # no profile count: the pool's option


def test_a_second_thread_count_for_one_model_is_refused(tmp_path):
    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"GGUF" + bytes(32))
    pool = LocalServerPool(ModelStore(tmp_path / "cache"))
    pool.server(str(gguf), n_threads=2)
    with pytest.raises(ConfigError, match=r"already served with n_threads=2; a profile asks for n_threads=1"):
        pool.server(str(gguf), n_threads=1)


def test_server_connections_send_without_nagle_delay(tmp_path):
    # Regression (issue 15): uvicorn writes a response's headers and body separately; with Nagle
    # on, every response on a kept-alive connection waited ~40 ms for the client's delayed ACK.
    # The child serves on the socket the parent binds; connections it accepts must inherit NODELAY.
    server = ManagedServer(ServerConfig(model_path=tmp_path / "x.gguf", alias="a"), log_dir=tmp_path)
    listener = server._bind()
    try:
        client = socket.create_connection(listener.getsockname()[:2])
        accepted, _ = listener.accept()
        try:
            assert accepted.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)
        finally:
            accepted.close()
            client.close()
    finally:
        listener.close()

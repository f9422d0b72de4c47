"""`stateflow serve` at start-up (issue 59 part 6, issue 57 item 5): a missing model, an
unreachable store, a taken port, an exposed address without a token or a bad token each give one
line and exit 1, with nothing announced before; the security and limit flags reach the server."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from stateflow.testing.fake_openai import FakeOpenAIServer

ROOT = Path(__file__).resolve().parent.parent.parent
TOKEN = "cli-token-0123456789abcdef"

FLOWS = """
from stateflow import LLM, Flow, Prompt, State, Transition

ask = State("Ask", Prompt("Say something."), LLM())
FLOW = Flow("talk", initial=ask, transitions=[Transition(ask, State("Done", final=True))])
"""


def _project(tmp_path: Path, model_url: str = "http://127.0.0.1:9/v1") -> Path:
    project = tmp_path / "project"
    project.mkdir(exist_ok=True)
    (project / "flows.py").write_text(FLOWS)
    (project / "models.toml").write_text(
        f'[profiles.srv]\nmodel = "m"\nprovider = "openai"\nbase_url = "{model_url}"\napi_key_env = ""\n'
        '[profiles.file]\nmodel = "m"\nprovider = "local"\nlocal_model = "/nonexistent/model.gguf"\n'
        '[models]\ndefault = "srv"\n'
    )
    return project


def _env(project: Path, **extra: str) -> dict[str, str]:
    path = os.pathsep.join(p for p in (str(project), str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    env = {k: v for k, v in os.environ.items() if k != "STATEFLOW_SERVE_TOKEN"}
    return {**env, "PYTHONPATH": path, "PYTHONUNBUFFERED": "1", **extra}


def _serve(project: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "stateflow.cli.main", "serve", "flows:FLOW", *args]
    return subprocess.run(cmd, capture_output=True, text=True, env=_env(project, **env), cwd=project, timeout=120)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _one_line(proc: subprocess.CompletedProcess[str], *words: str) -> str:
    """The process failed with exactly one line (naming ``words``), no traceback, no 'serving'."""
    lines = [line for line in (proc.stdout + proc.stderr).splitlines() if line.strip()]
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert len(lines) == 1 and lines[0].startswith("error: "), lines
    assert "Traceback" not in lines[0] and "serving" not in lines[0] and "unexpected" not in lines[0]
    assert all(w in lines[0] for w in words), lines[0]
    return lines[0]


def test_a_taken_port_is_one_line_and_nothing_is_announced(tmp_path):
    project = _project(tmp_path)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        proc = _serve(project, "--config", "models.toml", "--checkpoints", str(tmp_path / "t.db"), "--port", str(port))
    _one_line(proc, f"--port {port}: already in use on 127.0.0.1", "choose another")


def test_a_model_that_is_not_installed_is_one_line(tmp_path):
    from stateflow.backends.local import CATALOG, ModelStore

    cache = tmp_path / "empty-cache"
    if ModelStore(cache).status(CATALOG["local-small"]).parts_installed:
        pytest.skip("local-small's part packages are installed here: serve would assemble the model")
    project = _project(tmp_path)
    db = str(tmp_path / "t.db")
    offline = {"STATEFLOW_CACHE_DIR": str(cache), "HF_HUB_OFFLINE": "1"}
    proc = _serve(project, "--model", "local-small", "--checkpoints", db, "--port", str(_free_port()), **offline)
    _one_line(proc, "model 'local-small'", "not found", "setup_local_llm.sh")
    # a profile naming a GGUF file that is not there, for one state only
    args = ["--config", "models.toml", "--model", "Ask=file", "--checkpoints", db, "--port", str(_free_port())]
    _one_line(_serve(project, *args), "/nonexistent/model.gguf", "does not exist")
    assert not Path(db).exists()  # checked before the store was opened


def test_an_unreachable_store_is_one_line_without_its_password(tmp_path):
    project = _project(tmp_path)
    port = str(_free_port())
    dsn = f"postgresql://alice:s3cret@127.0.0.1:{_free_port()}/db"
    line = _one_line(_serve(project, "--config", "models.toml", "--checkpoints", dsn, "--port", port), "unavailable")
    assert "s3cret" not in line and "alice:***" in line
    folder = tmp_path / "a-folder"
    folder.mkdir()
    _one_line(
        _serve(project, "--config", "models.toml", "--checkpoints", str(folder), "--port", port), "is a directory"
    )


def test_an_exposed_address_needs_a_token_and_a_bad_token_is_not_echoed(tmp_path):
    project = _project(tmp_path)
    db = str(tmp_path / "t.db")
    base = ["--config", "models.toml", "--checkpoints", db, "--port", str(_free_port())]
    _one_line(_serve(project, *base, "--host", "0.0.0.0"), "serves other machines", "--token", "STATEFLOW_SERVE_TOKEN")
    weak = "weak-token"
    assert weak not in _one_line(_serve(project, *base, STATEFLOW_SERVE_TOKEN=weak), "at least 16")
    assert weak not in _one_line(_serve(project, *base, "--token", weak), "at least 16")
    _one_line(_serve(project, *base, "--allow-origin", "localhost:3000"), "scheme://host")


def test_the_token_and_limits_reach_the_server_and_the_token_is_never_printed(tmp_path):
    with FakeOpenAIServer(lambda model, messages, body: "served reply") as srv:
        project = _project(tmp_path, srv.url)
        port = _free_port()
        cmd = [sys.executable, "-m", "stateflow.cli.main", "serve", "flows:FLOW", "--config", "models.toml"]
        cmd += ["--checkpoints", str(tmp_path / "t.db"), "--port", str(port), "--max-body", "3000"]
        cmd += ["--allow-origin", "http://localhost:3000", "--max-message-chars", "40"]
        env = _env(project, STATEFLOW_SERVE_TOKEN=TOKEN)
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=project)
        try:
            assert proc.stderr is not None
            announced = ""
            deadline = time.monotonic() + 60
            while "serving" not in announced and time.monotonic() < deadline:
                line = proc.stderr.readline()
                assert line, announced
                announced += line
            assert f"at http://127.0.0.1:{port}" in announced and "token required" in announced
            base = f"http://127.0.0.1:{port}"
            body = {"threadId": "c1", "runId": "r1", "messages": [{"id": "1", "role": "user", "content": "hi"}],
                    "tools": [], "context": [], "forwardedProps": {}, "state": {}}  # fmt: skip
            assert httpx.post(f"{base}/agui", json=body).status_code == 401
            auth = {"authorization": f"Bearer {TOKEN}"}
            r = httpx.post(f"{base}/agui", json=body | {"padding": "p" * 3000}, headers=auth)
            assert r.status_code == 413 and "3000 bytes" in r.json()["error"]
            long = body | {"messages": [{"id": "1", "role": "user", "content": "l" * 41}]}
            assert httpx.post(f"{base}/agui", json=long, headers=auth).status_code == 413
            front = auth | {"origin": "http://localhost:3000"}
            r = httpx.post(f"{base}/agui", json=body, headers=front, timeout=30)
            assert r.status_code == 200 and '"RUN_FINISHED"' in r.text
            assert r.headers["access-control-allow-origin"] == "http://localhost:3000"
        finally:
            proc.terminate()
            out, err = proc.communicate(timeout=30)
        assert TOKEN not in announced + out + err
        assert len(srv.requests) == 1


def test_the_served_runs_share_one_set_of_connection_pools(tmp_path, monkeypatch):
    # issue 59 part 3: the command built its service without HttpClients, so every run built its
    # own OpenAI client and agents (70-79 ms of server CPU per run instead of 20-26, RSS growing)
    import stateflow.serve as serve_module
    from stateflow.backends.http import HttpClients
    from stateflow.cli.main import main

    seen: list = []

    def fake_serve(service, **kwargs):  # instead of uvicorn: two runs as the routes start them
        seen.append(service.http)
        assert kwargs["limits"].max_finished_tasks == 7  # --max-finished-tasks reaches the server
        service.starter("first", "th-1")(lambda event: None)
        service.starter("second", "th-2")(lambda event: None)
        seen.append(dict(service.http._clients))

    with FakeOpenAIServer(lambda model, messages, body: "served reply") as srv:
        project = _project(tmp_path, srv.url)
        monkeypatch.chdir(project)
        monkeypatch.syspath_prepend(str(project))
        monkeypatch.setattr(serve_module, "serve", fake_serve)
        argv = ["serve", "flows:FLOW", "--config", "models.toml", "--checkpoints", str(tmp_path / "t.db")]
        assert main([*argv, "--max-finished-tasks", "7"]) == 0
        assert len(srv.requests) == 2
    http, clients = seen
    assert isinstance(http, HttpClients) and list(clients) == [srv.url]  # one pool, both runs
    assert http._clients == {}  # closed when the server stopped

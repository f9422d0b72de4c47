"""`stateflow ui` as a command: it serves the given directories, and refuses a path that is not there."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path

from tests.tasks.ui.conftest import make_record, write_records

ROOT = Path(__file__).resolve().parents[3]


def _cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "stateflow.cli.main", "ui", *args]


def test_ui_command_serves_on_loopback_and_stops_on_ctrl_c(tmp_path):
    write_records(tmp_path, [make_record(0), make_record(1)])
    cache = tmp_path / "cache"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "STATEFLOW_CACHE_DIR": str(cache)}
    proc = subprocess.Popen(_cmd(str(tmp_path), "--port", "0"), stderr=subprocess.PIPE, text=True, env=env)
    try:
        line = proc.stderr.readline()
        url = re.search(r"open (http://127\.0\.0\.1:\d+/)", line)
        assert url and "2 episode(s) from 1 source(s)" in line, line
        with urllib.request.urlopen(url.group(1) + "tasks", timeout=30) as resp:
            assert resp.status == 200 and b'id="matched">2 episodes match' in resp.read()
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    # the overview's summary and the compiled templates are kept for the next start (not in the run)
    kept = sorted(p.name.split(".", 1)[1] for p in (cache / "ui").glob("*.json"))
    assert kept == ["json", "rows.json"] and any((cache / "ui" / "templates").iterdir())
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cache", "results.jsonl"]


def test_ui_command_names_a_missing_path(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(_cmd(str(tmp_path / "nope")), capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode != 0
    assert "nope: no such directory or file" in proc.stderr + proc.stdout

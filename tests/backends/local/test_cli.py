"""`stateflow llm list` / `pull` argument handling (no model needed)."""

from __future__ import annotations

import os
import subprocess
import sys


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "stateflow.cli.main", "llm", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "COLUMNS": "200"},
    )


def test_list_shows_both_local_profiles_with_presence(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "stateflow.cli.main", "llm", "list"],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "COLUMNS": "200", "STATEFLOW_CACHE": str(tmp_path)},
    )
    assert proc.returncode == 0, proc.stderr
    lines = [line for line in proc.stdout.splitlines() if "local" in line]
    assert any("local-small" in line and "Qwen2.5-Coder-0.5B" in line and " no" in line for line in lines)
    assert any("Qwen2.5-Coder-1.5B" in line for line in lines)
    assert str(tmp_path) in proc.stdout


def test_pull_of_a_non_local_profile_is_a_one_line_error():
    proc = _cli("pull", "gpt-4o")
    assert proc.returncode == 1
    assert "not a local profile" in proc.stderr and "local-small" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_pull_offline_without_sources_names_the_setup_script(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "stateflow.cli.main", "llm", "pull", "local-small", "--offline"],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "COLUMNS": "200", "STATEFLOW_CACHE": str(tmp_path)},
    )
    if "parts installed" in proc.stdout:  # pragma: no cover - parts installed: pull would assemble
        return
    assert proc.returncode == 1
    assert "scripts/setup_local_llm.sh" in proc.stderr

"""`stateflow demo` and `stateflow run` end to end with the REAL embedded model (local-small).

Both run the CLI in a child process (a native crash cannot take the test session down). They
skip, naming the set-up script, only when llama-cpp-python or the local-small model is absent.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from stateflow.tasks.sql.benchmark import BEST_SQL_SUFFIX

ROOT = Path(__file__).resolve().parent.parent.parent

pytestmark = pytest.mark.local_model

# A shared CI machine can be slow: a timed-out episode or model request would be recorded as
# errored, and the test is about the pipeline, not speed (measured in scripts/bench_*.py). The
# request timeout is not part of the episode identity, so the profile stays "local-small".
_SLOW_PROFILE = "[profiles.local-small]\ntimeout = 3000.0\n"


def _slow_ok(tmp_path: Path) -> tuple[str, ...]:
    config = tmp_path / "models.toml"
    config.write_text(_SLOW_PROFILE)
    return ("--timeout", "3600", "--config", str(config))


def _cli(*args: str, timeout: float = 1800) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "stateflow.cli.main", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        cwd=ROOT,
    )


def _records(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]


def _table_row(stdout: str, *cells: str) -> list[str]:
    """The cells of the first table line holding every one of ``cells``."""
    line = next(x for x in stdout.splitlines() if all(c in x for c in cells)).replace("┃", "│")  # header: ┃
    return [c.strip() for c in line.strip("│ ").split("│")]


def test_small_demo_runs_and_prints_the_table(tmp_path, sql_available, bash_available, local_small_model):
    out = tmp_path / "demo"
    args = (
        "demo",
        "-m",
        "local-small",
        "--sql-tasks",
        "0:1",
        "--bash-tasks",
        "0:1",
        "--max-turns",
        "2",
        *_slow_ok(tmp_path),
    )
    proc = _cli(*args, "--out", str(out))
    assert proc.returncode == 0, proc.stderr[-3000:]
    records = _records(out)
    got = sorted((r["benchmark"], r["method"], r["task"]) for r in records)
    assert got == [
        ("intercode-bash", "sf_agent", 0),
        ("intercode-bash", "stateflow", 0),
        # the best SQL preset (tasks/sql/benchmark.py) is the default for local models
        ("intercode-sql", f"sf_agent{BEST_SQL_SUFFIX}", 0),
        ("intercode-sql", f"stateflow{BEST_SQL_SUFFIX}", 0),
    ]
    assert all(r["status"] == "ok" and r["llm_calls"] > 0 and r["prompt_tokens"] > 0 for r in records), [
        (r["method"], r["status"], r["error"]) for r in records
    ]
    assert all(r["identity"]["models"] == "default=local-small" and r["identity"]["max_turns"] == 2 for r in records)
    assert "demo — default=local-small" in proc.stdout
    head = _table_row(proc.stdout, "method", "p-tokens")
    n, tokens = head.index("n"), head.index("p-tokens")
    for r in records:  # one table row per method, n=1, with the record's own token count
        row = _table_row(proc.stdout, r["benchmark"], f" {r['method']} ")
        assert row[n] == "1" and row[tokens] == str(r["prompt_tokens"]), row
    assert (out / "report.html").is_file() and (out / "metrics.json").is_file()


def test_run_on_two_spider_tasks_then_resume(tmp_path, sql_available, shared_data, local_small_model):
    out = tmp_path / "run"
    args = (
        "run",
        "intercode-sql",
        "--dataset",
        "spider",
        "--tasks",
        "0:2",
        "-m",
        "local-small",
        "--max-turns",
        "3",
        *_slow_ok(tmp_path),
    )
    proc = _cli(*args, "--out", str(out), "--no-progress")
    assert proc.returncode == 0, proc.stderr[-3000:]
    records = _records(out)
    assert sorted(r["task"] for r in records) == [0, 1]
    assert all(r["status"] == "ok" and r["llm_calls"] > 0 for r in records), [
        (r["status"], r["error"]) for r in records
    ]
    assert all(0 < r["turns"] <= 3 and r["path"][0] == "Init" for r in records)
    ident = records[0]["identity"]
    assert (ident["dataset"], ident["policy"], ident["models"]) == ("spider", "llm", "default=local-small")
    assert ident["grammar"] is True  # local models get the response grammar by default
    row = _table_row(proc.stdout, "intercode-sql", "stateflow")
    assert row[3] == "2" and float(row[4]) == 50.0 * sum(r["success"] for r in records)

    again = _cli(*args, "--out", str(out), "--no-progress")
    assert again.returncode == 0, again.stderr[-3000:]
    assert "resuming: 2 episode(s) already in" in again.stderr
    assert len(_records(out)) == 2  # nothing re-run, nothing duplicated

"""`stateflow run` and `stateflow report` as a user runs them (child processes, real environments).

The kill -9 test drives the real Bash sandbox with the gold-replay oracle; the report test reads
a prepared results directory and checks the metric values against numbers computed by hand.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent.parent


def _cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "stateflow.cli.main", *args]


def _env() -> dict[str, str]:
    # The checkout under test, not whatever `stateflow` is installed in the environment.
    return {**os.environ, "PYTHONPATH": str(ROOT)}


def _run(*args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run(_cli(*args), capture_output=True, text=True, timeout=timeout, env=_env(), cwd=ROOT)


def _records(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]


def _wait_for_lines(path: Path, n: int, timeout: float = 120) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if path.exists() and path.read_bytes().count(b"\n") >= n:
            return
        time.sleep(0.05)
    raise AssertionError(f"{path} never reached {n} records")


def _bash_oracle(out: Path, *extra: str) -> list[str]:
    return ["run", "intercode-bash", "--policy", "oracle", "--tasks", "0:8", "--out", str(out), "--no-progress", *extra]


def test_kill_9_then_resume_then_other_settings_refused_then_mixed(tmp_path, bash_available):
    out = tmp_path / "run"
    proc = subprocess.Popen(
        _cli(*_bash_oracle(out)),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
        env=_env(),
        cwd=ROOT,
    )
    _wait_for_lines(out / "results.jsonl", 3)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.communicate(timeout=60)
    partial = (out / "results.jsonl").read_bytes().count(b"\n")
    assert partial < 8, "the run finished before it was killed: nothing was resumed"

    # --live-tokens is how the episodes in flight are shown, not a setting: the run resumes
    same = _run(*_bash_oracle(out, "--live-tokens"))
    assert same.returncode == 0, same.stderr[-1500:]
    records = _records(out)
    assert sorted(r["task"] for r in records) == list(range(8))  # no duplicate, no loss
    assert not (out / "live").exists()  # the killed run's side files were swept, the new ones deleted
    assert len({r["identity_digest"] for r in records}) == 1 and all(r["success"] for r in records)

    before = (out / "results.jsonl").read_bytes()
    other = _run(*_bash_oracle(out, "--max-turns", "5"))
    assert other.returncode == 1
    assert "8 record(s) of this benchmark made with other settings" in other.stderr
    assert "max_turns: 10 (recorded) vs 5 (this run)" in other.stderr and "--mix-settings" in other.stderr
    assert (out / "results.jsonl").read_bytes() == before

    mixed = _run(*_bash_oracle(out, "--max-turns", "5", "--mix-settings"))
    assert mixed.returncode == 0, mixed.stderr[-1500:]
    records = _records(out)
    assert len(records) == 16 and len({(r["identity_digest"], r["task"]) for r in records}) == 16
    assert sorted(r["identity"]["max_turns"] for r in records) == [5] * 8 + [10] * 8

    report = _run("report", str(out))
    assert report.returncode == 0, report.stderr[-1500:]
    rows = json.loads((out / "metrics.json").read_text())["overall"]
    assert sorted((r["setting"], r["n"], r["sr"]) for r in rows) == [
        ("max_turns=10", 8, 100.0),
        ("max_turns=5", 8, 100.0),
    ]
    assert "max_turns=10" in report.stdout and "max_turns=5" in report.stdout


def test_bad_task_selection_is_one_line_error_and_leaves_no_directory(tmp_path, bash_available):
    out = tmp_path / "never"
    proc = _run(*_bash_oracle(out)[:4], "--tasks", "10:99999", "--out", str(out), "--no-progress")
    assert proc.returncode == 1
    assert "end 99999 is outside the dataset (the dataset has 16 task(s): valid indices 0..15" in proc.stderr
    assert "Traceback" not in proc.stderr and not out.exists()


def test_demo_with_an_unknown_flow_is_one_line_error_before_anything_starts(tmp_path):
    proc = _run("demo", "--flow", "bogus", "--out", str(tmp_path / "demo"), timeout=120)
    assert proc.returncode != 0
    assert proc.stderr.strip().splitlines() == ["error: --flow 'bogus': choose paper, schema, tuned or auto"]
    assert not (tmp_path / "demo").exists()


def test_repeated_task_indices_run_once(tmp_path, bash_available):
    out = tmp_path / "dups"
    proc = _run(*_bash_oracle(out)[:4], "--tasks", "1,1,2", "--out", str(out), "--no-progress")
    assert proc.returncode == 0, proc.stderr[-1500:]
    assert "--tasks repeats 1; each task runs once" in proc.stderr
    assert sorted(r["task"] for r in _records(out)) == [1, 2]


# -- stateflow report on a prepared directory -----------------------------------------------------


def _identity(method: str, max_turns: int) -> dict:
    return {
        "benchmark": "intercode-sql",
        "dataset": "demo",
        "dataset_sha256": "d" * 64,
        "method": method,
        "flow": f"flow-{method}",
        "flow_sha256": method[0] * 64,
        "prompts_sha256": "p" * 64,
        "policy": "llm",
        "models": "default=x",
        "models_sha256": "m" * 64,
        "max_turns": max_turns,
        "grammar": False,
        "backend": "embedded",
        "version": 1,
    }


def _record(method, max_turns, task, reward_raw, turns, failed, p, c, cost, status="ok"):
    ident = _identity(method, max_turns)
    return {
        "benchmark": "intercode-sql",
        "dataset": "demo",
        "method": method,
        "models": "default=x",
        "task": task,
        "query": f"question {task}",
        "gold": "SELECT 1",
        "hardness": "easy",
        "status": status,
        "error": None if status == "ok" else "model exploded",
        "reward_raw": reward_raw,
        "reward": reward_raw,  # deliberately unclipped: the report must clip on its own
        "success": reward_raw == 1.0,
        "turns": turns,
        "failed_actions": failed,
        "prompt_tokens": p,
        "completion_tokens": c,
        "cost": cost,
        "path": ["Init", "Solve", "End"],
        "history": [],
        "usage_by_state": {"Solve": {"prompt_tokens": p, "completion_tokens": c}},
        "identity": ident,
        "identity_digest": f"{method}-{max_turns}",
    }


def test_report_metric_values_match_hand_computation(tmp_path):
    out = tmp_path / "prepared"
    out.mkdir()
    records = [
        _record("stateflow", 10, 0, 1.0, 3, 1, 100, 20, 0.01),
        _record("stateflow", 10, 1, 0.0, 0, 0, 0, 0, 0.0, status="error"),  # replaced below
        _record("stateflow", 3, 0, 0.5, 3, 0, 50, 10, 0.0),
        _record("react", 10, 0, 1.0, 2, 0, 80, 8, 0.002),
        _record("stateflow", 10, 1, -0.5, 5, 2, 300, 40, 0.03),  # --retry-errors' newer record
    ]
    (out / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    proc = _run("report", str(out))
    assert proc.returncode == 0, proc.stderr[-1500:]
    rows = {(r["method"], r["setting"]): r for r in json.loads((out / "metrics.json").read_text())["overall"]}
    assert set(rows) == {("react", ""), ("stateflow", "max_turns=10"), ("stateflow", "max_turns=3")}
    sf10 = rows[("stateflow", "max_turns=10")]
    # tasks 0 and 1 (the errored record of task 1 is replaced by its re-run)
    assert sf10["n"] == 2 and sf10["errored"] == 0
    assert sf10["sr"] == 50.0  # 1 of 2
    assert sf10["reward"] == pytest.approx(0.5)  # (1 + max(-0.5, 0)) / 2
    assert sf10["reward_raw"] == pytest.approx(0.25)  # (1 - 0.5) / 2
    assert sf10["turns"] == 4.0 and sf10["error_rate"] == pytest.approx(37.5)  # 8 actions, 3 failed
    assert sf10["cost"] == pytest.approx(0.04) and sf10["p_tokens"] == 200.0 and sf10["c_tokens"] == 30.0
    sf3 = rows[("stateflow", "max_turns=3")]
    assert (sf3["n"], sf3["sr"], sf3["reward"], sf3["turns"], sf3["p_tokens"]) == (1, 0.0, 0.5, 3.0, 50.0)
    react = rows[("react", "")]
    assert (react["n"], react["sr"], react["reward"], react["c_tokens"]) == (1, 100.0, 1.0, 8.0)
    # the printed table shows the same numbers
    line = next(x for x in proc.stdout.splitlines() if "max_turns=10" in x)
    cells = [c.strip() for c in line.strip("│ ").split("│")]
    assert cells[3:] == [
        "max_turns=10",
        "2",
        "50.00",
        "9.5-90.5",
        "0.500",
        "0.250",
        "4.00",
        "37.50",
        "0.0400",
        "200",
        "30",
        "0",
        "1.00",  # eval/sent: no cached tokens recorded, so every prompt token was evaluated
    ]
    assert (out / "report.html").read_text().count('class="group"') == 3

"""The evaluation runner end to end, with the gold-replay oracle and scripted/failing models."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest
from stateflow.tasks.bash.benchmark import INTERCODE_BASH
from stateflow.tasks.harness.runner import RunSpec, TaskSelection, evaluate, select_tasks
from stateflow.tasks.sql.benchmark import INTERCODE_SQL

from stateflow import ModelAssignment, ModelProfile
from stateflow.backends.scripted import ScriptedLLM

ORACLE_SPEC = {"models": ModelAssignment.of("local"), "models_label": "default=local", "oracle": True}


def test_select_tasks():
    assert select_tasks("all", 3).indices == (0, 1, 2)
    assert select_tasks("1:", 4).indices == (1, 2, 3)
    assert select_tasks("0:2", 5).indices == (0, 1)
    assert select_tasks("4,0", 5) == TaskSelection((4, 0))
    assert select_tasks("1030:1034", 1034).indices == (1030, 1031, 1032, 1033)
    with pytest.raises(ValueError, match="use all, A:B"):
        select_tasks("first", 5)


def test_select_tasks_deduplicates_repeated_indices():
    assert select_tasks("1,1,2", 5) == TaskSelection((1, 2), duplicates=(1,))
    assert select_tasks("3,1,3,3,1", 5) == TaskSelection((3, 1), duplicates=(3, 1))


@pytest.mark.parametrize(
    ("selection", "what"),
    [
        ("1030:99999", "end 99999"),
        ("5000", "index 5000"),
        ("1034:", "start 1034"),
        ("-1:4", "start -1"),
        ("0,-2", "index -2"),
    ],
)
def test_out_of_range_tasks_are_an_error_naming_the_valid_range(selection, what):
    """Regression: ``1030:99999`` used to be clipped silently to the dataset's end."""
    with pytest.raises(ValueError) as info:
        select_tasks(selection, 1034)
    assert f"{what} is outside the dataset" in str(info.value)
    assert "valid indices 0..1033, ranges A:B with B <= 1034" in str(info.value)


def test_oracle_solves_every_demo_sql_task_with_every_method(tmp_path, sql_available):
    # the gold-replay oracle speaks the Thought/Action format; spec agents (spec_*) have their
    # own formats and are tested with spec-format scripted models in tests/spec
    methods = tuple(m for m in INTERCODE_SQL.methods if not m.startswith("spec_"))
    s = evaluate(RunSpec(INTERCODE_SQL, methods, out=tmp_path, workers=2, **ORACLE_SPEC), progress=False)
    assert s.finished == s.planned == 20 * len(methods)
    failed = [(r["method"], r["task"], r["reward_raw"], r["error"]) for r in s.records if not r["success"]]
    assert failed == []


def test_oracle_solves_every_demo_bash_task(tmp_path, bash_available):
    methods = ("stateflow", "sf_agent", "react", "plan_solve", "try_again")
    s = evaluate(RunSpec(INTERCODE_BASH, methods, out=tmp_path, workers=2, **ORACLE_SPEC), progress=False)
    failed = [(r["method"], r["task"], r["reward_raw"], r["error"]) for r in s.records if not r["success"]]
    assert s.finished > 0 and failed == []


def test_resume_skips_recorded_episodes(tmp_path, sql_available):
    spec = RunSpec(INTERCODE_SQL, ("stateflow",), out=tmp_path, tasks="0:5", **ORACLE_SPEC)
    first = evaluate(spec, progress=False)
    assert first.finished == 5
    spec2 = RunSpec(INTERCODE_SQL, ("stateflow",), out=tmp_path, tasks="0:8", **ORACLE_SPEC)
    second = evaluate(spec2, progress=False)
    assert (second.skipped, second.finished) == (5, 3)
    tasks = [json.loads(line)["task"] for line in (tmp_path / "results.jsonl").read_text().splitlines()]
    assert sorted(tasks) == list(range(8))


def test_a_run_whose_output_is_not_a_terminal_prints_plain_progress_lines(tmp_path, sql_available, monkeypatch):
    # A log file (nohup, CI) gets no progress bar drawn until the end: plain lines say how far the
    # run is, at most every PLAIN_PROGRESS_EVERY_S seconds and once at the end; a terminal gets none.
    import io

    from rich.console import Console
    from stateflow.tasks.harness import runner

    spec = RunSpec(INTERCODE_SQL, ("stateflow",), out=tmp_path / "log", tasks="0:4", **ORACLE_SPEC)
    log = io.StringIO()
    evaluate(spec, console=Console(file=log, width=200))
    lines = [ln for ln in log.getvalue().splitlines() if ln.startswith("progress:")]
    assert len(lines) == 1 and lines[0].startswith("progress: 4/4 episodes | SR 100.0%")

    monkeypatch.setattr(runner, "PLAIN_PROGRESS_EVERY_S", 0.0)
    log = io.StringIO()
    evaluate(replace(spec, out=tmp_path / "every"), console=Console(file=log, width=200))
    done = [ln.split()[1] for ln in log.getvalue().splitlines() if ln.startswith("progress:")]
    assert done == ["1/4", "2/4", "3/4", "4/4"]

    term = io.StringIO()
    evaluate(replace(spec, out=tmp_path / "term"), console=Console(file=term, width=200, force_terminal=True))
    assert "progress:" not in term.getvalue()


@pytest.mark.parametrize(
    ("order", "expected"),
    [
        (
            "method",
            [("stateflow", 0), ("stateflow", 1), ("stateflow", 2), ("sf_agent", 0), ("sf_agent", 1), ("sf_agent", 2)],
        ),
        (
            "task",
            [("stateflow", 0), ("sf_agent", 0), ("stateflow", 1), ("sf_agent", 1), ("stateflow", 2), ("sf_agent", 2)],
        ),
    ],
)
def test_order_decides_which_episodes_run_first_and_resume_keeps_it(tmp_path, sql_available, order, expected):
    methods = ("stateflow", "sf_agent")
    first = RunSpec(INTERCODE_SQL, methods, out=tmp_path, tasks="0:2", order=order, **ORACLE_SPEC)
    evaluate(first, progress=False)
    second = evaluate(replace(first, tasks="0:3"), progress=False)
    assert (second.skipped, second.finished) == (4, 2)
    ran = [(r["method"], r["task"]) for r in map(json.loads, (tmp_path / "results.jsonl").read_text().splitlines())]
    # the first run's four episodes, then the resumed run's two: each run in the order asked
    assert ran == [e for e in expected if e[1] < 2] + [e for e in expected if e[1] == 2]
    with pytest.raises(ValueError, match=r"RunSpec\.order: 'random' is not one of method, task"):
        replace(first, order="random")


def test_misbehaving_model_is_scored_like_upstream(tmp_path, sql_available):
    """Malformed replies cost turns; at the limit the last observation is submitted for the agent."""
    prof = ModelProfile(name="babbler", model="b", provider="scripted", api_key_env=None)
    spec = RunSpec(
        INTERCODE_SQL,
        ("stateflow",),
        models=ModelAssignment.of(prof),
        models_label="default=babbler",
        out=tmp_path,
        tasks="0:1",
        max_turns=3,
        scripts={"babbler": ScriptedLLM(["I am not sure."], cycle=True)},
    )
    (r,) = evaluate(spec, progress=False).records
    assert r["status"] == "ok" and not r["submitted"] and not r["success"]
    assert r["turns"] == 3 and r["failed_actions"] == 2  # Init's SHOW TABLES ran; 2 malformed replies
    assert r["invalid_replies"] == 2 and r["path"][:3] == ["Init", "Observe", "Error"]


def test_unreachable_model_records_errored_tasks_and_goes_on(tmp_path, sql_available):
    dead = ModelProfile(
        name="dead", model="m", base_url="http://127.0.0.1:9/v1", api_key_env=None, timeout=2, max_retries=0
    )
    spec = RunSpec(
        INTERCODE_SQL,
        ("stateflow", "react"),
        models=ModelAssignment.of(dead),
        models_label="default=dead",
        out=tmp_path,
        tasks="0:3",
    )
    s = evaluate(spec, progress=False)
    assert s.finished == 6 and all(r["status"] == "error" and "dead" in r["error"] for r in s.records)
    assert evaluate(spec, progress=False).finished == 0  # errored episodes count as finished...
    retry = RunSpec(**{**spec.__dict__, "retry_errors": True})
    assert evaluate(retry, progress=False).finished == 6  # ...unless asked to retry them


def _cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "stateflow.cli.main", *args]


def _wait_for_lines(path: Path, n: int, timeout: float = 60) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if path.exists() and path.read_bytes().count(b"\n") >= n:
            return
        time.sleep(0.05)
    raise AssertionError(f"{path} never reached {n} records")


def _ignore_sigint() -> None:  # what a shell script's `cmd &` does to a background job
    signal.signal(signal.SIGINT, signal.SIG_IGN)


@pytest.mark.parametrize(
    ("sig", "background"),
    [(signal.SIGKILL, False), (signal.SIGINT, False), (signal.SIGTERM, False), (signal.SIGINT, True)],
    ids=["sigkill", "sigint", "sigterm", "sigint-background"],
)
def test_killed_run_resumes_without_duplicates_or_losses(tmp_path, bash_available, sig, background):
    out = tmp_path / "run"
    cmd = _cli(
        "run",
        "intercode-bash",
        "--method",
        "stateflow,sf_agent",
        "--policy",
        "oracle",
        "--tasks",
        "0:8",
        "--out",
        str(out),
        "--no-progress",
    )
    proc = subprocess.Popen(
        cmd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
        preexec_fn=_ignore_sigint if background else None,
    )
    _wait_for_lines(out / "results.jsonl", 3)
    os.killpg(proc.pid, sig) if sig == signal.SIGKILL else proc.send_signal(sig)
    _, err = proc.communicate(timeout=120)
    if sig != signal.SIGKILL:  # a graceful stop: in-flight episodes recorded, exit 130
        assert proc.returncode == 130, err.decode()[-500:]
        assert b"re-run the same command to resume" in err
    partial = (out / "results.jsonl").read_bytes().count(b"\n")
    done = subprocess.run(cmd, capture_output=True, timeout=300)
    assert done.returncode == 0, done.stderr.decode()[-800:]
    records = [json.loads(x) for x in (out / "results.jsonl").read_text().splitlines()]
    keys = [(r["method"], r["task"]) for r in records]
    assert len(keys) == len(set(keys)) == 2 * 8 and partial < len(keys)
    assert all(r["success"] for r in records)

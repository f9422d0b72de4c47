"""``stateflow whatif`` on SQL: the paper's SF_Agent flow over the real InterCode SQL environment.

The source run records the paper's SQL flow (Init, Observe, Solve, Verify, Error, End) in the
SF_Agent view on two demo tasks against a counting fake OpenAI-compatible server, over the real
MariaDB databases of the InterCode SQL environment. Model "a" DESCribes the table, writes a
SELECT (right for task 0, unfiltered for task 1) and submits it in Verify; model "b", asked only
in Verify, submits what it sees if it is right and otherwise runs the right query first. The
what-if (``--at Verify --model Verify=b``, through the real CLI) must replay Observe's and
Solve's calls from the records (the server sees b's requests only), re-execute their SQL in a
fresh environment (task 0's reward comes from Solve's replayed SELECT: ``submit`` scores the last
result, and b runs no query there), and pair the rewards: task 1 won, nothing lost. A record
whose request hash no longer matches what the replay asks is reported diverged, not guessed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from stateflow.tasks.harness.registry import default_registry
from stateflow.tasks.harness.runner import RunSpec, evaluate
from stateflow.tasks.harness.whatif import plan_whatif, run_whatif
from stateflow.tasks.reports.whatif import whatif_comparison
from stateflow.tasks.sql.benchmark import INTERCODE_SQL

from stateflow.profiles import ModelAssignment, load_config
from stateflow.testing.fake_openai import FakeOpenAIServer

ROOT = Path(__file__).resolve().parent.parent.parent

COUNT = "SELECT count(*) FROM book"  # task 0's gold
UNFILTERED = "SELECT title FROM book ORDER BY title"  # task 1 without its WHERE: not solved
NOVELS = "SELECT title FROM book WHERE genre = 'novel' ORDER BY title"  # task 1's gold


def _said(messages: list[dict[str, Any]]) -> str:
    return " ".join(str(m.get("content") or "") for m in messages)


def respond(model: str, messages: list[dict[str, Any]], body: dict[str, Any]) -> str:
    """Model "a": DESC book, then one SELECT, then submit. Model "b" (Verify only): the gold
    query for task 1 if not run yet, else submit."""
    said = _said(messages)
    novels = "titles of all novels" in said
    if model == "b":
        if novels and f"execute[{NOVELS}]" not in said:
            return f"Thought: only the novels.\nAction: execute[{NOVELS}]"
        return "Thought: the result answers the question.\nAction: submit"
    if "execute[DESC book]" not in said:
        return "Thought: the book table.\nAction: execute[DESC book]"
    query = UNFILTERED if novels else COUNT
    if f"execute[{query}]" not in said:
        return f"Thought: query it.\nAction: execute[{query}]"
    return "Thought: done.\nAction: submit"


def _config(url: str) -> str:
    return "".join(
        f'[profiles.{name}]\nmodel = "{name}"\nprovider = "openai"\nbase_url = "{url}"\napi_key_env = ""\n'
        "max_retries = 0\ntimeout = 60.0\n"
        for name in ("a", "b")
    )


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """Tasks 0 and 1 of the demo SQL data run by SF_Agent on model "a", recorded; the server stays up."""
    import shutil

    if shutil.which("mariadbd") is None and shutil.which("mysqld") is None:
        pytest.skip("no MariaDB/MySQL server binary: run scripts/setup.sh (installs mariadb-server)")
    root = tmp_path_factory.mktemp("whatif-sql")
    with FakeOpenAIServer(respond) as srv:
        config = root / "models.toml"
        config.write_text(_config(srv.url))
        base = load_config(config)  # the CLI rebuilds the run's profiles from the same file
        spec = RunSpec(
            INTERCODE_SQL,
            ("sf_agent",),
            models=ModelAssignment.of({"default": "a"}, profiles=base.profiles.values()),
            models_label="default=a",
            out=root / "run",
            dataset="demo",
            tasks="0:2",
        )
        summary = evaluate(spec, progress=False)
        assert summary.finished == 2
        yield root, srv, base, summary.records


def test_the_sql_records_keep_each_states_calls_and_the_rewards(recorded) -> None:
    _, _, _, records = recorded
    by_task = {r.task: r for r in records}
    for r in records:
        assert [c["state"] for c in r.calls] == ["Observe", "Solve", "Verify"]
        assert r.path[:4] == ["Init", "Observe", "Solve", "Verify"]
    assert by_task[0].reward_raw == 1.0 and by_task[0].success
    assert 0.0 < by_task[1].reward_raw < 1.0 and not by_task[1].success  # partial credit: extra rows


def _observations(history: list[dict[str, Any]], states: tuple[str, ...]) -> list[str]:
    """What the environment answered in ``states`` (the tool messages of a record's history)."""
    return [m["content"] for m in history if m["kind"] == "tool" and m["state"] in states]


def _whatif_cli(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "stateflow.cli.main", "whatif", *args, "--config", str(root / "models.toml")],
        capture_output=True,
        text=True,
        env=env,
        cwd=root,
        timeout=600,
    )


def test_whatif_replays_the_sql_prefix_and_pairs_the_rewards(recorded) -> None:
    root, srv, base, records = recorded
    run_dir = root / "run"
    sent_before = len(srv.requests)
    done = _whatif_cli(root, str(run_dir), "--at", "Verify", "--model", "Verify=b")
    assert done.returncode == 0, done.stderr
    new_requests = srv.requests[sent_before:]
    # Observe's and Solve's calls came from the records: the server saw only Verify's, all b's
    # (task 0: submit at once; task 1: the right query, then submit)
    assert [r["model"] for r in new_requests] == ["b", "b", "b"]
    assert "2 episode(s) reached Verify" in done.stderr and "diverged" not in done.stderr
    assert "paired: recorded vs what-if" in done.stdout

    # the same plan again through the API: the CLI's records are found, nothing is asked again
    plan = plan_whatif(run_dir, "Verify", {"Verify": "b"}, registry=default_registry(), base=base)
    assert [[c.state for c in e.prefix] for e in plan.episodes] == [["Observe", "Solve"]] * 2
    result = run_whatif(plan)
    assert len(srv.requests) == sent_before + 3 and result.diverged == []
    source = {r.task: r for r in records}
    after = {r.task: r for r in result.after}
    for task, rec in after.items():
        assert rec.calls[:2] == source[task].calls[:2]  # the recorded replies, as recorded
        assert all(c["profile"] == "b" for c in rec.calls[2:])
        assert rec.whatif is not None and rec.whatif["replayed_calls"] == 2
        # the prefix's SQL ran again in the fresh environment: the same observations as recorded
        shown = _observations(rec.history, ("Init", "Observe", "Solve"))
        recorded_shown = _observations(source[task].history, ("Init", "Observe", "Solve"))
        assert shown == recorded_shown and len(shown) == 3
    # task 0: b only submitted, so its reward is the replayed Solve SELECT's result, re-executed
    assert [c["reply"].endswith("submit") for c in after[0].calls[2:]] == [True]
    assert (after[0].reward_raw, after[1].reward_raw) == (1.0, 1.0)
    pair = whatif_comparison(result)
    assert pair.tasks == (0, 1) and pair.won_tasks == (1,) and pair.lost_tasks == ()
    assert (pair.baseline_solved, pair.candidate_solved) == (1, 2)
    # the CLI's tables: reward before / after per task (task 1's recorded partial credit, won),
    # then the paired summary (tasks, solved before, solved after, won, lost, p, diverged, not reached)
    lines = [line for line in done.stdout.splitlines() if line.startswith("│")]
    rows = [[c.strip() for c in line.strip("│").split("│")] for line in lines]
    per_task = {row[0]: row[2:5] for row in rows if len(row) == 8 and "%" not in row[1]}
    assert per_task == {
        "0": ["1.00", "1.00", ""],
        "1": [f"{source[1].reward_raw:.2f}", "1.00", "won"],
    }
    (summary,) = [row for row in rows if len(row) == 8 and "%" in row[1]]
    assert [summary[0], *summary[3:5], *summary[6:]] == ["2", "1", "0", "0", "0"]
    assert result.new_tokens[0] > 0 and result.new_tokens[1] > result.new_tokens[0]  # b's calls only


def test_a_record_whose_request_hash_differs_is_reported_diverged(recorded, tmp_path: Path) -> None:
    root, srv, base, _ = recorded
    rows = [json.loads(line) for line in (root / "run" / "results.jsonl").read_text().splitlines()]
    for row in rows:
        if row["task"] == 1:
            row["calls"][1]["request"] = "0" * 64  # Solve's recorded request: not what the replay asks
    (tmp_path / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    sent_before = len(srv.requests)
    plan = plan_whatif(tmp_path, "Verify", {"Verify": "b"}, registry=default_registry(), base=base)
    result = run_whatif(plan)
    (diverged,) = result.diverged
    assert diverged.task == 1 and diverged.status == "error"
    assert (diverged.error or "").startswith("ReplayDiverged") and "model call 1" in (diverged.error or "")
    # it is not paired (no guessed reward), and the replay stopped before asking any model for it
    assert [r.task for r in result.after] == [0] and whatif_comparison(result).tasks == (0,)
    assert [r["model"] for r in srv.requests[sent_before:]] == ["b"]  # task 0's submit only

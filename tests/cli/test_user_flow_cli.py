"""`stateflow run BENCHMARK --method module:attr`: a user's own flow evaluated like any method.

A child process runs the real CLI from a project directory holding ``my_flows.py``, against a
fake OpenAI-compatible server (real HTTP, real AutoGen) and the real embedded MariaDB on the SQL
demo dataset; the records, the resume and ``stateflow report`` are those of a built-in method.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from stateflow.envs.sql.tasks import load_task_file

from stateflow.paths import resource_path
from stateflow.testing.fake_openai import FakeOpenAIServer

ROOT = Path(__file__).resolve().parent.parent.parent

MY_FLOWS = """
from stateflow import ANY, LLM, Flow, Prompt, State, Transition
from stateflow.tasks.kit.tools import env_done, execute

answer = State("Answer", Prompt("Reply with Thought: and Action: execute[SQL] or Action: submit."), LLM(), execute())
end = State("End", final=True)
ONE_SHOT = Flow("my-one-shot", initial=answer, max_transitions=6, transitions=[
    Transition(ANY, end, when=env_done),
    Transition(answer, answer),
])
"""


def _responder(golds: dict[str, str]):
    """Runs the task's gold query once, then submits (wrong for the question 'How many books...'
    on purpose, so the records show a failure too)."""

    def reply(model: str, messages: list[dict[str, Any]], body: dict[str, Any]) -> str:
        text = "\n".join(str(m.get("content") or "") for m in messages)
        if "Action: execute[" in "\n".join(str(m.get("content") or "") for m in messages if m["role"] == "assistant"):
            return "Thought: the result answers it.\nAction: submit"
        question = next(q for q in golds if q in text)
        gold = "SELECT 0" if question.startswith("How many books") else golds[question]
        return f"Thought: run it.\nAction: execute[{gold}]"

    return reply


def _run(project: Path, *args: str) -> subprocess.CompletedProcess[str]:
    # The checkout under test, not whatever `stateflow` is installed; cwd: the user's project.
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "stateflow.cli.main", *args],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
        cwd=project,
    )


def test_a_users_flow_is_evaluated_with_records_resume_and_report(tmp_path, sql_available):
    tasks = load_task_file(resource_path("stateflow.envs.sql") / "demo" / "demo_tasks.json")[:3]
    golds = {t.query: t.gold for t in tasks}
    project = tmp_path / "project"
    project.mkdir()
    (project / "my_flows.py").write_text(MY_FLOWS)
    out = tmp_path / "out"
    with FakeOpenAIServer(_responder(golds)) as srv:
        (project / "models.toml").write_text(
            f'[profiles.srv]\nmodel = "m"\nprovider = "openai"\nbase_url = "{srv.url}"\napi_key_env = ""\n'
            '[models]\ndefault = "srv"\n'
        )
        args = ("run", "intercode-sql", "--method", "my_flows:ONE_SHOT,stateflow", "--config", "models.toml")
        args += ("--tasks", "0:3", "--out", str(out), "--no-progress")
        first = _run(project, *args)
        assert first.returncode == 0, first.stderr
        again = _run(project, *args)
        assert again.returncode == 0, again.stderr
    assert "resuming: 6 episode(s) already" in again.stderr
    records = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    mine = sorted((r["task"], r["success"], r["flow"]) for r in records if r["method"] == "my_flows:ONE_SHOT")
    books = next(i for i, t in enumerate(tasks) if t.query.startswith("How many books"))
    assert mine == [(i, i != books, "my-one-shot") for i in range(3)]
    assert {r["identity"]["flow"] for r in records if r["method"] == "my_flows:ONE_SHOT"} == {"my-one-shot"}
    assert len(records) == 6  # the built-in method ran next to it in the same directory
    report = _run(project, "report", str(out))
    assert report.returncode == 0, report.stderr
    assert "my_flows:ONE_SHOT" in report.stdout and "stateflow" in report.stdout
    # compare selects the user's flow like any method: PATH:module:attribute
    compared = _run(tmp_path, "compare", f"{out}:my_flows:ONE_SHOT", f"{out}:stateflow")
    assert compared.returncode == 0, compared.stderr
    assert "3 common tasks" in compared.stdout and "same reward on 3 of 3 tasks" in compared.stdout, compared.stdout


def test_compare_sides_split_at_the_longest_existing_path(tmp_path):
    from stateflow.tasks.cli.results import parse_side

    run = tmp_path / "run"
    run.mkdir()
    assert parse_side(f"{run}:my_flows:ONE_SHOT") == (run, "my_flows:ONE_SHOT", None)
    assert parse_side(f"{run}:my_flows:ONE_SHOT@s1") == (run, "my_flows:ONE_SHOT", "s1")
    assert parse_side(f"{run}:sf_agent") == (run, "sf_agent", None)
    assert parse_side(str(run)) == (run, None, None)


def test_a_report_draws_a_users_flow_after_its_module_is_gone(tmp_path, sql_available):
    # issue 42 item 5: the run directory keeps each method's flow (flows.json), so a report run
    # from another directory after the user's module was deleted still draws the flow that ran
    tasks = load_task_file(resource_path("stateflow.envs.sql") / "demo" / "demo_tasks.json")[:2]
    golds = {t.query: t.gold for t in tasks}
    project = tmp_path / "project"
    project.mkdir()
    (project / "my_flows.py").write_text(MY_FLOWS)
    out = tmp_path / "out"
    with FakeOpenAIServer(_responder(golds)) as srv:
        (project / "models.toml").write_text(
            f'[profiles.srv]\nmodel = "m"\nprovider = "openai"\nbase_url = "{srv.url}"\napi_key_env = ""\n'
            '[models]\ndefault = "srv"\n'
        )
        args = ("run", "intercode-sql", "--method", "my_flows:ONE_SHOT", "--config", "models.toml")
        ran = _run(project, *args, "--tasks", "0:2", "--out", str(out), "--no-progress")
        assert ran.returncode == 0, ran.stderr
    cards = json.loads((out / "flows.json").read_text())["cards"]
    assert [(c["method"], c["flow"]) for c in cards] == [("my_flows:ONE_SHOT", "my-one-shot")]
    (project / "my_flows.py").unlink()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    report = _run(elsewhere, "report", str(out))
    assert report.returncode == 0, report.stderr
    page = (out / "report.html").read_text()
    assert "<svg" in page and "Answer" in page and "no graph" not in page
    (out / "flows.json").write_text("not json")  # a damaged cards file is named, not ignored
    broken = _run(elsewhere, "report", str(out))
    assert broken.returncode != 0 and "flows.json: not a flow cards file" in broken.stderr

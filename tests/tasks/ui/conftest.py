"""Fixtures for the UI tests: records made by hand, and a real run directory made by the oracle."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from stateflow.tasks.bash.benchmark import INTERCODE_BASH
from stateflow.tasks.harness.records import ResultsFile
from stateflow.tasks.harness.runner import RunSpec, evaluate
from stateflow.tasks.kit.episode_record import EpisodeRecord
from stateflow.tasks.sql.benchmark import INTERCODE_SQL

from stateflow import ModelAssignment, ModelProfile
from stateflow.backends.scripted import ScriptedLLM
from tests.tasks.test_runner import ORACLE_SPEC


def make_record(task: int, *, method: str = "stateflow", success: bool = True, digest: str | None = None, **kw: Any):
    """A record with a two-step trace (a prompt, a reply with usage, a tool result)."""
    history = [
        {"role": "user", "name": "user", "state": "Init", "kind": "prompt", "content": f"Question {task}"},
        {
            "role": "assistant",
            "name": "assistant",
            "state": "Solve",
            "kind": "llm",
            "content": f"Action: execute[SELECT {task}]",
            "usage": {"prompt_tokens": 100 + task, "completion_tokens": 7, "cached_tokens": 40, "latency_s": 0.25},
        },
        {
            "role": "user",
            "name": "execute",
            "state": "Solve",
            "kind": "tool",
            "content": f"[({task},)]",
            "meta": {"ok": True},
        },
    ]
    fields: dict[str, Any] = {
        "benchmark": "intercode-sql",
        "dataset": "demo",
        "method": method,
        "models": "default=local",
        "task": task,
        "query": f"question {task}",
        "gold": f"SELECT {task}",
        "hardness": "easy",
        "status": "ok",
        "success": success,
        "reward_raw": 1.0 if success else 0.0,
        "turns": 1,
        "failed_actions": 0,
        "prompt_tokens": 100 + task,
        "completion_tokens": 7,
        "path": ["Init", "Solve", "End"],
        "history": history,
        "eval": {"agent_obs": f"[({task},)]", "eval_obs": f"[({task},)]"},
        "identity_digest": digest or f"digest-{method}",
        "identity": {"method": method},
        "last_action": f"SELECT {task}",
        "usage_by_state": {"Solve": {"calls": 1, "prompt_tokens": 100 + task, "completion_tokens": 7}},
    }
    return EpisodeRecord.from_dict(fields | kw)


def write_records(path: Path, records: list[EpisodeRecord]) -> Path:
    f = ResultsFile(path / "results.jsonl" if path.is_dir() else path)
    f.extend(records)
    return f.path


def raw_line(data: dict[str, Any]) -> bytes:
    return (json.dumps(data) + "\n").encode()


@pytest.fixture(scope="session")
def oracle_run(tmp_path_factory, sql_available) -> Path:
    """A real results directory: three methods on six demo SQL tasks, replayed by the oracle, plus a vote method."""
    out = tmp_path_factory.mktemp("ui-oracle")
    evaluate(RunSpec(INTERCODE_SQL, ("stateflow", "react"), out=out, tasks="0:6", **ORACLE_SPEC), progress=False)
    evaluate(
        RunSpec(INTERCODE_SQL, ("stateflow_error_vote",), out=out, tasks="0:6", mix_settings=True, **ORACLE_SPEC),
        progress=False,
    )
    return out


# A wrong command per demo Bash task that changes files (task -> action): task 6 should delete the
# empty files, task 7 edit report.md in place.
WRONG_BASH = {6: "touch /demo/new.txt", 7: "rm /demo/docs/report.md"}


def wrong_bash_policy() -> ScriptedLLM:
    """Runs the task's wrong command of :data:`WRONG_BASH` once, then submits."""

    def reply(messages: list[dict[str, Any]], params: dict[str, Any]) -> str:
        text = "\n".join(str(m.get("content") or "") for m in messages)
        action = WRONG_BASH[6] if "empty regular files" in text else WRONG_BASH[7]
        if f"execute[{action}]" in text:
            return "Thought: done.\nAction: submit"
        return f"Thought: this changes the files.\nAction: execute[{action}]"

    return ScriptedLLM(reply)


@pytest.fixture(scope="session")
def bash_run(tmp_path_factory, bash_available) -> Path:
    """A real Bash results directory on the demo file system: the oracle (StateFlow and Try-Again)
    on tasks 5-7 (each changes files) and a scripted policy that changes the wrong files on tasks
    6-7 (StateFlow, models ``default=wrong``)."""
    out = tmp_path_factory.mktemp("ui-bash")
    evaluate(RunSpec(INTERCODE_BASH, ("stateflow", "try_again"), out=out, tasks="5:8", **ORACLE_SPEC), progress=False)
    wrong = ModelProfile(name="wrong", model="wrong", provider="scripted", api_key_env=None)
    spec = RunSpec(
        INTERCODE_BASH,
        ("stateflow",),
        models=ModelAssignment.of(wrong),
        models_label="default=wrong",
        out=out,
        tasks="6:8",
        scripts={"wrong": wrong_bash_policy()},
        mix_settings=True,
    )
    evaluate(spec, progress=False)
    return out

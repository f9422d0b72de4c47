"""Fixtures for the UI tests: records made by hand, and a real run directory made by the oracle."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from stateflow.tasks.harness.records import ResultsFile
from stateflow.tasks.harness.runner import RunSpec, evaluate
from stateflow.tasks.kit.episode_record import EpisodeRecord
from stateflow.tasks.sql.benchmark import INTERCODE_SQL

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

"""A negative SQL reward through a real episode: the record keeps it raw and clips ``reward`` at 0.

Upstream's reward is negative for a result in the wrong order; the StateFlow reference runner
reports ``max(reward, 0)``. This drives a scripted agent through the real flow on the real server
(demo task 1: four novel titles in alphabetical order; the agent lists them in reverse).
"""

from __future__ import annotations

from typing import Any

import pytest
from stateflow.envs.sql import EmbeddedServerPool, open_sql_env
from stateflow.tasks.harness.episode import EpisodeSpec, run_episode
from stateflow.tasks.reports.metrics import summarize
from stateflow.tasks.sql.benchmark import INTERCODE_SQL

from stateflow import ModelAssignment, ModelProfile
from stateflow.backends.scripted import ScriptedLLM

from .conftest import needs_mariadb

pytestmark = needs_mariadb

REVERSED = "SELECT title FROM book WHERE genre = 'novel' ORDER BY title DESC"
PARTIAL = "SELECT title FROM book WHERE genre = 'novel' ORDER BY title DESC LIMIT 3"


def _agent(query: str) -> ScriptedLLM:
    """Runs ``query`` once, then submits (reads the conversation like a model would)."""
    action = f"execute[{query}]"

    def reply(messages: list[dict[str, Any]], params: dict[str, Any]) -> str:
        proposed = [i for i, m in enumerate(messages) if action in str(m.get("content") or "")]
        if proposed and any(m.get("name") == "environment" for m in messages[proposed[0] + 1 :]):
            return "Thought: that is the answer.\nAction: submit"
        return f"Thought: list the novels.\nAction: {action}"

    return ScriptedLLM(reply)


def _episode(pool: EmbeddedServerPool, query: str) -> dict[str, Any]:
    profile = ModelProfile(name="lister", model="l", provider="scripted", api_key_env=None)
    spec = EpisodeSpec(
        benchmark=INTERCODE_SQL,
        dataset="demo",
        method="stateflow",
        models=ModelAssignment.of(profile),
        models_label="default=lister",
        scripts={"lister": _agent(query)},
    )
    with open_sql_env("demo", pool=pool) as env:
        return run_episode(env, 1, spec)


@pytest.mark.parametrize(
    ("query", "raw"),
    [
        (REVERSED, -1.0),  # all four rows, perfectly discordant: tau -1, IoU 1
        (PARTIAL, -0.75),  # three of four rows reversed: IoU 3/4, tau -1
    ],
)
def test_negative_reward_is_kept_raw_and_clipped_in_the_record(
    sql_pool: EmbeddedServerPool, query: str, raw: float
) -> None:
    record = _episode(sql_pool, query)
    assert (record["status"], record["submitted"]) == ("ok", True)
    assert record.last_action == query  # what the submission scored, kept for failure analysis
    assert record["reward_raw"] == raw
    assert record["reward"] == 0.0
    assert record["success"] is False
    (row,) = summarize([record])
    assert (row.reward, row.reward_raw, row.sr) == (0.0, raw, 0.0)

"""Errors inside ``SqlEnv.step``: the database's errors reach the agent, our own bugs do not.

A SQL error is an observation (``Error executing query: ...``, ``action_executed`` False), as
upstream. A bug in our code must propagate, so the runner records the episode as errored instead
of scoring the agent 0 with status ok.
"""

from __future__ import annotations

from typing import Any

import pytest
from stateflow.envs.sql import ERROR_PREFIX, EmbeddedServerPool, SqlEnv, open_sql_env
from stateflow.tasks.harness.episode import EpisodeSpec, run_episode
from stateflow.tasks.sql.benchmark import INTERCODE_SQL

from stateflow import ModelAssignment, ModelProfile
from stateflow.backends.scripted import ScriptedLLM

from .conftest import FAST_LIMITS, needs_mariadb

pytestmark = needs_mariadb


@pytest.fixture
def env(sql_pool: EmbeddedServerPool) -> Any:
    with open_sql_env("demo", pool=sql_pool, limits=FAST_LIMITS) as environment:
        yield environment


def _raise_type_error(*_args: object, **_kwargs: object) -> Any:
    raise TypeError("planted bug in our own code")


def test_sql_error_is_an_agent_visible_observation(env: SqlEnv) -> None:
    env.reset(0)
    obs, reward, done, info = env.step("SELECT nope FROM book")
    assert obs == ERROR_PREFIX + "Unknown column 'nope' in 'SELECT'" or (obs.startswith(ERROR_PREFIX) and "nope" in obs)
    assert (reward, done, info) == (0, False, {"action_executed": False})
    obs, reward, done, info = env.step("SELEKT 1")
    assert obs.startswith(ERROR_PREFIX + "You have an error in your SQL syntax")
    assert info == {"action_executed": False}


def test_bug_in_our_code_propagates_and_the_session_recovers(env: SqlEnv, monkeypatch: pytest.MonkeyPatch) -> None:
    env.reset(0)
    monkeypatch.setattr(env, "_fetch_bounded", _raise_type_error)
    with pytest.raises(TypeError, match="planted bug"):
        env.step("SELECT count(*) FROM book")
    monkeypatch.undo()
    assert env.step("SELECT count(*) FROM book")[0] == [(10,)]  # a fresh session, no stale result


def test_driver_conversion_failure_is_an_observation(env: SqlEnv, monkeypatch: pytest.MonkeyPatch) -> None:
    env.reset(0)
    assert env._agent is not None
    connection = env._agent.connection

    def undecodable(*_args: object, **_kwargs: object) -> Any:
        raise UnicodeDecodeError("utf-8", b"\xff", 0, 1, "invalid start byte")

    monkeypatch.setattr(connection, "get_rows", undecodable)
    obs, _, done, info = env.step("SELECT title FROM book")
    assert obs.startswith(ERROR_PREFIX + "cannot convert a value of the result") and "utf-8" in obs
    assert (done, info) == (False, {"action_executed": False})
    monkeypatch.undo()
    assert env.step("SELECT count(*) FROM book")[0] == [(10,)]


def test_runner_records_a_bug_as_an_errored_episode(sql_pool: EmbeddedServerPool) -> None:
    profile = ModelProfile(name="asker", model="a", provider="scripted", api_key_env=None)
    spec = EpisodeSpec(
        benchmark=INTERCODE_SQL,
        dataset="demo",
        method="stateflow",
        models=ModelAssignment.of(profile),
        models_label="default=asker",
        scripts={"asker": ScriptedLLM(["Thought: count.\nAction: execute[SELECT count(*) FROM book]"], cycle=True)},
    )
    with open_sql_env("demo", pool=sql_pool) as env:
        env._fetch_bounded = _raise_type_error  # type: ignore[method-assign]
        record = run_episode(env, 0, spec)
    assert record["status"] == "error"
    assert "TypeError" in (record["error"] or "") and "planted bug" in record["error"]

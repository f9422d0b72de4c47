"""Differential test: perturbed SQL episodes scored by ``SqlEnv`` and by upstream's semantics.

Upstream InterCode runs the agent's actions and the gold query on one shared connection, so an
agent's ``USE other_db`` moves the gold too (``upstream_reference.SharedConnectionEpisode``). The
default ``database_scope="benchmark"`` must give the same reward and ``corrupt_gold`` on every
episode; ``"task"`` (the strict option) must behave as if a ``USE`` of another database failed.
"""

from __future__ import annotations

import random
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path

import pytest
from stateflow.envs.base import Task
from stateflow.envs.sql import EmbeddedServerPool, SqlEnv, open_sql_env
from stateflow.envs.sql.server import open_connection
from stateflow.tasks.sql.benchmark import INTERCODE_SQL

from .conftest import needs_mariadb, needs_spider
from .upstream_reference import SharedConnectionEpisode

pytestmark = needs_mariadb

MISSING = "no_such_database"


@dataclass(frozen=True)
class Perturbation:
    """A way to turn a task into an episode: ``actions(task, other_db)``."""

    name: str
    actions: Callable[[Task, str], list[str]]
    leaves_task_db: bool  # whether the agent's session ends up outside the task's database


PERTURBATIONS = [
    Perturbation("gold", lambda t, o: [t.gold], False),
    Perturbation("use other, gold", lambda t, o: [f"USE {o}", t.gold], True),
    Perturbation("use same, gold", lambda t, o: [f"USE {t.context}", t.gold], False),
    Perturbation("use missing, gold", lambda t, o: [f"USE {MISSING}", t.gold], False),
    Perturbation("gold, use other", lambda t, o: [t.gold, f"USE {o}"], True),
]


@dataclass(frozen=True)
class Episode:
    task: int
    perturbation: str
    actions: tuple[str, ...]
    left_task_db: bool


def perturbed_episodes(env: SqlEnv, n_tasks: int, seed: int = 13) -> list[Episode]:
    """``n_tasks`` tasks (seeded sample) x every perturbation; "other" is the next database by name."""
    databases = sorted(env.server.databases)
    tasks = sorted(random.Random(seed).sample(range(len(env)), min(n_tasks, len(env))))
    out = []
    for index in tasks:
        task = env.task(index)
        other = databases[(databases.index(task.context.lower()) + 1) % len(databases)]
        for p in PERTURBATIONS:
            out.append(Episode(index, p.name, tuple(p.actions(task, other)), p.leaves_task_db))
    return out


def run_env(env: SqlEnv, episode: Episode) -> tuple[float, bool]:
    env.reset(episode.task)
    for action in episode.actions:
        env.step(action)
    _, reward, done, info = env.step("submit")
    assert done
    return reward, info["corrupt_gold"]


def run_upstream(reference: SharedConnectionEpisode, env: SqlEnv, episode: Episode) -> tuple[float, bool]:
    task = env.task(episode.task)
    return reference.run(task.context.lower(), list(episode.actions), task.gold)


def strict_equivalent(episode: Episode, task_db: str) -> Episode:
    """What the ``"task"`` scope runs: a ``USE`` of another database fails and moves nothing."""
    refused = tuple(
        f"USE {MISSING}" if a.startswith("USE ") and a[4:].lower() not in (task_db, MISSING) else a
        for a in episode.actions
    )
    return Episode(episode.task, episode.perturbation, refused, False)


@pytest.fixture(scope="module")
def reference_factory(sql_pool: EmbeddedServerPool) -> Iterator[Callable[[SqlEnv], SharedConnectionEpisode]]:
    """Upstream's shared connection: an admin login (as upstream's ``admin``) with the same session
    settings as the environment's connections (so ties in ORDER BY ... LIMIT break alike)."""
    opened = []

    def make(env: SqlEnv) -> SharedConnectionEpisode:
        user, password = env.server.admin_login()
        connection = open_connection(env.server.endpoint, user, password)
        connection.cmd_query(env.server.session_setup_sql(env.limits.gold_timeout))
        opened.append(connection)
        return SharedConnectionEpisode(connection)

    yield make
    for connection in opened:
        connection.close()


def mismatches(env: SqlEnv, reference: SharedConnectionEpisode, episodes: list[Episode]) -> list[tuple]:
    out = []
    for episode in episodes:
        expected = run_upstream(reference, env, episode)
        got = run_env(env, episode)
        if got != expected:
            out.append((episode, got, expected))
    return out


# -- hand-checked episodes on the shipped demo data -------------------------------------------
# task 0: library, gold SELECT count(*) FROM book -> [(10,)]; weather has station and reading
DEMO_EPISODES = [
    # (actions, upstream reward, upstream corrupt_gold, why)
    (["SELECT count(*) FROM book"], 1.0, False, "normal episode"),
    (["USE weather", "SELECT count(*) FROM book"], 0.0, True, "agent and gold both fail in weather"),
    (["USE library", "SELECT count(*) FROM book"], 1.0, False, "USE of the task's own database"),
    ([f"USE {MISSING}", "SELECT count(*) FROM book"], 1.0, False, "a failed USE moves nothing"),
    (["USE weather", "SELECT count(*) FROM library.book"], 0.0, True, "right rows, but the gold fails in weather"),
    (["USE weather", "SELECT * FROM station WHERE 1 = 0"], 1.0, True, "empty result vs failed gold ([]): 1"),
    (["USE weather", "USE library", "SELECT count(*) FROM book"], 1.0, False, "moving back restores scoring"),
    (["SELECT count(*) FROM book", "USE weather"], 0.0, True, "USE has no result set: last observation None"),
    (["USE information_schema", "SELECT count(*) FROM library.book"], 0.0, True, "gold fails in information_schema"),
]


@pytest.mark.parametrize(("actions", "reward", "corrupt", "why"), DEMO_EPISODES, ids=[e[3] for e in DEMO_EPISODES])
def test_demo_episodes_score_as_upstream(
    sql_pool: EmbeddedServerPool,
    reference_factory: Callable[[SqlEnv], SharedConnectionEpisode],
    actions: list[str],
    reward: float,
    corrupt: bool,
    why: str,
) -> None:
    with open_sql_env("demo", pool=sql_pool) as env:
        assert env.database_scope == "benchmark"
        episode = Episode(0, why, tuple(actions), False)
        assert run_upstream(reference_factory(env), env, episode) == (reward, corrupt), "reference"
        assert run_env(env, episode) == (reward, corrupt)


def test_strict_scope_keeps_the_agent_in_the_task_database(sql_pool: EmbeddedServerPool) -> None:
    with open_sql_env("demo", pool=sql_pool, database_scope="task") as env:
        env.reset(0)
        obs, _, _, info = env.step("USE weather")
        assert info["action_executed"] is False and "denied" in obs
        assert env.step("SELECT * FROM weather.station")[2:] == (False, {"action_executed": False})
        assert env.step("SELECT count(*) FROM book")[0] == [(10,)]
        assert env.step("submit")[1] == 1.0  # the gold ran in library: stricter than upstream (0.0)


def test_unknown_scope_is_rejected(sql_pool: EmbeddedServerPool) -> None:
    with pytest.raises(ValueError, match="benchmark, task"):
        open_sql_env("demo", pool=sql_pool, database_scope="everything")  # type: ignore[arg-type]


def test_demo_differential(
    sql_pool: EmbeddedServerPool, reference_factory: Callable[[SqlEnv], SharedConnectionEpisode]
) -> None:
    with open_sql_env("demo", pool=sql_pool) as env:
        episodes = perturbed_episodes(env, n_tasks=20)
        assert len(episodes) == 100
        assert mismatches(env, reference_factory(env), episodes) == []


def test_demo_differential_strict_scope(
    sql_pool: EmbeddedServerPool, reference_factory: Callable[[SqlEnv], SharedConnectionEpisode]
) -> None:
    with open_sql_env("demo", pool=sql_pool, database_scope="task") as env:
        reference = reference_factory(env)
        episodes = perturbed_episodes(env, n_tasks=20)
        strict = [strict_equivalent(e, env.task(e.task).context.lower()) for e in episodes]
        assert mismatches(env, reference, strict) == []
        differ = mismatches(env, reference, episodes)
        assert differ and all(e.left_task_db for e, _, _ in differ)


@needs_spider
@pytest.mark.shared_data
def test_spider_differential(
    sql_pool: EmbeddedServerPool, reference_factory: Callable[[SqlEnv], SharedConnectionEpisode]
) -> None:
    with open_sql_env("spider", pool=sql_pool) as env:
        reference = reference_factory(env)
        episodes = perturbed_episodes(env, n_tasks=20)
        # singer and concert_singer both have a singer table: the gold follows the agent there
        episodes += [
            Episode(297, "use singer, gold", ("USE singer", env.task(297).gold), True),
            Episode(297, "use singer, qualified", ("USE singer", "SELECT count(*) FROM concert_singer.singer"), True),
        ]
        assert len(episodes) == 102
        assert mismatches(env, reference, episodes) == []
        assert run_env(env, episodes[-2]) == (1.0, False)  # gold ran in singer, as the agent's query
        assert run_env(env, episodes[-1]) == (0.0, False)  # concert_singer's count vs singer's


def test_run_spec_and_cli_carry_the_scope(sql_pool: EmbeddedServerPool, tmp_path: Path) -> None:
    from stateflow.tasks.harness.runner import RunSpec, open_env

    from stateflow import ModelAssignment

    spec = RunSpec(INTERCODE_SQL, ("stateflow",), ModelAssignment.of("local"), "default=local", tmp_path)
    for scope in ("benchmark", "task"):
        env = open_env(replace(spec, sql_database_scope=scope))
        try:
            assert isinstance(env, SqlEnv) and env.database_scope == scope
        finally:
            env.close()
    cli = [sys.executable, "-m", "stateflow.cli.main", "run"]
    for args, message in [
        (["intercode-bash", "--sql-database-scope", "task"], "applies to intercode-sql only"),
        (["intercode-sql", "--sql-database-scope", "all"], "'all' is not one of 'benchmark', 'task'"),
    ]:
        done = subprocess.run(
            [*cli, *args, "--out", str(tmp_path / "out")], capture_output=True, text=True, timeout=120
        )
        assert done.returncode != 0 and message in done.stderr, done.stderr[-500:]
    assert not (tmp_path / "out").exists()

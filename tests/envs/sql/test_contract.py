"""Behaviour every SQL backend must show: upstream-compatible API plus containment.

``SqlEnvContract`` holds the tests; each backend class only provides ``make_env``.
Embedded and DSN (pointed at an embedded server over TCP) run here; Docker skips without an
engine.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable, Iterator

import pytest
from stateflow.envs.sql import ERROR_PREFIX, EmbeddedServerPool, SqlEnv, open_sql_env
from stateflow.tasks.sql.benchmark import INTERCODE_SQL

from .conftest import FAST_LIMITS

MakeEnv = Callable[..., SqlEnv]  # (limits, database_scope="benchmark") -> SqlEnv

HOSTILE_ACTIONS = [
    "DROP TABLE book",
    "DROP DATABASE library",
    "DELETE FROM loan",
    "UPDATE book SET pages = 1",
    "INSERT INTO member VALUES (999, 'Mallory', '2024-01-01')",
    "REPLACE INTO member VALUES (100, 'Mallory', '2024-01-01')",
    "TRUNCATE TABLE loan",
    "ALTER TABLE book ADD COLUMN evil int",
    "RENAME TABLE book TO gone",
    "CREATE TABLE evil (a int)",
    "CREATE TEMPORARY TABLE evil (a int)",
    "CREATE DATABASE evil",
    "CREATE USER 'mallory'@'%' IDENTIFIED BY 'x'",
    "GRANT ALL PRIVILEGES ON *.* TO CURRENT_USER",
    "SET GLOBAL max_connections = 1",
    "SET GLOBAL read_only = 1",
    "SELECT * FROM book INTO OUTFILE '/tmp/stateflow-outfile-test'",
    "LOAD DATA INFILE '/etc/passwd' INTO TABLE book",
    "LOCK TABLES book WRITE",
    "SELECT * FROM mysql.user",
    "USE mysql",
    "SHUTDOWN",
    "KILL 1",
    "SELECT 1; DROP TABLE book",
]

# reading another dataset database is allowed by default (as upstream), writing it never is
OTHER_DATABASE_WRITES = [
    "DROP TABLE station",
    "DELETE FROM reading",
    "UPDATE station SET name = 'x'",
    "INSERT INTO station (station_id) VALUES (999)",
    "CREATE TABLE evil (a int)",
    "ALTER TABLE station ADD COLUMN evil int",
    "DROP DATABASE weather",
]


class SqlEnvContract:
    """The tests; subclasses provide the ``make_env`` fixture."""

    @pytest.fixture
    def env(self, make_env: MakeEnv) -> Iterator[SqlEnv]:
        environment = make_env(FAST_LIMITS)
        yield environment
        environment.close()

    def test_reset_returns_upstream_values(self, env: SqlEnv) -> None:
        assert env.name == "intercode-sql"
        assert len(env) == 20
        assert env.task(0).context == "library"
        assert env.reset(0) == (None, {"action_executed": True})
        with pytest.raises(IndexError):
            env.reset(len(env))

    def test_observation_forms(self, env: SqlEnv) -> None:
        env.reset(0)
        obs, reward, done, info = env.step("SHOW TABLES")
        assert obs == [("author",), ("book",), ("loan",), ("member",)]
        assert (reward, done, info) == (0, False, {"action_executed": True})
        # what the agent sees (the benchmark's observation format; SHOW results stay whole)
        assert INTERCODE_SQL.observation.render(obs, "SHOW") == "[('author',), ('book',), ('loan',), ('member',)]"
        assert env.step("SET @answer = 42")[0] is None
        obs, _, _, info = env.step("SELECT nonsense FROM book")
        assert obs.startswith(ERROR_PREFIX) and "nonsense" in obs and not obs[len(ERROR_PREFIX)].isdigit()
        assert info == {"action_executed": False}
        assert env.step("")[0] == ERROR_PREFIX + "Query was empty"

    def test_submit_and_skip(self, env: SqlEnv) -> None:
        env.reset(0)
        env.step(env.task(0).gold)
        obs, reward, done, info = env.step("submit")
        assert (obs, reward, done) == ([(10,)], 1.0, True)
        assert info == {
            "agent_obs": "[(10,)]",
            "corrupt_gold": False,
            "eval_obs": "[(10,)]",
            "reward": 1.0,
            "action_executed": True,
        }
        env.reset(1)
        assert env.step("submit")[1] == 0.0  # nothing executed: last observation is None
        env.reset(1)
        assert env.step("skip") == ("skipped", 0, True, {})

    def test_gold_runs_on_its_own_session(self, env: SqlEnv) -> None:
        env.reset(1)  # 4 novels
        env.step("SET SESSION sql_select_limit = 1")
        obs = env.step(env.task(1).gold)[0]
        assert len(obs) == 1
        _, reward, _, info = env.step("submit")
        assert info["eval_obs"].count("(") == 4 and 0 < reward < 1

    def test_reset_gives_a_clean_session(self, env: SqlEnv) -> None:
        env.reset(0)
        env.step("SET @x = 5")
        env.step("SET SESSION sql_select_limit = 1")
        env.reset(1)
        assert env.step("SELECT @x, DATABASE()")[0] == [(None, "library")]
        assert len(env.step("SELECT * FROM book")[0]) == 10
        env.reset(10)
        assert env.step("SELECT DATABASE()")[0] == [("weather",)]

    def test_multi_statement_is_rejected_and_connection_survives(self, env: SqlEnv) -> None:
        env.reset(0)
        obs, _, _, info = env.step("SELECT 1; SELECT 2")
        assert obs.startswith(ERROR_PREFIX) and "one SQL statement" in obs
        assert info["action_executed"] is False
        assert env.step("SELECT 1;")[0] == [(1,)]

    def test_hostile_actions_change_nothing(self, env: SqlEnv) -> None:
        env.reset(0)  # creates the task's read-only account before the snapshot
        before = env.server.snapshot()
        for action in HOSTILE_ACTIONS:
            obs, _reward, _done, info = env.step(action)
            assert info["action_executed"] is False, (action, obs)
            assert isinstance(obs, str) and obs.startswith(ERROR_PREFIX), (action, obs)
        assert env.step("SELECT LOAD_FILE('/etc/passwd')")[0] == [(None,)]  # no FILE privilege
        assert env.step("SELECT count(*) FROM book")[0] == [(10,)]
        assert env.server.snapshot() == before

    def test_other_databases_are_readable_but_not_writable(self, env: SqlEnv) -> None:
        env.reset(0)
        before = env.server.snapshot()
        stations = env.step("SELECT count(*) FROM weather.station")[0]
        assert isinstance(stations, list) and stations[0][0] > 0
        assert env.step("USE weather") == (None, 0, False, {"action_executed": True})
        for action in OTHER_DATABASE_WRITES:
            obs, _reward, _done, info = env.step(action)
            assert info["action_executed"] is False, (action, obs)
        assert env.step("SELECT count(*) FROM station")[0] == stations
        assert env.step("SELECT DATABASE()")[0] == [("weather",)]
        env.reset(1)  # a reset brings the agent back to its task's database
        assert env.step("SELECT DATABASE()")[0] == [("library",)]
        assert env.server.snapshot() == before

    def test_task_scope_refuses_other_databases(self, make_env: MakeEnv) -> None:
        with make_env(FAST_LIMITS, "task") as strict:
            strict.reset(0)
            before = strict.server.snapshot()
            for action in ["USE weather", "SELECT * FROM weather.station", *HOSTILE_ACTIONS]:
                obs, _reward, _done, info = strict.step(action)
                assert info["action_executed"] is False, (action, obs)
            assert strict.step("SELECT DATABASE()")[0] == [("library",)]
            assert strict.server.snapshot() == before

    def test_password_change_does_not_lock_out_others(self, env: SqlEnv, make_env: MakeEnv) -> None:
        env.reset(0)
        env.step("SET PASSWORD = PASSWORD('stolen')")
        with make_env(FAST_LIMITS) as other:
            other.reset(0)
            assert other.step("SELECT 1")[0] == [(1,)]

    def test_agent_cannot_see_or_kill_other_sessions(self, env: SqlEnv, make_env: MakeEnv) -> None:
        env.reset(0)
        env.step(env.task(0).gold)
        assert env.step("submit")[1] == 1.0  # opens this environment's gold session
        with make_env(FAST_LIMITS) as other:
            other.reset(0)
            assert other._agent is not None and env._gold is not None
            targets = {other._agent.connection.connection_id, env._gold.connection.connection_id}
            env.reset(0)
            listed = env.step("SHOW PROCESSLIST")[0]
            assert isinstance(listed, list) and not targets & {row[0] for row in listed}
            for target in targets:
                obs, _, _, info = env.step(f"KILL {target}")
                assert info["action_executed"] is False, obs
            assert other.step("SELECT count(*) FROM book")[0] == [(10,)]
            env.step(env.task(0).gold)
            assert env.step("submit")[1] == 1.0

    def test_close_drops_the_environments_accounts(self, env: SqlEnv, make_env: MakeEnv) -> None:
        env.reset(0)
        before = env.server.snapshot()["accounts"]
        other = make_env(FAST_LIMITS)
        other.reset(0)
        other.step(other.task(0).gold)
        other.step("submit")
        assert len(env.server.snapshot()["accounts"]) == len(before) + 2  # its agent and its gold
        other.close()
        assert env.server.snapshot()["accounts"] == before

    def test_statement_timeout(self, env: SqlEnv) -> None:
        env.reset(0)
        start = time.monotonic()
        obs = env.step("SELECT SLEEP(20)")[0]
        assert time.monotonic() - start < 5
        assert obs != [(0,)]  # interrupted, not completed
        assert env.step("SELECT 1")[0] == [(1,)]

    def test_watchdog_kills_when_the_agent_lifts_its_limit(self, env: SqlEnv) -> None:
        env.reset(0)
        lift = "max_execution_time" if env.server.flavor == "mysql" else "max_statement_time"
        assert env.step(f"SET SESSION {lift} = 0")[2] is False
        kills = env.server.watchdog.kills
        start = time.monotonic()
        obs = env.step("SELECT SLEEP(20)")[0]
        assert time.monotonic() - start < 5, obs
        assert env.server.watchdog.kills == kills + 1
        assert env.step("SELECT 2")[0] == [(2,)]

    def test_huge_results_and_cross_joins_are_contained(self, env: SqlEnv) -> None:
        env.reset(10)  # weather: 12 readings
        start = time.monotonic()
        obs = env.step("SELECT * FROM reading a, reading b, reading c, reading d, reading e")[0]
        assert obs.startswith(ERROR_PREFIX) and "too large" in obs
        obs = env.step("SELECT REPEAT('x', 1000000)")[0]
        assert obs.startswith(ERROR_PREFIX) and "too large" in obs
        heavy = "SELECT count(*) FROM " + ", ".join(f"reading r{i}" for i in range(10))
        assert env.step(heavy)[0].startswith(ERROR_PREFIX)
        assert time.monotonic() - start < 10
        assert env.step("SELECT count(*) FROM reading")[0] == [(12,)]

    def test_killed_connection_recovers(self, env: SqlEnv) -> None:
        env.reset(0)
        obs, _, _, info = env.step("KILL CONNECTION_ID()")
        assert info["action_executed"] is False and obs.startswith(ERROR_PREFIX)
        assert env.step("SELECT count(*) FROM author")[0] == [(6,)]

    def test_demo_gold_replay_scores_one(self, env: SqlEnv) -> None:
        for index in range(len(env)):
            env.reset(index)
            env.step(env.task(index).gold)
            _, reward, done, info = env.step("submit")
            assert (reward, done, info["corrupt_gold"]) == (1.0, True, False), index

    def test_close_is_idempotent(self, make_env: MakeEnv) -> None:
        environment = make_env(FAST_LIMITS)
        environment.close()
        environment.close()
        with pytest.raises(Exception, match="closed"):
            environment.reset(0)


class TestEmbeddedBackend(SqlEnvContract):
    @pytest.fixture
    def make_env(self, sql_pool: EmbeddedServerPool) -> MakeEnv:
        return lambda limits, scope="benchmark": open_sql_env(
            "demo", pool=sql_pool, limits=limits, database_scope=scope
        )


@pytest.fixture(scope="module")
def dsn(sql_pool: EmbeddedServerPool) -> Iterator[str]:
    """A DSN for an admin account on an embedded server listening on loopback TCP."""
    holder = open_sql_env("demo", pool=sql_pool, tcp=True)
    server = holder.server
    password = secrets.token_hex(8)
    with server.admin() as cur:
        cur.execute(f"CREATE USER 'dsnadmin'@'%' IDENTIFIED BY '{password}'")
        cur.execute("GRANT ALL PRIVILEGES ON *.* TO 'dsnadmin'@'%' WITH GRANT OPTION")
    endpoint = server.tcp_endpoint  # type: ignore[attr-defined]
    assert endpoint is not None
    yield f"mysql://dsnadmin:{password}@127.0.0.1:{endpoint.port}"
    holder.close()


class TestDsnBackend(SqlEnvContract):
    """An external server by DSN: the embedded server listening on loopback TCP."""

    @pytest.fixture
    def make_env(self, dsn: str) -> MakeEnv:
        return lambda limits, scope="benchmark": open_sql_env(
            "demo", backend="dsn", dsn=dsn, limits=limits, database_scope=scope
        )


@pytest.fixture(scope="module")
def docker_engine() -> None:
    try:
        import docker

        docker.from_env().ping()
    except Exception as err:  # no engine, no socket, no permission
        pytest.skip(f"no Docker engine reachable ({type(err).__name__}); the docker backend needs one")


@pytest.mark.docker
class TestDockerBackend(SqlEnvContract):
    @pytest.fixture
    def make_env(self, docker_engine: None) -> MakeEnv:
        return lambda limits, scope="benchmark": open_sql_env(
            "demo", backend="docker", limits=limits, database_scope=scope
        )

    # Each Docker environment owns its own server container, so another environment's sessions
    # and accounts are not on this server at all: the two shared-server tests become these.
    def test_agent_cannot_see_or_kill_other_sessions(self, env: SqlEnv, make_env: MakeEnv) -> None:
        with make_env(FAST_LIMITS) as other:
            other.reset(0)
            assert other.server.container.id != env.server.container.id
        env.reset(0)
        env.step(env.task(0).gold)
        assert env.step("submit")[1] == 1.0  # opens this environment's gold session
        assert env._gold is not None
        target = env._gold.connection.connection_id
        env.reset(0)
        listed = env.step("SHOW PROCESSLIST")[0]
        assert isinstance(listed, list) and target not in {row[0] for row in listed}
        obs, _, _, info = env.step(f"KILL {target}")
        assert info["action_executed"] is False, obs
        env.step(env.task(0).gold)
        assert env.step("submit")[1] == 1.0

    def test_close_drops_the_environments_accounts(self, env: SqlEnv, make_env: MakeEnv) -> None:
        other = make_env(FAST_LIMITS)
        before = other.server.snapshot()["accounts"]
        other.reset(0)
        other.step(other.task(0).gold)
        other.step("submit")
        after = other.server.snapshot()["accounts"]
        assert len(after) == len(before) + 2  # its agent and its gold
        other.server.drop_readers(other._agent_owner)
        other.server.drop_readers(other._gold_owner)
        assert other.server.snapshot()["accounts"] == before
        other.close()

"""Gold replay on the real InterCode Spider data (skips without ../shared/data)."""

from __future__ import annotations

import pytest
from stateflow.envs.sql import EmbeddedServerPool, open_sql_env

from .conftest import needs_mariadb, needs_spider

pytestmark = [needs_mariadb, needs_spider, pytest.mark.shared_data]

# gold queries that fail on MariaDB (and on MySQL 8): docs/intercode.md lists the same six
CORRUPT_GOLDS = {164, 178, 225, 531, 638, 802}


def test_full_spider_gold_replay(sql_pool: EmbeddedServerPool) -> None:
    not_one: dict[int, float] = {}
    corrupt: set[int] = set()
    with open_sql_env("spider", pool=sql_pool) as env:
        assert len(env) == 1034
        for index in range(len(env)):
            env.reset(index)
            env.step(env.task(index).gold)
            _, reward, done, info = env.step("submit")
            assert done
            if info["corrupt_gold"]:
                corrupt.add(index)
            if reward != 1.0:
                not_one[index] = reward
    assert corrupt == CORRUPT_GOLDS
    assert set(not_one) == CORRUPT_GOLDS, not_one


def test_spider_test_split_replay(sql_pool: EmbeddedServerPool) -> None:
    with open_sql_env("spider-test", pool=sql_pool) as env:
        rewards = []
        for index in range(len(env)):
            env.reset(index)
            env.step(env.task(index).gold)
            rewards.append(env.step("submit")[1])
    assert rewards == [1.0] * 23

"""Statement splitting and dump planning (no server needed)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from stateflow.envs.sql.dump import DumpError, plan_dump, read_dump
from stateflow.envs.sql.sqltext import split_statements
from stateflow.envs.sql.tasks import DEMO_DIR

from .conftest import needs_spider, spider_dir


@pytest.mark.parametrize(
    ("text", "count"),
    [
        ("SELECT 1", 1),
        ("SELECT 1;", 1),
        ("SELECT 1 ;  -- bye", 1),
        ("SELECT ';' FROM t", 1),
        ('SELECT "a;b", `c;d` FROM t', 1),
        ("SELECT 'it''s; fine'", 1),
        ("SELECT 'back\\'slash;'", 1),
        ("SELECT 1 /* ; */", 1),
        ("SELECT 1; SELECT 2", 2),
        ("SELECT 1;DROP TABLE t", 2),
        ("SELECT 1; # c\n SELECT 2;", 2),
        ("/*!40101 SET x=1 */; SELECT 1", 2),
        ("", 0),
        ("  ;; -- nothing", 0),
        ("SELECT a--1 FROM t", 1),
    ],
)
def test_statement_count(text: str, count: int) -> None:
    assert len(split_statements(text)) == count


@given(st.lists(st.text(alphabet="abc ';\"`\\-#/*\n", max_size=30), max_size=5))
def test_split_never_loses_code(parts: list[str]) -> None:
    text = "".join(parts)
    for statement in split_statements(text):
        assert statement and statement in text


def test_plan_skips_accounts_and_system_schemas() -> None:
    plan = plan_dump(
        "CREATE USER 'admin'@'%' IDENTIFIED BY 'admin'; GRANT ALL PRIVILEGES ON *.* TO 'admin'@'%';\n"
        "FLUSH PRIVILEGES;\nCREATE DATABASE IF NOT EXISTS `Shop`; USE `Shop`; CREATE TABLE t (a int);\n"
        "USE mysql; INSERT INTO user VALUES (1); USE `Shop`; INSERT INTO t VALUES (1);"
    )
    assert plan.databases == ("shop",)
    assert len(plan.skipped) == 5  # 3 account statements, USE mysql, its INSERT
    assert all("user" not in s.lower() or "t values" in s.lower() for s in plan.statements)
    assert plan.statements[-1] == "INSERT INTO t VALUES (1)"


@pytest.mark.parametrize(
    "text",
    ["CREATE DATABASE mysql", "INSERT INTO mysql.user VALUES (1)", "DROP DATABASE IF EXISTS `sys`"],
)
def test_plan_rejects_system_schema_writes(text: str) -> None:
    with pytest.raises(DumpError, match="system schema"):
        plan_dump(text, source="x.sql")


def test_demo_dump_plan() -> None:
    plan = read_dump(DEMO_DIR / "demo_dbs.sql")
    assert plan.databases == ("library", "weather", "bakery")
    assert not plan.skipped


@needs_spider
def test_spider_dump_plan() -> None:
    root = spider_dir()
    assert root is not None
    plan = read_dump(root / "ic_spider_dbs.sql")
    assert len(plan.databases) == 20
    assert [s.split()[0].upper() for s in plan.skipped] == ["--", "GRANT", "FLUSH"]

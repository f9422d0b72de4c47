"""Loading SQL dumps (mysqldump style, MySQL 8 or MariaDB) into a server, data only.

InterCode's ``ic_spider_dbs.sql`` starts with ``CREATE USER admin``/``GRANT ALL`` and is an
``--all-databases`` style dump. Loading it verbatim would create a superuser and could overwrite
system schemas, so a dump is first turned into a :class:`DumpPlan`: account and privilege
statements are dropped, statements under ``USE mysql`` (or another system schema) are skipped,
and a statement that names a system schema explicitly is rejected with its location.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from stateflow.envs.sql.sqltext import split_statements

__all__ = ["SYSTEM_SCHEMAS", "DumpError", "DumpPlan", "load_dump", "plan_dump", "read_dump"]

SYSTEM_SCHEMAS = frozenset({"mysql", "sys", "performance_schema", "information_schema"})

_LEADING_NOISE = re.compile(r"\A(?:\s+|--(?=\s)[^\n]*|\#[^\n]*|/\*(?![M]?!).*?\*/)*", re.DOTALL)
_ACCOUNT = re.compile(
    r"(?:CREATE|DROP|ALTER|RENAME)\s+(?:USER|ROLE)\b|GRANT\b|REVOKE\b|FLUSH\b"
    r"|SET\s+(?:PASSWORD|ROLE|DEFAULT\s+ROLE)\b",
    re.IGNORECASE,
)
_NAME = r"`?([^`\s;/]+)`?"
_CREATE_DB = re.compile(rf"CREATE\s+(?:DATABASE|SCHEMA)\s+(?:IF\s+NOT\s+EXISTS\s+)?{_NAME}", re.IGNORECASE)
_DROP_DB = re.compile(rf"DROP\s+(?:DATABASE|SCHEMA)\s+(?:IF\s+EXISTS\s+)?{_NAME}", re.IGNORECASE)
_USE = re.compile(rf"USE\s+{_NAME}\s*\Z", re.IGNORECASE)
_WRITES = re.compile(r"(?:INSERT|REPLACE|UPDATE|DELETE|CREATE|DROP|ALTER|TRUNCATE|LOCK|RENAME)\b", re.IGNORECASE)
_SYSTEM_REF = re.compile(r"`?\b(?:" + "|".join(sorted(SYSTEM_SCHEMAS)) + r")\b`?\s*\.", re.IGNORECASE)


class DumpError(ValueError):
    """A dump cannot be loaded safely or failed to load; the message names the statement."""


@dataclass(frozen=True)
class DumpPlan:
    """The statements of a dump that will be executed, and what was left out.

    Attributes:
        source: where the dump came from (for messages).
        databases: the databases the dump creates, lower-cased (the server runs with
            ``lower_case_table_names=1``).
        statements: the statements to execute, in order.
        skipped: account/privilege statements and system-schema statements left out.
    """

    source: str
    databases: tuple[str, ...]
    statements: tuple[str, ...]
    skipped: tuple[str, ...]


def _body(statement: str) -> str:
    """The statement without its leading plain comments."""
    return statement[_LEADING_NOISE.match(statement).end() :]


def plan_dump(text: str, *, source: str = "<dump>") -> DumpPlan:
    """Decide which statements of a dump to run.

    Raises:
        DumpError: a statement writes to a system schema by qualified name, or a database
            statement targets one (``CREATE DATABASE mysql``).
    """
    databases: list[str] = []
    keep: list[str] = []
    skipped: list[str] = []
    in_system = False
    for number, statement in enumerate(split_statements(text), start=1):
        body = _body(statement)
        use = _USE.match(body)
        if use:
            in_system = use.group(1).lower() in SYSTEM_SCHEMAS
        if in_system or _ACCOUNT.match(body):
            skipped.append(statement)
            continue
        for pattern in (_CREATE_DB, _DROP_DB):
            target = pattern.match(body)
            if target and target.group(1).lower() in SYSTEM_SCHEMAS:
                raise DumpError(f"{source}: statement {number} targets system schema: {body[:120]!r}")
        if _WRITES.match(body):
            header = body.split("(", 1)[0].split(" VALUES", 1)[0]
            if _SYSTEM_REF.search(header):
                raise DumpError(f"{source}: statement {number} writes to a system schema: {body[:120]!r}")
        created = _CREATE_DB.match(body)
        if created and created.group(1).lower() not in databases:
            databases.append(created.group(1).lower())
        keep.append(statement)
    return DumpPlan(source, tuple(databases), tuple(keep), tuple(skipped))


def load_dump(connection: Any, plan: DumpPlan) -> None:
    """Execute ``plan`` on ``connection`` (a mysql-connector connection with enough rights).

    Raises:
        DumpError: a statement failed; the message names the dump, statement and server error.
    """
    cursor = connection.cursor()
    try:
        for number, statement in enumerate(plan.statements, start=1):
            try:
                cursor.execute(statement)
                if cursor.with_rows:
                    cursor.fetchall()
            except Exception as err:  # any driver error: report where the dump broke
                raise DumpError(
                    f"{plan.source}: statement {number} of {len(plan.statements)} failed: "
                    f"{getattr(err, 'msg', err)} -- {_body(statement)[:160]!r}"
                ) from err
    finally:
        cursor.close()


def read_dump(path: str | Path) -> DumpPlan:
    """Read and plan the dump at ``path`` (UTF-8)."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as err:
        raise DumpError(f"cannot read SQL dump {p}: {err.strerror}") from err
    return plan_dump(text, source=str(p))

"""Parsing the response format."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from stateflow.tasks.kit.actions import parse_action, statement_kind


@pytest.mark.parametrize(
    ("text", "kind", "command"),
    [
        ("Thought: x\nAction: execute[SELECT 1]", "execute", "SELECT 1"),
        ("Thought: x\nAction: submit", "submit", ""),
        ("Thought: x\naction:   Execute[ DESC t ]", "execute", "DESC t"),
        ("Thought: I will Action: execute[DROP t]\nAction: execute[SELECT a FROM t]", "execute", "SELECT a FROM t"),
        (
            "Thought: multi\nAction: execute[SELECT a\nFROM t\nWHERE b = ']']",
            "execute",
            "SELECT a\nFROM t\nWHERE b = ']'",
        ),
        ("Thought: cut off\nAction: execute[SELECT a FROM t", "execute", "SELECT a FROM t"),
        ("Thought: x\nAction: execute[```sql\nSELECT 1\n```]", "execute", "SELECT 1"),
        ("Thought: x\nAction: execute[]", "invalid", None),
        ("The answer is 42.", "invalid", None),
        ("Thought: x\nAction: run it", "invalid", None),
        ("**Action**: submit", "submit", ""),
    ],
)
def test_parse_action(text, kind, command):
    a = parse_action(text)
    assert a.kind == kind
    if command is not None:
        assert a.command == command


@given(st.text(alphabet=st.characters(blacklist_characters="\n]", blacklist_categories=("Cs",)), min_size=1))
def test_any_single_line_command_round_trips(cmd):
    cmd = cmd.strip()
    a = parse_action(f"Thought: t\nAction: execute[{cmd}]")
    if cmd and not cmd.startswith("```"):
        assert a.kind == "execute" and a.command == cmd
    else:
        assert a.kind in ("invalid", "execute")


@pytest.mark.parametrize(
    ("cmd", "kw"),
    [
        ("select 1", "SELECT"),
        ("DESCRIBE t", "DESC"),
        ("  (SELECT 1)", "SELECT"),
        ("WITH x AS (SELECT 1) SELECT * FROM x", "SELECT"),
        ("ls -la", "LS"),
        ("", ""),
    ],
)
def test_statement_kind(cmd, kw):
    assert statement_kind(cmd) == kw

"""Parsing the response format."""

from __future__ import annotations

import re

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st
from stateflow.tasks.kit.actions import Action, parse_action, statement_kind


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


# -- issue 57, item 17: what a model writes after the closing bracket is not part of the command ----


@pytest.mark.parametrize(
    ("reply", "command"),
    [
        # the SQL tutorial's prompt ended "Action: execute[<the SELECT>]." and the model copied it
        ("Thought: count them.\nAction: execute[SELECT COUNT(*) FROM book].", "SELECT COUNT(*) FROM book"),
        ("Action: execute[SELECT 1],", "SELECT 1"),
        ("Action: execute[SELECT 1];", "SELECT 1"),
        ("Action: execute[SELECT 1]!\n", "SELECT 1"),
        ("Action: execute[SELECT 1]'", "SELECT 1"),
        ('Action: "execute[SELECT 1]".', "SELECT 1"),
        ("Action: `execute[SELECT 1]`", "SELECT 1"),
        ("Action: **execute[SELECT 1]**", "SELECT 1"),
        ("**Action:** execute[SELECT 1]", "SELECT 1"),
        ("Action: execute[SELECT 1]  \n\n  ", "SELECT 1"),
        ("Action: execute[SELECT 1]. This query counts the rows of `book`.", "SELECT 1"),
        ("Action: execute[SELECT 1] to count them\nObservation: (invented)", "SELECT 1"),
        ("Action: execute[SELECT a\nFROM t\nWHERE b > 2].", "SELECT a\nFROM t\nWHERE b > 2"),
        ("Action: execute[SELECT a FROM t WHERE b = ']'].", "SELECT a FROM t WHERE b = ']'"),
        ("Action: execute[SELECT a FROM t WHERE b = 'it\\'s]'].", "SELECT a FROM t WHERE b = 'it\\'s]'"),
        ("Action: execute[if [ -f x ]; then cat x; fi].", "if [ -f x ]; then cat x; fi"),
        ("Action: execute[grep -c '[a-z]' f.txt]`", "grep -c '[a-z]' f.txt"),
        ("Action: execute[```sql\nSELECT 1\n```].", "SELECT 1"),
        # an unclosed quote in the command: the last "]" when only punctuation follows it
        ("Action: execute[SELECT a FROM t WHERE n = 'O'Brien'].", "SELECT a FROM t WHERE n = 'O'Brien'"),
        # the model stopped before "]": the rest of the line, as before
        ("Action: execute[[ -f x ] && echo yes", "[ -f x ] && echo yes"),
        ("Action: execute[SELECT a FROM t", "SELECT a FROM t"),
        # no line starts with "Action:": the last one inside a line (the 0.5B model's habit)
        (
            "Thought: The columns are `id` and `title`. Action: execute[SELECT title FROM book].",
            "SELECT title FROM book",
        ),
        ("Thought line: Action: would be DESC. Action: Execute [SELECT 1].", "SELECT 1"),
    ],
)
def test_what_follows_the_closing_bracket_is_not_part_of_the_command(reply, command):
    assert parse_action(reply) == Action("execute", command)


def test_an_action_line_wins_over_an_action_inside_a_line():
    reply = "Thought: first Action: execute[SELECT 2] was wrong.\nAction: execute[SELECT 1]\nNext Action: submit"
    assert parse_action(reply) == Action("execute", "SELECT 1")
    assert parse_action("Transaction: none here").kind == "invalid"


@pytest.mark.parametrize("reply", ["Action: submit.", "Action: `submit`", "Action: **submit**", 'Action: "submit"'])
def test_submit_with_punctuation_or_markdown_around_it(reply):
    assert parse_action(reply) == Action("submit")


_ACTION_LINES = re.compile(r"^\s*\**Action\**\s*:", re.IGNORECASE | re.MULTILINE)
_PLAIN = st.text(
    alphabet=st.characters(blacklist_characters="[]'\"`\\", blacklist_categories=("Cs",)), min_size=1, max_size=12
)


def _quoted(mark: str) -> st.SearchStrategy[str]:
    inside = st.text(alphabet=st.characters(blacklist_characters=mark + "\\", blacklist_categories=("Cs",)), max_size=8)
    return inside.map(lambda s: f"{mark}{s}{mark}")


# Commands as SQL and shell write them: brackets in a command match ([ -f x ], a[1], [[ ... ]]) or
# sit inside quotes or after a backslash (gold statements of both benchmarks all do).
_COMMANDS = st.recursive(
    st.one_of(
        _PLAIN,
        _quoted("'"),
        _quoted('"'),
        _quoted("`"),
        st.sampled_from(list("[]'\"` ")).map(lambda c: "\\" + c),
    ),
    lambda inner: st.one_of(
        st.lists(inner, min_size=1, max_size=4).map("".join),
        inner.map(lambda s: f"[{s}]"),
    ),
    max_leaves=12,
)
# What a model adds after "]": punctuation, quotes, Markdown, whitespace, then maybe prose or an
# invented observation (brackets included, as long as the reply does not end with one).
_PUNCTUATION = st.lists(
    st.sampled_from([".", ",", ";", ":", "!", "?", "'", '"', "`", "```", "*", "**", "_", ")", " ", "\n", "\t"]),
    max_size=4,
).map("".join)
_JUNK = st.tuples(_PUNCTUATION, st.one_of(st.just(""), st.text(max_size=40))).map("".join)


@given(_COMMANDS, _JUNK)
def test_any_command_followed_by_anything_parses_to_the_command(command, junk):
    reply = f"Thought: t\nAction: execute[{command}]{junk}"
    command = command.strip()
    assume(command and not command.startswith("```") and not command.endswith("```"))
    assume(len(_ACTION_LINES.findall(reply)) == 1)
    # a reply ending with "]" is well formed and parses as upstream (up to the last "]"): below
    assume(not junk.rstrip().endswith("]"))
    assert parse_action(reply) == Action("execute", command)


@given(
    st.text(alphabet=st.characters(blacklist_categories=("Cs",)), min_size=1),
    st.sampled_from(["", " ", "\n", "  \n\t"]),
)
def test_a_well_formed_action_parses_as_upstream_up_to_the_last_bracket(command, space):
    """``execute[X]`` with only whitespace after it: X whatever it holds (unmatched "]", quotes,
    lines), exactly as upstream's greedy ``execute\\[(.*)\\]``."""
    reply = f"Thought: t\nAction: execute[{command}]{space}"
    assume(len(_ACTION_LINES.findall(reply)) == 1 and "```" not in command)
    upstream = re.findall(r"execute\[(.*)\]", reply, re.DOTALL)[0].strip()
    expected = Action("execute", upstream) if upstream else Action("invalid", reply.split(": ", 2)[2].strip()[:200])
    assert parse_action(reply) == expected


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

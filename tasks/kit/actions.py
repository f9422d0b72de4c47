r"""Parsing the agent's response format into an environment action.

Every LLM state answers with a ``Thought: ...`` line and an action line:

* ``Action: execute[<command>]`` - run a SQL statement or a shell command;
* ``Action: submit`` - end the episode and have the last observation scored.

Small models sometimes write "Action: ..." inside their thought or repeat the action line;
the *last* action line wins. A reply with no line starting with "Action:" takes its last
"Action:" inside a line (``Thought: count them. Action: execute[...]``). The command may span
several lines (long SQL).

A well-formed action, ``execute[<command>]`` with nothing but whitespace after the last ``]``,
parses as upstream InterCode's ``execute\[(.*)\]`` does: the command runs to the last ``]``.
Models often add something after the closing bracket (a period, a comma, ``;``, a quote, a
backtick or ``**`` of Markdown, a sentence about the query, an invented observation); then the
closing bracket is the ``]`` that matches the opening one, brackets and quotes inside the
command counted (``[ -f x ]`` and ``']'`` stay in it), and whatever follows it is not part of
the command. Leading Markdown or a quote before ``execute`` or ``submit`` is skipped.

A command with an unmatched ``]`` outside quotes cannot be told apart from a command followed
by text with a ``]`` in it: it parses whole only when nothing but whitespace follows it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

__all__ = ["Action", "parse_action", "statement_kind"]

_ACTION_LINE = re.compile(r"^\s*\**Action\**\s*:\s*", re.IGNORECASE | re.MULTILINE)
_ACTION_IN_LINE = re.compile(r"\b\**Action\**\s*:\s*", re.IGNORECASE)  # "... my thought. Action: ..."
_EXECUTE = re.compile(r"^execute\s*\[(.*)\]\s*$", re.IGNORECASE | re.DOTALL)
_OPEN = re.compile(r"^execute\s*\[", re.IGNORECASE)
_FENCE = re.compile(r"^```[a-zA-Z]*\s*|\s*```$")
# Markdown emphasis, code marks and quotes a model puts before the action.
_LEAD = re.compile(r"^[\s*_`'\"]+(?=(?:execute|submit)\b)", re.IGNORECASE)
# What may follow an unmatched command's last "]": punctuation, quotes and Markdown, no words.
_PUNCTUATION_TAIL = re.compile(r"^[\s.,;:!?'\"`*_)}>~-]*$")


@dataclass(frozen=True)
class Action:
    """A parsed action.

    Attributes:
        kind: ``execute``, ``submit`` or ``invalid`` (no usable action line).
        command: the command for ``execute``; the offending text for ``invalid``.
    """

    kind: Literal["execute", "submit", "invalid"]
    command: str = ""

    def as_env_action(self) -> str:
        """The string given to ``Environment.step``."""
        return "submit" if self.kind == "submit" else self.command


def parse_action(text: str) -> Action:
    """Parse the last ``Action:`` of an LLM response.

    >>> parse_action("Thought: list them\\nAction: execute[SHOW TABLES]")
    Action(kind='execute', command='SHOW TABLES')
    >>> parse_action("Thought: done\\nAction: submit")
    Action(kind='submit', command='')
    >>> parse_action("I think the answer is 3").kind
    'invalid'
    """
    starts = [m.end() for m in _ACTION_LINE.finditer(text)] or [m.end() for m in _ACTION_IN_LINE.finditer(text)]
    if not starts:
        return Action("invalid", text.strip()[:200])
    body = text[starts[-1] :].strip()
    body = _LEAD.sub("", body)
    if re.match(r"^submit\b", body, re.IGNORECASE):
        return Action("submit")
    command = _execute_command(body)
    if command is None:
        return Action("invalid", body[:200])
    command = _FENCE.sub("", command.strip()).strip()
    if not command:
        return Action("invalid", body[:200])
    return Action("execute", command)


def _execute_command(body: str) -> str | None:
    """The command of an ``execute[...]`` action line (``None`` when ``body`` is not one)."""
    whole = _EXECUTE.match(body)
    if whole is not None:  # well formed: up to the last "]", as upstream
        return whole.group(1)
    opening = _OPEN.match(body)
    if opening is None:
        return None
    rest = body[opening.end() :]
    close = _matching_bracket(rest)
    if close is not None:  # something after the closing bracket: ".", ";", prose, an observation...
        return rest[:close]
    # No matching bracket (an unclosed quote or "[" in the command, or the model stopped early).
    first = body.split("\n", 1)[0]
    m = _EXECUTE.match(first)
    if m is not None:
        return m.group(1)
    last = rest.rfind("]")
    if last >= 0 and _PUNCTUATION_TAIL.match(rest[last + 1 :]):
        return rest[:last]
    return first[opening.end() :]  # unterminated: the model stopped before "]"


def _matching_bracket(text: str) -> int | None:
    """The index of the ``]`` closing a ``[`` just before ``text``: brackets nest, and brackets
    inside quotes (``'``, ``"``, a backtick) or after a backslash are not counted."""
    depth, quote, escaped = 1, "", False
    for i, ch in enumerate(text):
        if escaped:
            escaped = False
        elif ch == "\\":
            escaped = True
        elif quote:
            if ch == quote:
                quote = ""
        elif ch in "'\"`":
            quote = ch
        elif ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
            if depth == 0:
                return i
    return None


def statement_kind(command: str) -> str:
    """The first keyword of a command, upper-cased (``SELECT``, ``DESC``, ``SHOW``, ``ls``...).

    ``DESCRIBE`` counts as ``DESC``; a ``WITH`` query counts as ``SELECT``.
    """
    word = re.match(r"\s*\(?\s*([A-Za-z_]+)", command)
    if word is None:
        return ""
    kw = word.group(1).upper()
    return {"DESCRIBE": "DESC", "EXPLAIN": "DESC", "WITH": "SELECT"}.get(kw, kw)

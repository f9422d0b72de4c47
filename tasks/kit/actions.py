"""Parsing the agent's response format into an environment action.

Every LLM state answers with a ``Thought: ...`` line and an action line:

* ``Action: execute[<command>]`` - run a SQL statement or a shell command;
* ``Action: submit`` - end the episode and have the last observation scored.

Small models sometimes write "Action: ..." inside their thought or repeat the action line;
the *last* action line wins. The command may span several lines (long SQL).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

__all__ = ["Action", "parse_action", "statement_kind"]

_ACTION_LINE = re.compile(r"^\s*\**Action\**\s*:\s*", re.IGNORECASE | re.MULTILINE)
_EXECUTE = re.compile(r"^execute\s*\[(.*)\]\s*$", re.IGNORECASE | re.DOTALL)
_FENCE = re.compile(r"^```[a-zA-Z]*\s*|\s*```$")


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
    starts = [m.end() for m in _ACTION_LINE.finditer(text)]
    if not starts:
        return Action("invalid", text.strip()[:200])
    body = text[starts[-1] :].strip()
    if re.match(r"^submit\b", body, re.IGNORECASE):
        return Action("submit")
    m = _EXECUTE.match(body)
    if m is None:
        # An unterminated execute[ (the model stopped early) or trailing prose after "]".
        first = body.split("\n", 1)[0]
        m = _EXECUTE.match(first) or re.match(r"^execute\s*\[(.*)$", first, re.IGNORECASE)
        if m is None:
            return Action("invalid", body[:200])
    command = _FENCE.sub("", m.group(1).strip()).strip()
    if not command:
        return Action("invalid", body[:200])
    return Action("execute", command)


def statement_kind(command: str) -> str:
    """The first keyword of a command, upper-cased (``SELECT``, ``DESC``, ``SHOW``, ``ls``...).

    ``DESCRIBE`` counts as ``DESC``; a ``WITH`` query counts as ``SELECT``.
    """
    word = re.match(r"\s*\(?\s*([A-Za-z_]+)", command)
    if word is None:
        return ""
    kw = word.group(1).upper()
    return {"DESCRIBE": "DESC", "EXPLAIN": "DESC", "WITH": "SELECT"}.get(kw, kw)

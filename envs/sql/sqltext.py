"""Splitting SQL text into statements (quote- and comment-aware), for actions and dumps.

MySQL/MariaDB lexing rules that matter here: ``'...'``, ``"..."`` and backquoted names may
contain ``;``; backslash escapes inside quotes; ``#`` and ``-- `` (dash dash *space*) start
line comments; ``/* ... */`` is a comment except ``/*! ... */`` and ``/*M! ... */``, which the
server executes (mysqldump wraps ``SET`` statements in them) and therefore count as code.
"""

from __future__ import annotations

import re

__all__ = ["split_statements"]

_TOKEN = re.compile(
    r"""
      (?P<quoted>'(?:[^'\\]|\\.|'')*'? | "(?:[^"\\]|\\.|"")*"? | `(?:[^`]|``)*`?)
    | (?P<exec_comment>/\*M?!.*?(?:\*/|\Z))
    | (?P<comment>/\*.*?(?:\*/|\Z) | \#[^\n]* | --(?=\s|\Z)[^\n]*)
    | (?P<semicolon>;)
    | (?P<space>\s+)
    | (?P<other>[^'"`/\#;\s-]+ | .)
    """,
    re.VERBOSE | re.DOTALL,
)


def split_statements(text: str) -> list[str]:
    """Split ``text`` at top-level semicolons into statements that contain code.

    Pieces consisting only of whitespace and plain comments are dropped; each returned
    statement keeps its own text (comments included) without the terminating ``;``.
    Unterminated quotes or comments run to the end of the text (the server reports the error).

    Example:
        >>> split_statements("SELECT ';' ; -- note\\n SELECT 2;")
        ["SELECT ';'", '-- note\\n SELECT 2']
        >>> split_statements("SELECT 1; -- trailing comment")
        ['SELECT 1']
    """
    out: list[str] = []
    start = 0
    has_code = False
    for match in _TOKEN.finditer(text):
        kind = match.lastgroup
        if kind == "semicolon":
            if has_code:
                out.append(text[start : match.start()].strip())
            start = match.end()
            has_code = False
        elif kind in ("quoted", "exec_comment", "other"):
            has_code = True
    if has_code:
        out.append(text[start:].strip())
    return out

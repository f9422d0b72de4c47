"""A small reader for the s-expression syntax of agent specs.

It only *reads* (text to nested lists of atoms with positions); it never evaluates anything.
Syntax: ``( ... )`` lists, ``"..."`` strings with ``\\"``, ``\\\\``, ``\\n`` and ``\\t`` escapes,
``:keyword`` atoms, bare symbols, and comments from ``;`` (anywhere) or ``#`` (at the start of a
token) to the end of the line.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from stateflow.spec.errors import SpecSyntaxError

__all__ = ["Keyword", "SList", "SNode", "SString", "SSymbol", "read_sexprs"]


@dataclass(frozen=True)
class SSymbol:
    """A bare symbol such as ``Thought``, ``next`` or ``until_5``."""

    name: str
    line: int = field(compare=False)
    col: int = field(compare=False)


@dataclass(frozen=True)
class Keyword:
    """A ``:keyword`` atom; ``name`` excludes the colon and is lower-cased."""

    name: str
    line: int = field(compare=False)
    col: int = field(compare=False)


@dataclass(frozen=True)
class SString:
    """A double-quoted string literal (escapes already decoded)."""

    value: str
    line: int = field(compare=False)
    col: int = field(compare=False)


@dataclass(frozen=True)
class SList:
    """A parenthesised list; ``line``/``col`` locate its ``(``."""

    items: tuple[SNode, ...]
    line: int = field(compare=False)
    col: int = field(compare=False)


SNode = SSymbol | Keyword | SString | SList

_ESCAPES = {'"': '"', "\\": "\\", "n": "\n", "t": "\t"}
_DELIMS = set('()";') | {" ", "\t", "\n", "\r"}


class _Cursor:
    def __init__(self, text: str, source: str):
        self.text = text
        self.source = source
        self.i = 0
        self.line = 1
        self.col = 1

    def peek(self) -> str:
        return self.text[self.i] if self.i < len(self.text) else ""

    def advance(self) -> str:
        ch = self.text[self.i]
        self.i += 1
        if ch == "\n":
            self.line += 1
            self.col = 1
        else:
            self.col += 1
        return ch

    def error(self, problem: str, line: int | None = None, col: int | None = None) -> SpecSyntaxError:
        return SpecSyntaxError(
            problem,
            source=self.source,
            line=self.line if line is None else line,
            col=self.col if col is None else col,
        )

    def skip_blank(self) -> None:
        while self.i < len(self.text):
            ch = self.peek()
            if ch in " \t\r\n":
                self.advance()
            elif ch in ";#":
                while self.i < len(self.text) and self.peek() != "\n":
                    self.advance()
            else:
                return


def _read_string(cur: _Cursor) -> SString:
    line, col = cur.line, cur.col
    cur.advance()  # opening quote
    out: list[str] = []
    while True:
        if cur.i >= len(cur.text):
            raise cur.error("unterminated string (missing closing '\"')", line, col)
        ch = cur.advance()
        if ch == '"':
            return SString("".join(out), line, col)
        if ch == "\\":
            if cur.i >= len(cur.text):
                raise cur.error("unterminated string (missing closing '\"')", line, col)
            esc_line, esc_col = cur.line, cur.col - 1
            nxt = cur.advance()
            if nxt not in _ESCAPES:
                raise cur.error(f"unknown escape '\\{nxt}' in string (valid: \\\" \\\\ \\n \\t)", esc_line, esc_col)
            out.append(_ESCAPES[nxt])
        else:
            out.append(ch)


def _read_atom(cur: _Cursor) -> SSymbol | Keyword:
    line, col = cur.line, cur.col
    start = cur.i
    while cur.i < len(cur.text) and cur.peek() not in _DELIMS:
        cur.advance()
    word = cur.text[start : cur.i]
    if word.startswith(":"):
        if len(word) == 1:
            raise cur.error("a lone ':' is not a keyword; write e.g. :text or :env-input", line, col)
        return Keyword(word[1:].lower(), line, col)
    return SSymbol(word, line, col)


def read_sexprs(text: str, source: str = "<string>") -> list[SNode]:
    """Read every top-level form of ``text``.

    Args:
        text: the spec text.
        source: name used in error messages (usually the file path).

    Returns:
        The top-level forms, in order.

    Raises:
        SpecSyntaxError: unbalanced parentheses (naming the unclosed ``(`` or the stray ``)``),
            unterminated strings, unknown escapes.
    """
    cur = _Cursor(text, source)
    stack: list[tuple[int, int, list[SNode]]] = []
    top: list[SNode] = []
    while True:
        cur.skip_blank()
        if cur.i >= len(text):
            break
        ch = cur.peek()
        if ch == "(":
            stack.append((cur.line, cur.col, []))
            cur.advance()
            continue
        if ch == ")":
            if not stack:
                raise cur.error("unbalanced parentheses: ')' without a matching '('")
            cur.advance()
            line, col, items = stack.pop()
            node: SNode = SList(tuple(items), line, col)
        elif ch == '"':
            node = _read_string(cur)
        else:
            node = _read_atom(cur)
        (stack[-1][2] if stack else top).append(node)
    if stack:
        line, col, _ = stack[-1]
        raise cur.error(
            f"unbalanced parentheses: '(' opened here is never closed ({len(stack)} missing ')')", line, col
        )
    return top

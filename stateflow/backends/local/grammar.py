"""Translate a regular expression (a documented subset) into a llama.cpp GBNF grammar.

The core sends the result as ``extra_body={"grammar": gbnf}`` to a llama.cpp server, which then
only samples tokens that keep the output inside the language. The whole output must match
(as with ``re.fullmatch``); ``^`` at the very start and ``$`` at the very end are accepted and
ignored for that reason.

Supported subset:

* literal characters, and escaped metacharacters (``\\.``, ``\\(``, ``\\[``, ``\\\\`` ...);
* ``.`` (any character except a newline, as in Python without ``re.DOTALL``);
* character classes ``[abc]``, ``[a-z0-9_]``, negated ``[^\\n]``, with escapes inside;
* shorthands ``\\d \\w \\s`` and their negations ``\\D \\W \\S`` (ASCII meaning);
* escapes ``\\n \\t \\r \\f \\v \\xHH \\uHHHH``;
* groups ``( )`` and ``(?: )`` (both non-capturing in effect), alternation ``|``;
* quantifiers ``* + ? {n} {n,} {n,m}`` (greedy only).

Rejected with :class:`UnsupportedRegexError` (naming the position): backreferences, look-around,
named groups, inline flags, lazy/possessive quantifiers, word boundaries and anchors elsewhere
than at the ends.

Small models degenerate inside unbounded free text (platform.md: ``[^\\n]+`` let the 0.5B model
write "100000..." until ``max_tokens``). Write bounded repeats (``[^\\n]{1,200}``), or pass
``max_repeat`` to bound every ``*``, ``+`` and ``{n,}``.
"""

from __future__ import annotations

from dataclasses import dataclass

from stateflow.errors import ConfigError

__all__ = ["UnsupportedRegexError", "regex_to_gbnf"]


class UnsupportedRegexError(ConfigError):
    """The pattern uses a construct outside the supported subset (or is malformed)."""


# --- AST -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Lit:
    text: str


@dataclass(frozen=True)
class _Class:
    ranges: tuple[tuple[str, str], ...]
    negated: bool = False


@dataclass(frozen=True)
class _Seq:
    items: tuple[object, ...]


@dataclass(frozen=True)
class _Alt:
    options: tuple[object, ...]


@dataclass(frozen=True)
class _Repeat:
    node: object
    low: int
    high: int | None


_DIGIT = (("0", "9"),)
_WORD = (("a", "z"), ("A", "Z"), ("0", "9"), ("_", "_"))
_SPACE = ((" ", " "), ("\t", "\t"), ("\n", "\n"), ("\r", "\r"), ("\f", "\f"), ("\v", "\v"))
_SHORTHANDS = {"d": _DIGIT, "w": _WORD, "s": _SPACE}
_SIMPLE_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "f": "\f", "v": "\v", "0": "\0"}
_REJECTED_ESCAPES = {
    "b": "word boundary \\b",
    "B": "\\B",
    "A": "anchor \\A",
    "Z": "anchor \\Z",
    "z": "\\z",
    "G": "\\G",
    "p": "unicode property \\p",
    "P": "unicode property \\P",
}


class _Parser:
    def __init__(self, pattern: str):
        self.src = pattern
        self.pos = 0

    def fail(self, what: str) -> UnsupportedRegexError:
        return UnsupportedRegexError(f"regex {self.src!r} at position {self.pos}: {what}")

    def peek(self) -> str | None:
        return self.src[self.pos] if self.pos < len(self.src) else None

    def take(self) -> str:
        ch = self.src[self.pos]
        self.pos += 1
        return ch

    def parse(self) -> object:
        if self.peek() == "^":
            self.pos += 1
        node = self.alternation()
        if self.pos < len(self.src):
            raise self.fail("unbalanced ')'")
        return node

    def alternation(self) -> object:
        options = [self.sequence()]
        while self.peek() == "|":
            self.pos += 1
            options.append(self.sequence())
        return options[0] if len(options) == 1 else _Alt(tuple(options))

    def sequence(self) -> object:
        items: list[object] = []
        while (ch := self.peek()) is not None and ch not in "|)":
            if ch == "$" and self.pos == len(self.src) - 1:
                self.pos += 1
                break
            atom = self.atom()
            items.append(self.quantified(atom))
        return items[0] if len(items) == 1 else _Seq(tuple(items))

    def atom(self) -> object:
        ch = self.take()
        if ch == "(":
            if self.peek() == "?":
                if self.src.startswith("?:", self.pos):
                    self.pos += 2
                else:
                    raise self.fail("only (...) and (?:...) groups are supported (no look-around, flags, names)")
            inner = self.alternation()
            if self.peek() != ")":
                raise self.fail("missing ')'")
            self.pos += 1
            return inner
        if ch == "[":
            return self.char_class()
        if ch == ".":
            return _Class((("\n", "\n"),), negated=True)
        if ch == "\\":
            return self.escape(in_class=False)
        if ch in "*+?{":
            self.pos -= 1
            raise self.fail(f"quantifier {ch!r} has nothing to repeat")
        if ch in "^$":
            self.pos -= 1
            raise self.fail(f"anchor {ch!r} is only supported at the very start/end")
        return _Lit(ch)

    def escape(self, *, in_class: bool) -> object:
        if self.peek() is None:
            raise self.fail("pattern ends with a lone backslash")
        ch = self.take()
        if ch in _SHORTHANDS:
            return _Class(_SHORTHANDS[ch])
        if ch in "DWS":
            if in_class:
                raise self.fail(f"\\{ch} inside a character class is not supported")
            return _Class(_SHORTHANDS[ch.lower()], negated=True)
        if ch in _SIMPLE_ESCAPES:
            return _Lit(_SIMPLE_ESCAPES[ch])
        if ch in "xu":
            width = 2 if ch == "x" else 4
            digits = self.src[self.pos : self.pos + width]
            if len(digits) != width or any(c not in "0123456789abcdefABCDEF" for c in digits):
                raise self.fail(f"\\{ch} needs {width} hex digits")
            self.pos += width
            return _Lit(chr(int(digits, 16)))
        if ch.isdigit():
            raise self.fail("backreferences are not supported")
        if ch in _REJECTED_ESCAPES:
            raise self.fail(f"{_REJECTED_ESCAPES[ch]} is not supported")
        if ch.isalnum():
            raise self.fail(f"unknown escape \\{ch}")
        return _Lit(ch)

    def char_class(self) -> _Class:
        negated = False
        if self.peek() == "^":
            negated = True
            self.pos += 1
        ranges: list[tuple[str, str]] = []
        first = True
        while True:
            ch = self.peek()
            if ch is None:
                raise self.fail("missing ']'")
            if ch == "]" and not first:
                self.pos += 1
                break
            first = False
            lo = self.class_char()
            if isinstance(lo, _Class):
                ranges.extend(lo.ranges)
                continue
            if self.peek() == "-" and self.src[self.pos + 1 : self.pos + 2] not in ("]", ""):
                self.pos += 1
                hi = self.class_char()
                if isinstance(hi, _Class):
                    raise self.fail("a range cannot end in a shorthand class")
                if ord(hi) < ord(lo):
                    raise self.fail(f"bad range {lo!r}-{hi!r}")
                ranges.append((lo, hi))
            else:
                ranges.append((lo, lo))
        if not ranges:
            raise self.fail("empty character class")
        return _Class(tuple(ranges), negated)

    def class_char(self) -> str | _Class:
        ch = self.take()
        if ch != "\\":
            return ch
        node = self.escape(in_class=True)
        return node.text if isinstance(node, _Lit) else node  # type: ignore[return-value]

    def quantified(self, atom: object) -> object:
        ch = self.peek()
        if ch is None or ch not in "*+?{":
            return atom
        self.pos += 1
        if ch == "*":
            node = _Repeat(atom, 0, None)
        elif ch == "+":
            node = _Repeat(atom, 1, None)
        elif ch == "?":
            node = _Repeat(atom, 0, 1)
        else:
            end = self.src.find("}", self.pos)
            body = self.src[self.pos : end] if end >= 0 else ""
            low_s, comma, high_s = body.partition(",")
            if end < 0 or not low_s.isdigit() or (high_s and not high_s.isdigit()):
                raise self.fail("malformed {n}, {n,} or {n,m} quantifier")
            self.pos = end + 1
            low = int(low_s)
            high = int(high_s) if high_s else (None if comma else low)
            if high is not None and high < low:
                raise self.fail(f"quantifier {{{body}}} has max < min")
            node = _Repeat(atom, low, high)
        if self.peek() is not None and self.peek() in "?+":
            raise self.fail("lazy or possessive quantifiers are not supported (only greedy)")
        if self.peek() is not None and self.peek() in "*{":
            raise self.fail("a quantifier cannot follow another quantifier")
        return node


# --- emission --------------------------------------------------------------------------------


def _esc_char(ch: str, specials: str) -> str:
    # llama.cpp's GBNF parser knows only \\ \" \[ \] \t \r \n and \x/\u escapes, so other
    # characters that are special in a class ('-', '^') are written as hex.
    named = {"\n": "\\n", "\t": "\\t", "\r": "\\r"}
    if ch in named:
        return named[ch]
    if ch in specials:
        return "\\" + ch
    code = ord(ch)
    if code < 0x20 or code == 0x7F or (ch in "-^" and "]" in specials):
        return f"\\x{code:02X}"
    return ch


_LIT_SPECIALS = '"\\'
_CLASS_SPECIALS = "[]\\"


def _emit(node: object, max_repeat: int | None) -> str:
    if isinstance(node, _Lit):
        return '"' + "".join(_esc_char(c, _LIT_SPECIALS) for c in node.text) + '"'
    if isinstance(node, _Class):
        body = "".join(
            _esc_char(lo, _CLASS_SPECIALS)
            if lo == hi
            else f"{_esc_char(lo, _CLASS_SPECIALS)}-{_esc_char(hi, _CLASS_SPECIALS)}"
            for lo, hi in node.ranges
        )
        return f"[{'^' if node.negated else ''}{body}]"
    if isinstance(node, _Seq):
        parts: list[str] = []
        pending = ""
        for item in node.items:
            if isinstance(item, _Lit):
                pending += item.text
                continue
            if pending:
                parts.append(_emit(_Lit(pending), max_repeat))
                pending = ""
            parts.append(_emit(item, max_repeat))
        if pending:
            parts.append(_emit(_Lit(pending), max_repeat))
        return " ".join(parts) if parts else '""'
    if isinstance(node, _Alt):
        return "(" + " | ".join(_emit(o, max_repeat) for o in node.options) + ")"
    if isinstance(node, _Repeat):
        inner = _emit(node.node, max_repeat)
        if not isinstance(node.node, (_Class, _Alt)) and not (isinstance(node.node, _Lit) and len(node.node.text) == 1):
            inner = f"({inner})"
        low, high = node.low, node.high
        if high is None and max_repeat is not None:
            high = max(low, max_repeat)
        if (low, high) == (0, None):
            return inner + "*"
        if (low, high) == (1, None):
            return inner + "+"
        if (low, high) == (0, 1):
            return inner + "?"
        if high is None:
            return f"{inner}{{{low},}}"
        if low == high:
            return f"{inner}{{{low}}}"
        return f"{inner}{{{low},{high}}}"
    raise TypeError(f"unknown regex node {node!r}")  # pragma: no cover - parser builds only the above


def regex_to_gbnf(pattern: str, *, max_repeat: int | None = None) -> str:
    """Translate ``pattern`` (the subset in the module docstring) into a GBNF grammar.

    Args:
        pattern: the regular expression the whole model output must match.
        max_repeat: when given, every unbounded repeat (``*``, ``+``, ``{n,}``) is capped at this
            many repetitions (recommended for free text with small models).

    Returns:
        A grammar with a single ``root`` rule, for ``extra_body={"grammar": ...}``.

    Raises:
        UnsupportedRegexError: the pattern is malformed or uses an unsupported construct (the
            message gives the position).
    """
    if max_repeat is not None and max_repeat < 1:
        raise ValueError(f"max_repeat must be >= 1 (got {max_repeat})")
    tree = _Parser(pattern).parse()
    return f"root ::= {_emit(tree, max_repeat)}\n"

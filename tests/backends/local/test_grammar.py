"""regex_to_gbnf: translation of the documented subset, rejection of the rest, llama.cpp parses it."""

from __future__ import annotations

import pytest

from stateflow.backends.local import UnsupportedRegexError, regex_to_gbnf
from stateflow.errors import ConfigError
from tests.backends.local.gbnf_parse import unparsable

CASES = {
    r"^Thought: [^\n]{1,200}\nAction: (execute\[[^\n]{1,200}\]|submit)$": (
        'root ::= "Thought: " [^\\n]{1,200} "\\nAction: " ("execute[" [^\\n]{1,200} "]" | "submit")\n'
    ),
    r"a.b*c+d?e{2}f{2,}g{2,5}": 'root ::= "a" [^\\n] "b"* "c"+ "d"? "e"{2} "f"{2,} "g"{2,5}\n',
    r"\d\w\s\D": "root ::= [0-9] [a-zA-Z0-9_] [ \\t\\n\\r\\x0C\\x0B] [^0-9]\n",
    r"(?:ab|cd)+x\"y": 'root ::= ("ab" | "cd")+ "x\\"y"\n',
    r"(ab)": 'root ::= "ab"\n',
    r"(ab){3}": 'root ::= ("ab"){3}\n',
    r"[-a-z^\]\\]": "root ::= [\\x2Da-z\\x5E\\]\\\\]\n",
    r"\x41\u00e9\.\(": 'root ::= "Aé.("\n',
    "": 'root ::= ""\n',
    "a|": 'root ::= ("a" | "")\n',
}


@pytest.mark.parametrize("pattern", list(CASES))
def test_translation(pattern):
    assert regex_to_gbnf(pattern) == CASES[pattern]


def test_max_repeat_bounds_every_open_repeat():
    assert regex_to_gbnf(r"a*b+c{3,}d{1,9}", max_repeat=50) == 'root ::= "a"{0,50} "b"{1,50} "c"{3,50} "d"{1,9}\n'
    assert regex_to_gbnf(r"a{80,}", max_repeat=50) == 'root ::= "a"{80}\n'
    with pytest.raises(ValueError):
        regex_to_gbnf("a", max_repeat=0)


@pytest.mark.parametrize(
    ("pattern", "fragment"),
    [
        ("(a", "missing ')'"),
        ("a)", "unbalanced ')'"),
        ("(?=a)", "look-around"),
        ("(?P<x>a)", "names"),
        (r"(a)\1", "backreferences"),
        ("a*?", "lazy"),
        ("a++", "lazy or possessive"),
        (r"\bword", "word boundary"),
        ("[z-a]", "bad range"),
        ("a{3,1}", "max < min"),
        ("a{x}", "malformed"),
        ("*a", "nothing to repeat"),
        ("a^b", "anchor"),
        ("[abc", "missing ']'"),
        ("abc\\", "lone backslash"),
        (r"\q", "unknown escape"),
        (r"[\D]", "inside a character class"),
    ],
)
def test_unsupported_or_malformed_patterns_are_clear_errors(pattern, fragment):
    with pytest.raises(UnsupportedRegexError) as err:
        regex_to_gbnf(pattern)
    assert fragment in str(err.value)
    assert repr(pattern) in str(err.value) and "position" in str(err.value)
    assert isinstance(err.value, ConfigError)


def test_llama_cpp_parses_every_translation():
    grammars = [*CASES.values(), regex_to_gbnf(r"[^\n]*x", max_repeat=10)]
    malformed = ['root ::= ("a"', 'root ::= "a" other\n']  # unclosed group; undefined rule
    assert unparsable([*grammars, *malformed]).keys() == set(malformed)

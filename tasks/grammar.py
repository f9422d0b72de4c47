"""The response format as GBNF grammars, for servers that enforce grammars (llama.cpp, vLLM).

Every free-text part is bounded: with an unbounded ``[^\\n]+`` a small model can degenerate
into repeating one character until ``max_tokens`` (see docs/platform.md).
"""

from __future__ import annotations

__all__ = ["EXECUTE_ONLY_GBNF", "THOUGHT_ACTION_GBNF"]

_COMMON = r"""thought ::= [^\n]{1,200}
command ::= [^\n]{1,600}
"""

THOUGHT_ACTION_GBNF = (
    r"""root ::= "Thought: " thought "\nAction: " action
action ::= "submit" | "execute[" command "]"
"""
    + _COMMON
)
"""Thought line, then ``execute[...]`` or ``submit``."""

EXECUTE_ONLY_GBNF = (
    r"""root ::= "Thought: " thought "\nAction: execute[" command "]"
"""
    + _COMMON
)
"""Thought line, then ``execute[...]``: for states where submitting makes no sense (Observe)."""

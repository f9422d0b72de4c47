"""The response format as a GBNF grammar, for servers that enforce grammars (llama.cpp, vLLM).

Every free-text part is bounded: with an unbounded ``[^\\n]+`` a small model can degenerate
into repeating one character until ``max_tokens`` (see docs/platform.md).
"""

from __future__ import annotations

__all__ = ["THOUGHT_ACTION_GBNF"]

THOUGHT_ACTION_GBNF = r"""root ::= "Thought: " thought "\nAction: " action
thought ::= [^\n]{1,300}
action ::= "submit" | "execute[" command "]"
command ::= [^\n]{1,600}
"""

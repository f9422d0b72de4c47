"""The response format as GBNF grammars, for servers that enforce grammars (llama.cpp, vLLM).

Every free-text part is bounded: with an unbounded ``[^\\n]+`` a small model can degenerate
into repeating one character until ``max_tokens`` (see docs/platform.md).
"""

from __future__ import annotations

from stateflow.tasks.kit.blackboard import EpisodeVars

from stateflow import Context
from stateflow.stable_id import stable_id

__all__ = ["ACTION_GBNF", "ACTION_ONLY_GBNF", "EXECUTE_ONLY_GBNF", "THOUGHT_ACTION_GBNF", "describe_table_grammar"]

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

ACTION_GBNF = r"""root ::= "Action: " action
action ::= "submit" | "execute[" command "]"
command ::= [^\n]{1,600}
"""
"""``Action: execute[...]`` or ``Action: submit``, without a Thought line (flows derived with
:func:`stateflow.tasks.sql.flow.without_thoughts`)."""

ACTION_ONLY_GBNF = r"""root ::= "Action: execute[" command "]"
command ::= [^\n\]]{1,600}
"""
"""``Action: execute[...]`` and nothing else: an answer without a Thought (the one-shot baseline's
``thought=False``). SQL only: the statement cannot contain ``]``.

Why: with ``[^\n]`` the first ``]`` did not have to close the action, and the 0.5B model wrote
past it (``execute[SELECT ...]. Action: submit. Action: execute[...``) in 96 of 100 one-shot
answers, none of which ran. MySQL quotes names with backticks, not brackets, and no Spider
gold statement contains ``]``; a ``]`` inside a string literal is the one thing this gives up.
:data:`ACTION_GBNF` still allows ``]`` (changing it re-identifies the recorded SF_Agent
variants, and neither model was seen writing past its bracket there: docs/results.md)."""


def _gbnf_literal(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


@stable_id("stateflow.tasks.grammar.describe_table_grammar")
def describe_table_grammar(ctx: Context) -> str:
    """Thought line, then ``execute[DESC <table>]`` for a table the environment listed.

    Used by the SQL flow's Observe state: it exists to look at one real table. Falls back to
    :data:`EXECUTE_ONLY_GBNF` before any table list was seen.
    """
    tables = EpisodeVars.of(ctx).tables
    if not tables:
        return EXECUTE_ONLY_GBNF
    names = " | ".join(_gbnf_literal(t) for t in tables)
    return (
        'root ::= "Thought: " thought "\\nAction: execute[DESC " table "]"\n'
        f"table ::= {names}\n"
        "thought ::= [^\\n]{1,200}\n"
    )

"""Token-level enforcement: GBNF grammars (llama.cpp) generated from the spec's automaton.

:func:`turn_grammar` gives, for the automaton state at the start of a model turn, a grammar of
every output the spec allows until the turn ends: a line per state (its text, then one line of
bounded free content or one of its allowed values), following the automaton, and ending either
at an env-input text (the monitor cuts there and asks the environment) or, where the behaviour
may stop, at the end of the output. Free content is bounded (``[^\\n]{1,N}``): with unbounded
free text small models degenerate (platform.md, "Grammar").

:func:`line_grammar` constrains one state's line (its text, then its content): what a StateFlow
state imported from a spec generates; :func:`content_grammar` constrains the content alone.
"""

from __future__ import annotations

import re

from stateflow.spec.compiled import AgentSpec

__all__ = ["DEFAULT_MAX_CONTENT", "content_grammar", "gbnf_literal", "line_grammar", "turn_grammar"]

#: Default bound on the characters of one line of free content.
DEFAULT_MAX_CONTENT = 200


def gbnf_literal(text: str) -> str:
    """A GBNF string literal for ``text``."""
    escaped = text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\t", "\\t")
    return f'"{escaped}"'


def _slug(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-") or "s"


def _content_rule(spec: AgentSpec, name: str, max_content: int) -> str:
    choices = spec.state(name).choices
    if choices:
        return '" " (' + " | ".join(gbnf_literal(c) for c in choices) + ")"
    return f'" " [^\\n]{{1,{max_content}}}'


def content_grammar(spec: AgentSpec, name: str, *, max_content: int = DEFAULT_MAX_CONTENT) -> str:
    """Grammar of one state's content alone (no state text): its allowed values, or one line of
    bounded free text.

    Example:
        >>> from stateflow.spec import AgentSpec
        >>> s = AgentSpec.from_text('(define x (:states (A "A:" (:output-constrs "yes" "no"))) (:behavior A))')
        >>> content_grammar(s, "A")
        'root ::= ("yes" | "no")'
    """
    choices = spec.state(name).choices
    if choices:
        return "root ::= (" + " | ".join(gbnf_literal(c) for c in choices) + ")"
    return f"root ::= [^\\n]{{1,{max_content}}}"


def line_grammar(spec: AgentSpec, name: str, *, max_content: int = DEFAULT_MAX_CONTENT) -> str:
    """Grammar of one state's line: its text, then its allowed values or bounded free content.

    Used when a StateFlow state generates one step: the model writes the label it was cued
    with (small chat models want to write labels; fixing it stops them writing another state's).

    Example:
        >>> from stateflow.spec import library_spec
        >>> line_grammar(library_spec("react"), "Thought", max_content=80)
        'root ::= "Thought:" " " [^\\\\n]{1,80}'
    """
    return f"root ::= {gbnf_literal(spec.state(name).text)} {_content_rule(spec, name, max_content)}"


def turn_grammar(spec: AgentSpec, q: int, *, max_content: int = DEFAULT_MAX_CONTENT) -> str:
    """Grammar of one model turn starting at automaton state ``q`` (at a line start).

    Args:
        spec: the compiled spec.
        q: the automaton state when the turn starts.
        max_content: bound on the characters of each free-content line.

    Returns:
        GBNF text with a ``root`` rule. Rule ``qN`` derives what may follow automaton state N;
        rule ``c-NAME`` derives a state's content.
    """
    dfa = spec.dfa
    rules: dict[int, str] = {}
    used_content: dict[str, str] = {}
    todo = [q]
    seen = {q}
    while todo:
        r = todo.pop()
        alts: list[str] = []
        for name in dfa.next_states(r):
            text = gbnf_literal(spec.state(name).text)
            if spec.state(name).env_input:
                alts.append(text)  # the turn ends at an env-input text
                continue
            slug = _slug(name)
            used_content[slug] = _content_rule(spec, name, max_content)
            r2 = dfa.step(r, name)
            assert r2 is not None
            tail = ""
            if dfa.next_states(r2):
                tail = f' "\\n" q{r2}'
                if dfa.may_stop(r2):
                    tail = f' ("\\n" q{r2})?'
                if r2 not in seen:
                    seen.add(r2)
                    todo.append(r2)
            alts.append(f"{text} c-{slug}{tail}")
        rules[r] = " | ".join(alts)
    root = f"q{q}?" if dfa.may_stop(q) else f"q{q}"
    lines = [f"root ::= {root}"]
    lines += [f"q{r} ::= {body}" for r, body in sorted(rules.items())]
    lines += [f"c-{slug} ::= {body}" for slug, body in sorted(used_content.items())]
    return "\n".join(lines) + "\n"

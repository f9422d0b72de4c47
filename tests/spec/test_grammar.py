"""Per-turn GBNF grammars are well formed and follow the automaton (structural checks)."""

from __future__ import annotations

import re

import pytest

from stateflow.spec import AgentSpec, library_names, library_spec
from stateflow.spec.grammar import content_grammar, gbnf_literal, turn_grammar

RULE = re.compile(r"^([a-z0-9-]+) ::= (.*)$")
REF = re.compile(r'"(?:[^"\\]|\\.)*"|\[[^\]]*\]|\{[0-9,]+\}|([a-z][a-z0-9-]*)')


def _rules(grammar: str) -> dict[str, str]:
    rules = {}
    for line in grammar.strip().splitlines():
        m = RULE.match(line)
        assert m, f"not a rule: {line!r}"
        assert m.group(1) not in rules, f"rule {m.group(1)} defined twice"
        rules[m.group(1)] = m.group(2)
    return rules


def _refs(body: str) -> set[str]:
    return {m.group(1) for m in REF.finditer(body) if m.group(1)}


@pytest.mark.parametrize("name", library_names())
def test_turn_grammars_are_closed_and_follow_the_automaton(name):
    spec = library_spec(name)
    dfa = spec.dfa
    for q in range(dfa.num_states):
        if not dfa.next_states(q):
            continue
        rules = _rules(turn_grammar(spec, q))
        assert "root" in rules
        for rule, body in rules.items():
            missing = _refs(body) - set(rules)
            assert not missing, f"{name} q{q}: {rule} uses undefined {missing}"
            if rule.startswith("c-"):
                assert "{1,200}" in body or "|" in body or body.startswith('" " ("'), body  # bounded content
            if re.fullmatch(r"q\d+", rule):
                r = int(rule[1:])
                alts = body.split(" | ")
                # one alternative per valid next state, each starting with that state's text
                expected = [gbnf_literal(spec.state(n).text) for n in dfa.next_states(r)]
                assert [a for a, e in zip(alts, expected, strict=True) if not a.startswith(e)] == []


def test_env_input_texts_end_the_turn_and_optional_end_where_may_stop():
    spec = library_spec("chat-bot")
    rules = _rules(turn_grammar(spec, 0))
    assert rules["root"] == "q0?"  # the conversation may end here
    assert rules["q1"] == '"User:"'  # the turn ends at the env-input text


def test_constrained_values_and_escaping():
    spec = AgentSpec.from_text(
        '(define t (:states (Q "Q:" :env-input) (Tool "[Tool \\"x\\"]" (:output-constrs "a\\\\b" "c")))'
        " (:behavior (next Q Tool)))"
    )
    assert content_grammar(spec, "Tool") == 'root ::= ("a\\\\b" | "c")'
    rules = _rules(turn_grammar(spec, 1, max_content=50))
    assert rules["q1"] == '"[Tool \\"x\\"]" c-tool'
    assert rules["c-tool"] == '" " ("a\\\\b" | "c")'
    assert content_grammar(library_spec("react"), "Thought", max_content=50) == "root ::= [^\\n]{1,50}"

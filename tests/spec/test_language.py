"""The compiled DFA accepts exactly the language the semantics define (property-based)."""

from __future__ import annotations

import itertools

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from stateflow.spec.automaton import compile_formula
from stateflow.spec.model import Always, And, Atom, Eventually, Next, Not, Or, Until, formula_to_sexpr
from stateflow.spec.parser import parse_spec

from .reference import all_words, language

SIGMA = ("A", "B", "C")
MAX_LEN = 8
WORDS = all_words(SIGMA, MAX_LEN)


def _formulas(optional_ops: bool):
    atoms = st.sampled_from(SIGMA).map(Atom)

    def extend(children):
        options = [
            st.lists(children, min_size=2, max_size=3).map(lambda ps: Next(tuple(ps))),
            st.lists(children, min_size=2, max_size=3).map(lambda ps: Or(tuple(ps))),
            st.tuples(children, children, st.none() | st.integers(0, 3)).map(lambda t: Until(*t)),
            children.map(Always),
        ]
        if optional_ops:
            options += [
                st.lists(children, min_size=2, max_size=2).map(lambda ps: And(tuple(ps))),
                children.map(Not),
                children.map(Eventually),
            ]
        return st.one_of(options)

    return st.recursive(atoms, extend, max_leaves=7)


def _check_equivalent(f) -> None:
    dfa = compile_formula(f, SIGMA)
    lang = language(f, SIGMA, MAX_LEN)
    for w in WORDS:
        assert dfa.accepts(w) == (w in lang), f"{formula_to_sexpr(f)} disagrees on {w}"
    # every prefix of an accepted word is a valid prefix
    for w in lang:
        for k in range(len(w) + 1):
            assert dfa.accepts_prefix(w[:k]), f"{formula_to_sexpr(f)}: prefix {w[:k]} of {w} rejected"
    _check_trim_and_minimal(dfa)


def _check_trim_and_minimal(dfa) -> None:
    if dfa.is_empty:
        assert dfa.num_states == 1 and dfa.num_edges == 0
        return
    # trimmed: every state reaches acceptance (so "not fallen off" == "valid prefix")
    for q in range(dfa.num_states):
        seen, stack = {q}, [q]
        while stack:
            for r in dfa.transitions[stack.pop()].values():
                if r not in seen:
                    seen.add(r)
                    stack.append(r)
        assert seen & dfa.accepting, f"state {q} cannot reach acceptance"

    # minimal: every pair of states is told apart by some word (search the pair graph; a
    # missing edge leads to the implicit dead state None)
    def distinguishable(p, q) -> bool:
        seen, stack = {(p, q)}, [(p, q)]
        while stack:
            x, y = stack.pop()
            if (x is not None and x in dfa.accepting) != (y is not None and y in dfa.accepting):
                return True
            for a in SIGMA:
                nxt = (
                    dfa.transitions[x].get(a) if x is not None else None,
                    dfa.transitions[y].get(a) if y is not None else None,
                )
                if nxt != (None, None) and nxt not in seen:
                    seen.add(nxt)
                    stack.append(nxt)
        return False

    for p, q in itertools.combinations(range(dfa.num_states), 2):
        assert distinguishable(p, q), f"automaton states {p} and {q} are equivalent: not minimal"


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_formulas(optional_ops=False))
def test_core_operators_match_brute_force(f):
    _check_equivalent(f)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_formulas(optional_ops=True))
def test_optional_operators_match_brute_force(f):
    _check_equivalent(f)


@settings(max_examples=100, deadline=None)
@given(_formulas(optional_ops=True))
def test_formula_text_round_trips_through_parser(f):
    text = f"(define t (:states A B C) (:behavior {formula_to_sexpr(f)}))"
    assert parse_spec(text).behavior == f


def test_until_n_caps_repetitions_per_loop_entry():
    a, b = Atom("A"), Atom("B")
    dfa = compile_formula(Until(a, b, 2), SIGMA)
    assert [dfa.accepts(("A",) * k + ("B",)) for k in range(5)] == [True, True, True, False, False]
    nested = compile_formula(Always(Until(a, b, 1)), SIGMA)  # the bound resets on each entry
    assert nested.accepts(("A", "B", "A", "B", "B"))
    assert not nested.accepts(("A", "A", "B"))


def test_paper_example_until_of_pairs_is_not_ltl_collapse():
    dfa = compile_formula(Until(Next((Atom("A"), Atom("A"))), Atom("B")), SIGMA)
    assert dfa.accepts(("A", "A", "B")) and dfa.accepts(("B",))
    assert not dfa.accepts(("A", "B"))
    assert dfa.next_states(0) == ("A", "B")

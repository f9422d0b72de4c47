"""Parser: accepted forms, and a located, explicit error for each malformed input."""

from __future__ import annotations

import pytest

from stateflow.spec import SpecError, SpecSyntaxError, parse_spec
from stateflow.spec.model import Atom, Next, Until

FULL = """\
; a comment
(define react-agent
  (:states
    (Thought (:text "Thought:"))
    # hash comment line
    (Action (:text "Action:") (:output-constrs "Search" "Lookup"))
    (Action-Input "Action Input:")
    (Observation "Observation:" :env-input)
    (Tool (:text "[Tool]") (:flags :env-input))
    Answer)
  (:behavior (next (until_5 (next Thought Action Action-Input Observation) Tool) Answer)))
"""


def test_all_state_forms_and_bounded_until():
    s = parse_spec(FULL)
    assert s.name == "react-agent"
    assert s.state_names == ("Thought", "Action", "Action-Input", "Observation", "Tool", "Answer")
    assert s.states["Action"].choices == ("Search", "Lookup")
    assert s.states["Action-Input"].text == "Action Input:"
    assert s.env_states == ("Observation", "Tool")
    assert s.states["Answer"].text == "Answer:" and not s.states["Answer"].env_input
    assert s.states["Tool"].text == "[Tool]"
    assert s.behavior == Next(
        (
            Until(Next((Atom("Thought"), Atom("Action"), Atom("Action-Input"), Atom("Observation"))), Atom("Tool"), 5),
            Atom("Answer"),
        )
    )


def test_string_escapes_and_semicolon_inside_string():
    s = parse_spec('(define x (:states (A "A; \\"quoted\\":")) (:behavior A))')
    assert s.states["A"].text == 'A; "quoted":'


def _error(text: str) -> SpecError:
    with pytest.raises(SpecError) as info:
        parse_spec(text, source="t.lisp")
    return info.value


@pytest.mark.parametrize(
    ("text", "line", "col", "needle"),
    [
        # unbalanced parentheses: the unclosed '(' is located
        ("(define x\n  (:states A)\n  (:behavior (next A A))", 1, 1, "never closed"),
        ("(define x (:states A) (:behavior A)))", 1, 37, "without a matching '('"),
        ('(define x (:states (A "A:)) (:behavior A))', 1, 23, "unterminated string"),
        # unknown operator, with a suggestion
        ("(define x (:states A B)\n (:behavior (nxt A B)))", 2, 14, "unknown operator 'nxt'; did you mean 'next'"),
        ("(define x (:states A B) (:behavior (until_x A B)))", 1, 37, "until_N"),
        ("(define x (:states A B) (:behavior (A B)))", 1, 37, "is a state, not an operator"),
        # undeclared state
        (
            "(define x (:states Thought B)\n (:behavior (next Thougt B)))",
            2,
            19,
            "undeclared state 'Thougt'; did you mean 'Thought'",
        ),
        # constraints on an env-input state
        (
            '(define x (:states (Obs (:text "O:") (:flags :env-input) (:output-constrs "a")))\n (:behavior Obs))',
            1,
            58,
            "not allowed on an env-input state",
        ),
        # duplicate state
        ("(define x (:states A\n   B\n   A) (:behavior A))", 3, 4, "duplicate state 'A' (first declared at 1:20)"),
        # empty behaviour
        ("(define x (:states A) (:behavior))", 1, 23, "empty behaviour"),
        ("(define x (:states A))", 1, 1, "empty behaviour"),
        # arity, misplaced atoms, names
        ("(define x (:states A B) (:behavior (until A)))", 1, 37, "exactly 2 argument(s), got 1"),
        ('(define x (:states A B) (:behavior (next A "B")))', 1, 44, "expected a state name"),
        ("(define x (:states A next) (:behavior A))", 1, 22, "operator name"),
        ('(define x (:states (A "X:") (B "X:")) (:behavior A))', 1, 29, "same text"),
        ('(define x (:states (A (:text ""))) (:behavior A))', 1, 30, "empty text"),
        ("(define x (:states (A :flag)) (:behavior A))", 1, 23, "unknown flag"),
        ("(define x (:states A) (:behaviour A) (:extra 1))", 1, 39, "unknown section"),
        ("(define x (:states A) (:behavior ()))", 1, 34, "empty formula"),
        ("(define x (:states A) (:behavior A B))", 1, 36, "exactly one formula"),
        ("(define x (:states A) (:behavior (until_99 A A)))", 1, 35, "too large"),
        ("", None, None, "empty spec"),
    ],
)
def test_malformed_inputs_report_line_col_and_reason(text, line, col, needle):
    err = _error(text)
    assert needle in err.problem
    assert (err.line, err.col) == (line, col)
    where = "t.lisp" if line is None else f"t.lisp:{line}:{col}"
    assert str(err).startswith(where + ": ")


def test_syntax_errors_are_a_distinct_subclass():
    assert isinstance(_error("(define x"), SpecSyntaxError)
    assert not isinstance(_error("(define x (:states A) (:behavior B))"), SpecSyntaxError)


def test_spec_text_is_never_evaluated():
    # a Python expression in a name position is just an invalid name, never executed
    err = _error('(define x (:states __import__("os").system) (:behavior A))')
    assert "invalid state name" in err.problem or "a state is" in err.problem

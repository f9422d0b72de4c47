"""Flow definition and validation."""

from __future__ import annotations

import warnings

import pytest

from stateflow import (
    ANY,
    LLM,
    Flow,
    FlowDefinitionError,
    FlowWarning,
    Prompt,
    State,
    Transition,
    last_contains,
    meta_is,
)

A = State("A", Prompt("a"), LLM())
B = State("B", Prompt("b"), LLM())
END = State("End", final=True)


def test_states_are_derived_from_rules_in_order():
    f = Flow("f", initial=A, transitions=[Transition(A, B), Transition(B, END)])
    assert list(f.states) == ["A", "B", "End"]
    assert f.initial == "A"


def test_all_problems_are_reported_at_once():
    with pytest.raises(FlowDefinitionError) as exc:
        Flow(
            "bad",
            initial=A,
            states=[A, B],
            transitions=[Transition(A, "Nowhere"), Transition("Ghost", B)],
        )
    text = str(exc.value)
    assert "unknown target state 'Nowhere'" in text
    assert "unknown source state 'Ghost'" in text
    assert "non-final state 'B' has no outgoing transition" in text
    assert len(exc.value.problems) >= 4  # + no final state


def test_rule_after_unconditional_rule_is_rejected():
    with pytest.raises(FlowDefinitionError, match="can never fire from 'A'"):
        Flow(
            "f",
            initial=A,
            transitions=[Transition(A, B), Transition(A, END, when=last_contains("x")), Transition(B, END)],
        )


def test_any_rule_shadows_later_specific_rules():
    with pytest.raises(FlowDefinitionError, match="can never fire"):
        Flow("f", initial=A, transitions=[Transition(ANY, END), Transition(A, B), Transition(B, END)])


def test_unreachable_final_is_an_error():
    loop = State("Loop", Prompt("x"), LLM())
    with pytest.raises(FlowDefinitionError, match="no final state is reachable"):
        Flow("f", initial=loop, states=[loop, END], transitions=[Transition(loop, loop)])


def test_unreachable_state_is_a_warning_not_an_error():
    orphan = State("Orphan", Prompt("o"), LLM())
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        f = Flow("f", initial=A, states=[A, orphan, END], transitions=[Transition(A, END), Transition(orphan, END)])
    assert any(issubclass(w.category, FlowWarning) and "Orphan" in str(w.message) for w in caught)
    assert "state 'Orphan' is unreachable from 'A'" in f.warnings


def test_rule_from_final_state_is_dead():
    with pytest.raises(FlowDefinitionError, match="is final"):
        Flow("f", initial=A, transitions=[Transition(A, END), Transition(END, A)])


def test_duplicate_names_rejected():
    other_a = State("A", Prompt("different"), LLM())
    with pytest.raises(FlowDefinitionError, match=r"named 'A'|duplicate"):
        Flow("f", initial=A, transitions=[Transition(A, END), Transition(other_a, END, when=last_contains("x"))])


def test_bad_state_name_and_output():
    with pytest.raises(FlowDefinitionError, match="must match"):
        State("has space")
    with pytest.raises(FlowDefinitionError, match="not an output function"):
        State("X", "just a string")  # type: ignore[arg-type]


def test_variant_drops_state_and_its_rules():
    verify = State("Verify", Prompt("v"), LLM())
    f = Flow(
        "full",
        initial=A,
        transitions=[
            Transition(A, verify, when=last_contains("check")),
            Transition(A, END, when=meta_is("done")),
            Transition(A, A),
            Transition(verify, END),
        ],
    )
    g = f.variant("no-verify", drop=[verify])
    assert "Verify" not in g.states
    assert [r.target for r in g.rules_from("A")] == ["End", "A"]
    assert "Verify" in f.states  # the original is untouched


def test_rules_keep_declaration_order_across_any():
    f = Flow(
        "f",
        initial=A,
        transitions=[
            Transition(ANY, END, when=meta_is("done")),
            Transition(A, B),
            Transition(B, END),
        ],
    )
    assert [str(r) for r in f.rules_from("A")] == ["ANY -> End [tool.done == True]", "A -> B [always]"]

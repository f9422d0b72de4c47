"""``AgentSpec``: compiling a parsed spec, its look-ups and its load-time warnings, exactly."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from stateflow.spec import AgentSpec, SpecError, common_prefix, parse_spec

MID_LINE = "matching is line-anchored and longest-first, but a model writing it mid-line will not switch state"

DEMO = """
(define demo
  (:states
    (Q "Question:" :env-input)
    (T "Thought:")
    (FT "Final Thought:")
    (Ans "Answer:")
    (AnsX "Answer: extra")
    (Unused "Unused:"))
  (:behavior (next Q (until T FT) (or Ans AnsX))))
"""


def test_compiles_the_behaviour_over_the_declared_states():
    spec = AgentSpec.from_text(DEMO, source="demo.lisp")
    assert spec.name == "demo" and spec.spec.source == "demo.lisp"
    assert spec.dfa.alphabet == ("Q", "T", "FT", "Ans", "AnsX", "Unused")
    # Q, then T* FT, then Ans or AnsX: the two endings are one automaton state
    assert {q: dict(e) for q, e in spec.dfa.transitions.items()} == {
        0: {"Q": 1},
        1: {"T": 1, "FT": 2},
        2: {"Ans": 3, "AnsX": 3},
        3: {},
    }
    assert spec.dfa.accepting == frozenset({3})


def test_load_time_warnings_are_exact_and_in_order():
    spec = AgentSpec.from_text(DEMO)
    assert spec.warnings == (
        f"text 'Thought:' of T is a substring of 'Final Thought:' of FT: {MID_LINE}",
        f"text 'Answer:' of Ans is a prefix of 'Answer: extra' of AnsX: {MID_LINE}",
        "declared but never used in the behaviour: Unused",
        "valid next states T, FT share no common text prefix: a correction there needs a forced choice",
    )


def test_no_warnings_for_a_clean_spec_and_one_per_distinct_choice():
    clean = AgentSpec.from_text('(define c (:states (A "Act:") (B "Ask:")) (:behavior (always (or A B))))')
    assert clean.warnings == ()  # "Act:" and "Ask:" share "A"
    twice = AgentSpec.from_text('(define t (:states (A "x:") (B "y:")) (:behavior (next (or A B) (or A B))))')
    # two automaton states offer {A, B}: warned once
    assert twice.warnings == (
        "valid next states A, B share no common text prefix: a correction there needs a forced choice",
    )
    single = AgentSpec.from_text('(define s (:states (A "x:") (B "y:")) (:behavior (next A B)))')
    assert single.warnings == ()  # one valid next state never needs a forced choice


def test_correction_prefix_per_automaton_state():
    spec = AgentSpec.from_text(DEMO)
    assert spec.correction_prefix(0) == "Question:"
    assert spec.correction_prefix(1) == ""  # "Thought:" / "Final Thought:"
    assert spec.correction_prefix(2) == "Answer:"
    assert spec.correction_prefix(3) == ""  # nothing may follow
    act_ask = AgentSpec.from_text('(define c (:states (A "Act:") (B "Ask:")) (:behavior (always (or A B))))')
    assert act_ask.correction_prefix(0) == "A"


def test_state_lookup_and_texts():
    spec = AgentSpec.from_text(DEMO)
    assert spec.state("Q").env_input and spec.state("Q").text == "Question:"
    assert spec.texts(["FT", "Ans"]) == ["Final Thought:", "Answer:"]
    with pytest.raises(KeyError, match="unknown state 'Nope'; declared: Q, T, FT, Ans, AnsX, Unused"):
        spec.state("Nope")
    assert [(s.state, s.content) for s in spec.segmenter.split("Question: why\nThought: because")] == [
        ("Q", "why"),
        ("T", "because"),
    ]
    assert spec.segmenter is spec.segmenter  # built once


def test_every_unused_state_is_named_once_in_declaration_order():
    spec = AgentSpec.from_text(
        '(define u (:states (A "Act:") (Z "Zed:") (B "Bye:") (Y "Why:")) (:behavior (next A B)))'
    )
    assert spec.warnings == ("declared but never used in the behaviour: Z, Y",)


def test_errors_without_a_source_name_the_string_and_the_spot():
    with pytest.raises(SpecError) as undeclared:
        AgentSpec.from_text("(define x (:states A)\n  (:behavior (next A Zed)))")
    assert str(undeclared.value).startswith("<string>:2:")
    assert "Zed" in str(undeclared.value) and undeclared.value.source == "<string>"
    with pytest.raises(SpecError) as never:
        AgentSpec.from_text("(define never (:states A B) (:behavior (and A B)))")
    assert never.value.source == "<string>"
    assert str(never.value) == "<string>: behaviour of 'never' accepts no trace (contradictory and/not?)"


def test_contradictory_behaviour_is_refused_with_its_source():
    text = "(define never (:states A B) (:behavior (and A B)))"
    with pytest.raises(SpecError, match=r"behaviour of 'never' accepts no trace") as exc:
        AgentSpec.from_text(text, source="never.lisp")
    assert "never.lisp" in str(exc.value)
    with pytest.raises(SpecError, match="accepts no trace"):
        AgentSpec.from_spec(parse_spec(text))


def test_from_file(tmp_path):
    path = tmp_path / "demo.lisp"
    path.write_text(DEMO, encoding="utf-8")
    spec = AgentSpec.from_file(path)
    assert spec.name == "demo" and spec.spec.source == str(path)
    assert spec.dfa == AgentSpec.from_text(DEMO).dfa


@pytest.mark.parametrize(
    ("texts", "expected"),
    [
        ([], ""),
        (["Thought:"], "Thought:"),
        (["Action:", "Action Input:"], "Action"),
        (["Action Input:", "Action:"], "Action"),  # order does not matter
        (["ab", "abc", "abd"], "ab"),
        (["abc", "abc"], "abc"),
        (["a", "b"], ""),
        (["Act:", "Ask:"], "A"),  # an odd-length prefix followed by differing characters
        (["Observation:", "Obs:", "Object:"], "Ob"),
        (["abcde", "abcdx"], "abcd"),
        (["", "a"], ""),
    ],
)
def test_common_prefix(texts, expected):
    assert common_prefix(texts) == expected


@given(st.lists(st.text(alphabet="ab:", max_size=5), min_size=1, max_size=4))
def test_common_prefix_is_the_longest_shared_prefix(texts):
    p = common_prefix(texts)
    assert all(t.startswith(p) for t in texts)
    longer = {t[: len(p) + 1] for t in texts}
    assert len(longer) > 1 or any(len(t) == len(p) for t in texts)  # cannot be extended

"""The shipped specs compile and accept (and reject) the runs they are meant for."""

from __future__ import annotations

import pytest

from stateflow.spec import library_names, library_spec
from stateflow.spec.render import to_mermaid, to_networkx

LOOP = ["Thought", "Action", "Action-Input", "Observation"]


def test_every_library_spec_compiles_to_a_trim_automaton():
    assert set(library_names()) >= {"react", "rewoo", "reflexion", "chain-of-thought", "direct", "chat-bot", "pass"}
    for name in library_names():
        s = library_spec(name)
        assert not s.dfa.is_empty, name
        g = to_networkx(s)
        assert g.number_of_nodes() == s.dfa.num_states and g.number_of_edges() == s.dfa.num_edges


@pytest.mark.parametrize(
    ("name", "good", "bad"),
    [
        ("direct", ["Question", "Answer"], ["Question", "Answer", "Answer"]),
        ("chain-of-thought", ["Question", "Thought", "Answer"], ["Question", "Answer"]),
        ("react", ["Question", *LOOP, *LOOP, "Final-Thought", "Answer"], ["Question", "Thought", "Final-Thought"]),
        ("chat-bot", ["Chat-Bot", "User", "Chat-Bot", "User"], ["Chat-Bot", "Chat-Bot"]),
        (
            "rewoo",
            ["Question", *(["Plan", "Action-Label", "Action", "Action-Input"] * 5), "Answer"],
            ["Question", *(["Plan", "Action-Label", "Action", "Action-Input"] * 6), "Answer"],
        ),
        (
            "pass",
            [
                "Question",
                "Plan",
                "Action",
                "Action-Input",
                "Action",
                "Action-Input",
                "Summary",
                "Final-Thought",
                "Answer",
            ],
            ["Question", "Plan", "Summary", "Final-Thought", "Answer"],  # a plan needs at least one action
        ),
        (
            "reflexion",
            [
                "Question",
                *LOOP,
                "Final-Thought",
                "Proposed-Answer",
                "Evaluation",
                "Reflection",
                "Final-Thought",
                "Proposed-Answer",
                "Evaluation",
                "Answer",
            ],
            ["Question", *(LOOP * 4), "Final-Thought", "Proposed-Answer", "Evaluation", "Answer"],  # >3 tool steps
        ),
    ],
)
def test_library_spec_languages(name, good, bad):
    dfa = library_spec(name).dfa
    assert dfa.accepts(good)
    assert not dfa.accepts(bad)


def test_bounds_in_pass_and_reflexion():
    pas = library_spec("pass").dfa
    block = ["Plan", "Action", "Action-Input", "Summary"]
    assert pas.accepts(["Question", *(block * 5), "Final-Thought", "Answer"])
    assert not pas.accepts_prefix(["Question", *(block * 6)])
    refl = library_spec("reflexion").dfa
    trial = ["Final-Thought", "Proposed-Answer", "Evaluation"]
    assert refl.accepts(["Question", *trial, "Reflection", *trial, "Reflection", *trial, "Answer"])
    assert not refl.accepts_prefix(["Question", *trial, *(["Reflection", *trial] * 3)])


def test_query_api_on_react():
    dfa = library_spec("react").dfa
    q = dfa.run(["Question"])
    assert dfa.next_states(q) == ("Thought", "Final-Thought")
    assert not dfa.may_stop(q)
    end = dfa.run(["Question", "Final-Thought", "Answer"])
    assert dfa.may_stop(end) and dfa.must_stop(end)
    chat = library_spec("chat-bot").dfa
    q = chat.run(["Chat-Bot", "User"])
    assert chat.may_stop(q) and not chat.must_stop(q)


def test_mermaid_view_is_drawn_from_the_automaton():
    text = to_mermaid(library_spec("chat-bot"))
    assert text.splitlines() == [
        "stateDiagram-v2",
        "    [*] --> q0",
        "    q0 --> q1: Chat-Bot",
        "    q1 --> q0: User [env]",
        "    q0 --> [*]",
    ]

"""Flow construction, exactly: the full problem list, warnings, stored fields and variants.

Written against the mutants that survived ``scripts/mutation.sh flow``: every problem message and
its rule number is asserted as a whole, so an off-by-one or a check that stops early shows.
"""

from __future__ import annotations

import functools
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
    predicate,
)

A = State("A", Prompt("a"), LLM())
B = State("B", Prompt("b"), LLM())
C = State("C", Prompt("c"), LLM())
END = State("End", final=True)
X = last_contains("x")


def _problems(**kw) -> list[str]:
    with pytest.raises(FlowDefinitionError) as exc:
        Flow(kw.pop("name", "bad"), **kw)
    assert exc.value.flow == "bad"
    return exc.value.problems


def _quiet_flow(name: str, **kw) -> Flow:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FlowWarning)
        return Flow(name, **kw)


def test_rule_problems_are_numbered_from_one_and_all_reported():
    problems = _problems(
        initial=A,
        states=[A, END],
        transitions=[
            Transition(A, END, when=X),
            Transition(A, "Nowhere", when=X),
            Transition(["Ghost", END], A, when=X),
            Transition(A, END),
        ],
    )
    assert problems == [
        "transition #2 (A -> Nowhere [last message contains 'x']): unknown target state 'Nowhere'; "
        "states: ['A', 'End']",
        "transition #3 (Ghost|End -> A [last message contains 'x']): unknown source state 'Ghost'; "
        "states: ['A', 'End']",
        "transition #3 (Ghost|End -> A [last message contains 'x']): source 'End' is final; "
        "a run stops there, so the rule is dead",
    ]
    assert str(FlowDefinitionError("bad", problems)).startswith("flow 'bad' is invalid:\n  - transition #2")


def test_shadowed_rule_names_both_rules_by_number():
    problems = _problems(
        initial=A,
        transitions=[
            Transition(B, END, when=X),  # does not apply to A: must not stop the scan for A
            Transition(A, B),
            Transition(A, END, when=X),
            Transition(B, A),
        ],
    )
    assert problems == [
        "transition #3 (A -> End [last message contains 'x']) can never fire from 'A': "
        "transition #2 before it has no condition"
    ]


def test_shadowing_is_checked_for_states_listed_after_a_final_state():
    problems = _problems(
        initial=A,
        states=[END, A, B],
        transitions=[Transition(A, B), Transition(B, END), Transition(B, A, when=X)],
    )
    assert problems == [
        "transition #3 (B -> A [last message contains 'x']) can never fire from 'B': "
        "transition #2 before it has no condition"
    ]


def test_no_final_state_and_no_exit_messages():
    problems = _problems(initial=A, states=[A, B], transitions=[Transition(A, B, when=X), Transition(A, A)])
    assert problems == ["non-final state 'B' has no outgoing transition", "no final state (mark one with final=True)"]


def test_duplicate_state_objects_versus_one_object_listed_twice():
    other_a = State("A", Prompt("other"), LLM())
    problems = _problems(initial=A, states=[A, other_a, END], transitions=[Transition(A, END)])
    assert problems == ["duplicate state name 'A'"]
    flow = Flow("ok", initial=A, states=[A, A, END], transitions=[Transition(A, END)])  # same object: fine
    assert list(flow.states) == ["A", "End"]


def test_initial_state_missing_from_the_listed_states():
    problems = _problems(initial=A, states=[B, END], transitions=[Transition(A, END), Transition(B, END)])
    assert problems == ["initial state 'A' is not among the states"]


def test_rule_state_outside_an_explicit_state_list_is_unknown_not_added():
    problems = _problems(initial=A, states=[A, END], transitions=[Transition(A, B, when=X), Transition(A, END)])
    assert problems == [
        "transition #1 (A -> B [last message contains 'x']): unknown target state 'B'; states: ['A', 'End']"
    ]


def test_states_are_derived_from_multi_source_rules_too():
    flow = _quiet_flow(
        "derived",
        initial=A,
        transitions=[Transition(A, END, when=X), Transition([A, B], C), Transition(C, END)],
    )
    # reading order: breadth-first from the initial state, then the rest, final states last
    assert list(flow.states) == ["A", "C", "B", "End"]
    assert flow.states["B"] is B
    assert flow.warnings == ("state 'B' is unreachable from 'A'",)


def test_max_transitions_bound():
    assert _problems(initial=A, transitions=[Transition(A, END)], max_transitions=0) == [
        "max_transitions must be >= 1, got 0"
    ]
    assert Flow("one", initial=A, transitions=[Transition(A, END)], max_transitions=1).max_transitions == 1
    assert Flow("default", initial=A, transitions=[Transition(A, END)]).max_transitions == 30


def test_fields_are_stored_as_given():
    flow = Flow("named", initial=A, transitions=[Transition(A, END)], system_message="sys", description="desc")
    assert (flow.name, flow.initial, flow.system_message, flow.description) == ("named", "A", "sys", "desc")
    plain = Flow("plain", initial=A, transitions=[Transition(A, END)])
    assert (plain.system_message, plain.description, plain.warnings) == ("", "", ())
    assert (A.description, END.final, A.final) == ("", True, False)


def test_reachability_follows_only_rules_that_leave_each_state():
    # O1 -> O2 must not make O2 reachable from A: only A's own rules count from A
    o1, o2 = State("O1", Prompt("o"), LLM()), State("O2", Prompt("o"), LLM())
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        flow = Flow(
            "orphans",
            initial=A,
            states=[END, A, o1, o2],  # a final state first: states after it still get successors
            transitions=[Transition(A, END), Transition(o1, o2, when=X), Transition([o1, o2], END)],
        )
    assert flow.warnings == ("state 'O1' is unreachable from 'A'", "state 'O2' is unreachable from 'A'")
    assert [str(w.message) for w in caught] == [
        "flow 'orphans': state 'O1' is unreachable from 'A'",
        "flow 'orphans': state 'O2' is unreachable from 'A'",
    ]
    assert all(w.category is FlowWarning for w in caught)


def test_bad_state_and_transition_arguments_say_which():
    with pytest.raises(FlowDefinitionError) as exc:
        State("has space")
    assert exc.value.state == "has space"  # a state, not a flow (issue 48)
    assert exc.value.flow is None
    assert exc.value.problems == [
        "state name 'has space' must match ^[A-Za-z_][A-Za-z0-9_-]{0,63}$ (letters, digits, _ and -)"
    ]
    with pytest.raises(FlowDefinitionError) as exc:
        State("S", "text")  # type: ignore[arg-type]
    assert exc.value.state == "S"
    assert exc.value.problems == [
        "state 'S': 'text' is not an output function (Prompt, LLM, Tool, AutoGenAgent, Human, Parallel or a Flow)"
    ]
    with pytest.raises(TypeError, match=r"^Transition to 'B': when= must be a Condition, got str$"):
        Transition(A, B, when="x")  # type: ignore[arg-type]
    assert Transition([A, "B"], C).state_objects == (A, C)
    assert Transition(ANY, C).state_objects == (C,)
    assert Transition("A", "C").state_objects == ()


def test_variant_replaces_drops_and_keeps_settings():
    verify = State("Verify", Prompt("v"), LLM())
    base = Flow(
        "full",
        initial=A,
        transitions=[
            Transition([verify, A], END, when=X),  # loses Verify, keeps A
            Transition(A, verify, when=last_contains("check")),
            Transition(A, B),
            Transition(verify, END),
            Transition(B, END),
        ],
        max_transitions=7,
        system_message="sys",
        description="desc",
    )
    new_b = State("B", Prompt("new b"), LLM())
    v = base.variant("no-verify", drop=[verify], replace=[new_b])
    assert (v.name, v.max_transitions, v.system_message, v.description) == ("no-verify", 7, "sys", "desc")
    assert list(v.states) == ["A", "B", "End"] and v.states["B"] is new_b
    assert [str(r) for r in v.transitions] == [
        "A -> End [last message contains 'x']",
        "A -> B [always]",
        "B -> End [always]",
    ]
    explicit = base.variant("explicit", drop=[verify], transitions=[Transition(A, B), Transition(B, END)], initial=A)
    assert [str(r) for r in explicit.transitions] == ["A -> B [always]", "B -> End [always]"]
    assert explicit.initial == "A"


# -- conditions read the context they are given --------------------------------------------------


def test_combined_conditions_pass_the_context_to_each_part():
    def has(key: str):
        return predicate(lambda ctx: key in ctx.vars, f"has {key}")

    from stateflow import Context, History

    ctx = Context(task="T", history=History(), vars={"a": 1, "b": 2})
    assert (has("a") & has("b"))(ctx)
    assert not (has("a") & has("z"))(ctx)
    assert (~has("z"))(ctx) and not (~has("a"))(ctx)
    assert (has("z") | has("b"))(ctx)


def test_predicate_name_falls_back_for_callables_without_a_name():
    fn = functools.partial(lambda ctx, v: v, v=True)
    assert predicate(fn).name == "predicate"


def test_variant_reroutes_rules_of_a_dropped_state_and_rebuilds_any_rules_on_replaced_states():
    observe = State("Observe", Prompt("look"), LLM())
    err = State("Err", Prompt("fix"), LLM())
    base = Flow(
        "full",
        initial=A,
        transitions=[
            Transition(ANY, err, when=X),
            Transition(A, observe),
            Transition(observe, B),
            Transition([B, err], END),
        ],
    )
    new_err = err.with_instruction("Read the error first.")
    v = base.variant("no-observe", drop=[observe], reroute={observe: B}, replace=[new_err])
    assert [str(r) for r in v.transitions] == [
        "ANY -> Err [last message contains 'x']",
        "A -> B [always]",
        "B|Err -> End [always]",
    ]
    assert v.transitions[0].state_objects == (new_err,) and v.states["Err"] is new_err
    assert new_err.instruction == "fix\nRead the error first."
    assert "Observe" in base.states and base.states["Err"] is err  # the original is untouched


def test_variant_rejects_reroutes_that_cannot_hold():
    observe = State("Observe", Prompt("look"), LLM())
    base = Flow("full", initial=A, transitions=[Transition(A, observe), Transition(observe, END)])
    with pytest.raises(FlowDefinitionError, match="'Observe' is not dropped"):
        base.variant("v", reroute={observe: END})
    with pytest.raises(FlowDefinitionError, match="unknown state 'Nope'"):
        base.variant("v", drop=["Nope"])
    with pytest.raises(FlowDefinitionError, match="reroute to unknown state 'Gone'"):
        base.variant("v", drop=[observe], reroute={observe: "Gone"})


def test_with_instruction_needs_a_prompt():
    with pytest.raises(FlowDefinitionError, match="has no Prompt"):
        State("Act", LLM()).with_instruction("more")
    s = State("Act", Prompt("a"), LLM(), Prompt("b"), description="d")
    amended = s.with_instruction("x", "y")
    assert [o.text for o in amended.outputs if isinstance(o, Prompt)] == ["a\nx\ny", "b"]
    assert (amended.name, amended.description, amended.final) == ("Act", "d", False)

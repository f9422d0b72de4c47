"""`verify`: the product of a flow's bounded paths with a spec automaton (issue 60, part 1)."""

from __future__ import annotations

import warnings

import pytest

from stateflow import ANY, LLM, Flow, Parallel, State, Tool, Transition, last_contains
from stateflow.spec import AgentSpec
from stateflow.spec.verify import VerifyError, choices, counterexample_mermaid, verify

DONE = last_contains("DONE")
FAILED = last_contains("Error")


def _spec(states: str, behaviour: str, name: str = "s") -> AgentSpec:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return AgentSpec.from_text(f"(define {name} (:states {states}) (:behavior {behaviour}))")


def _loop_flow(bound: int = 6) -> Flow:
    solve, check, end = State("Solve", LLM()), State("Check", LLM()), State("End", final=True)
    return Flow(
        "loop",
        initial=solve,
        max_transitions=bound,
        transitions=[
            Transition(check, end, when=DONE),
            Transition(solve, check),
            Transition(check, solve),
        ],
    )


def test_holds_states_bound_and_abstraction() -> None:
    spec = _spec("Solve Check End", "(until (next Solve Check) End)")
    verdict = verify(_loop_flow(), spec)
    assert verdict.holds and verdict.counterexample is None
    assert verdict.bound == 6
    assert any("free choices" in a and "last message contains 'DONE'" in a for a in verdict.abstraction)
    assert "holds" in verdict.summary() and "at most 6 transitions" in verdict.summary()


def test_violation_is_the_shortest_path() -> None:
    # at most three checks: the fourth visit of Check is the first state that breaks it
    spec = _spec(
        "Solve Check End",
        "(next (until_2 (next Solve Check) Solve) (or End (next Check End) (next Check Solve)))",
    )
    verdict = verify(_loop_flow(bound=10), spec)
    assert not verdict.holds
    assert verdict.counterexample is not None
    assert verdict.counterexample.path == ("Solve", "Check") * 4
    assert verdict.counterexample.steps[1].rule == "#2 Solve -> Check [always]"


def test_bound_given_overrides_the_flow_and_cut_off_complete() -> None:
    spec = _spec("Solve Check End", "(until (next Solve Check) End)")
    assert verify(_loop_flow(), spec, bound=2, cut_off="complete").counterexample.path == ("Solve", "Check", "Solve")
    assert verify(_loop_flow(), spec, bound=2).holds  # a cut-off path is a valid prefix


def test_ending_where_the_spec_may_not_stop() -> None:
    spec = _spec("Solve Check End", "(next Solve Check Solve Check End)")
    cex = verify(_loop_flow(), spec).counterexample
    assert cex is not None and cex.path == ("Solve", "Check", "End")
    assert "does not allow 'End' after Solve Check" in cex.reason


def test_unconditional_rule_and_repeated_condition_are_decided() -> None:
    a, b, c, end = State("A", LLM()), State("B", LLM()), State("C", LLM()), State("End", final=True)
    flow = Flow(
        "decided",
        initial=a,
        transitions=[
            Transition(a, end, when=DONE),
            Transition(a, c, when=DONE),  # same condition object: can never win
            Transition(a, b),
            Transition([b, c], end),
        ],
    )
    assert choices(flow, "A") == [(1, "End"), (3, "B")]
    never_c = _spec("A B C End", "(next A (or End (next B End)))")
    assert verify(flow, never_c).holds


def test_alphabet_maps_and_hides_states() -> None:
    spec = _spec("Work Stop", "(until Work Stop)")
    flow = _loop_flow()
    assert verify(flow, spec, alphabet={"Solve": "Work", "Check": "Work", "End": "Stop"}).holds
    assert verify(flow, spec, alphabet={"Solve": "Work", "Check": None, "End": "Stop"}).holds
    v = verify(flow, spec, alphabet={"Solve": None, "Check": None, "End": "Stop"})
    assert v.holds and v.hidden == ("Solve", "Check")


def test_alphabet_problems_are_all_named() -> None:
    spec = _spec("Solve Check", "(until Solve Check)")
    with pytest.raises(VerifyError) as info:
        verify(_loop_flow(), spec, alphabet={"Nope": "Solve", "Check": "Other"})
    message = str(info.value)
    assert "'Nope', which is no state of the flow" in message
    assert "maps 'Check' to 'Other', which the spec does not declare" in message
    assert "state 'End' is not a state the spec declares" in message and "--map End=" in message


def test_bound_below_one() -> None:
    with pytest.raises(VerifyError, match="bound must be >= 1, got 0"):
        verify(_loop_flow(), _spec("Solve Check End", "(until Solve End)"), bound=0)


def test_start_state_the_spec_refuses() -> None:
    cex = verify(_loop_flow(), _spec("Solve Check End", "(next Check End)")).counterexample
    assert cex is not None and cex.path == ("Solve",) and "start" in cex.reason


def _subflow_flow() -> Flow:
    draft, review, done = State("Draft", LLM()), State("Review", LLM()), State("Done", final=True)
    inner = Flow(
        "write",
        initial=draft,
        transitions=[Transition(review, done, when=DONE), Transition(draft, review), Transition(review, draft)],
    )
    plan, work, end = State("Plan", LLM()), State("Work", inner), State("End", final=True)
    return Flow(
        "outer",
        initial=plan,
        max_transitions=8,
        transitions=[Transition(ANY, end, when=FAILED), Transition(plan, work), Transition(work, end)],
    )


def test_subflows_are_expanded_as_they_run() -> None:
    flow = _subflow_flow()
    names = "Plan Work Work-Draft Work-Review Work-Done End"
    alphabet = {"Work.Draft": "Work-Draft", "Work.Review": "Work-Review", "Work.Done": "Work-Done"}
    # inside the subflow only its own rules decide: the parent's ANY rule leaves the exit state
    # (Work.Done) and Plan, never Work.Draft or Work.Review
    inside = "(next Work Work-Draft (until (next Work-Review Work-Draft) (next Work-Review Work-Done End)))"
    spec = _spec(names, f"(next Plan (or End {inside}))")
    assert verify(flow, spec, alphabet=alphabet).holds
    always_works = _spec(names, "(next Plan Work (always (or Work-Draft Work-Review Work-Done)) End)")
    cex = verify(flow, always_works, alphabet=alphabet).counterexample
    assert cex is not None and cex.path == ("Plan", "End")
    deep = _spec(names, "(next Plan (or End (next Work Work-Draft Work-Review Work-Done End)))")
    cex = verify(flow, deep, alphabet=alphabet).counterexample
    assert cex is not None
    assert cex.path == ("Plan", "Work", "Work.Draft", "Work.Review", "Work.Draft")
    assert cex.steps[2].rule == "#1 Work -> Work.Draft [always]"


def test_parallel_subflow_branches_run_in_branch_order() -> None:
    a1, a_end = State("Look", LLM()), State("Found", final=True)
    left = Flow(
        "left", initial=a1, max_transitions=3, transitions=[Transition(a1, a_end, when=DONE), Transition(a1, a1)]
    )
    b1, b_end = State("Ask", LLM()), State("Said", final=True)
    right = Flow("right", initial=b1, transitions=[Transition(b1, b_end)])
    fan = State("Fan", Parallel(left, right, Tool(lambda ctx: "x", "t"), merge=lambda ctx, rs: "m"))
    end = State("End", final=True)
    flow = Flow("fan", initial=fan, transitions=[Transition(fan, end)])
    names = "Fan L-Look L-Found R-Ask R-Said End"
    alphabet = {
        "Fan.left.Look": "L-Look",
        "Fan.left.Found": "L-Found",
        "Fan.right.Ask": "R-Ask",
        "Fan.right.Said": "R-Said",
    }
    # the left branch's own bound (3) cuts it off after four Look states; then the right branch
    spec = _spec(names, "(next Fan (until_3 L-Look (or L-Found L-Look)) R-Ask R-Said End)")
    assert verify(flow, spec, alphabet=alphabet).holds
    tight = _spec(names, "(next Fan (until_1 L-Look (or L-Found L-Look)) R-Ask R-Said End)")
    cex = verify(flow, tight, alphabet=alphabet).counterexample
    assert cex is not None
    assert cex.path == ("Fan", "Fan.left.Look", "Fan.left.Look", "Fan.left.Found")
    assert cex.steps[1].rule == "branch left"


def test_mermaid_draws_the_path() -> None:
    spec = _spec("Solve Check End", "(next Solve Check Solve Check End)")
    flow = _loop_flow()
    cex = verify(flow, spec).counterexample
    assert cex is not None
    text = counterexample_mermaid(flow, cex)
    assert text.startswith("flowchart TD\n")
    assert "    class s_Solve,s_Check,s_End path\n" in text
    assert "    style s_End stroke-width:4px\n" in text
    # links: 0 start, 1 Solve->Check, 2 Check->End, 3 Check->Solve
    assert "    linkStyle 1,2 stroke:#c00,stroke-width:3px\n" in text

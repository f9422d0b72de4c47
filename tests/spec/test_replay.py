"""`replay` and `scripted_run`: counterexamples you can run, or an honest "cannot" (issue 60, part 2)."""

from __future__ import annotations

import pytest

from stateflow import ANY, LLM, Flow, Judge, Prompt, State, Tool, Transition, last_contains, meta_is, replies_in
from stateflow.errors import StateFlowError
from stateflow.outputs import ToolResult
from stateflow.spec import AgentSpec
from stateflow.spec.replay import Outcome, replay, scripted_run, shortest_replayable
from stateflow.spec.verify import verify

FAILED = meta_is("ok", False, name="failed")
DONE = meta_is("done", True, name="done")

POOL = [
    Outcome("ok", "Action: run", ToolResult("fine", {"ok": True})),
    Outcome("fail", "Action: run", ToolResult("broken", {"ok": False})),
    Outcome("done", "Action: submit", ToolResult("bye", {"ok": True, "done": True})),
]


def _flow(*, budget: bool) -> Flow:
    setup = State("Setup", Tool(lambda ctx: "tables", "list"))
    work = State("Work", Prompt("Do it."), LLM(), Tool(lambda ctx: "ran", "run"))
    fix = State("Fix", Prompt("Fix it."), LLM(), Tool(lambda ctx: "ran", "run"))
    end = State("End", final=True)
    rules = [Transition(ANY, end, when=DONE)]
    if budget:
        rules.append(Transition(ANY, end, when=FAILED & replies_in("Fix", at_least=2)))
    rules += [Transition(ANY, fix, when=FAILED), Transition(setup, work), Transition([work, fix], work)]
    return Flow("budgeted" if budget else "loose", initial=setup, transitions=rules, max_transitions=8)


SPEC = AgentSpec.from_text(
    "(define two-fixes (:states Setup Work Fix End)"
    " (:behavior (not (next (eventually (next Fix Fix Fix)) (always (or Setup Work Fix End))))))"
)


def test_a_real_violation_replays_and_runs() -> None:
    flow = _flow(budget=False)
    cex = verify(flow, SPEC).counterexample
    assert cex is not None and cex.path == ("Setup", "Fix", "Fix", "Fix")
    found = replay(flow, cex, {"Setup": POOL[:2], "Work": POOL, "Fix": POOL})
    assert found.realizable
    assert [o.label for o in found.outcomes] == ["fail", "fail", "fail", "ok"]
    result = scripted_run(flow, found)
    assert result.path == list(cex.path)
    assert [m.content for m in result.history.of_kind("tool")] == ["broken", "broken", "broken", "fine"]


def test_a_budget_the_abstraction_ignores_is_reported_unmet() -> None:
    flow = _flow(budget=True)
    cex = verify(flow, SPEC).counterexample
    assert cex is not None and cex.path == ("Setup", "Fix", "Fix", "Fix")  # a free choice
    found = replay(flow, cex, {"Setup": POOL[:2], "Work": POOL, "Fix": POOL})
    assert not found.realizable and found.unmet is not None
    assert (found.unmet.index, found.unmet.state) == (2, "Fix")
    assert "fail: #2 ANY -> End [(failed & 2+ replies in Fix)] fired" in found.unmet.tried
    assert "step 3 (Fix): no outcome makes #3 ANY -> Fix [failed] the first rule to hold" in str(found.unmet)
    with pytest.raises(StateFlowError, match="cannot be replayed: step 3"):
        scripted_run(flow, found)


def test_backtracking_finds_an_outcome_a_later_step_needs() -> None:
    # Work -> Check needs "last tool says ok"; Check -> End needs the *reply* before it to say DONE,
    # so the first outcome that passes step 1 ("ok") must be given up for "ok, DONE"
    work, check, end = (
        State("Work", LLM(), Tool(lambda c: "", "t")),
        State("Check", Prompt("?")),
        State("End", final=True),
    )
    flow = Flow(
        "two-steps",
        initial=work,
        transitions=[
            Transition(work, check, when=meta_is("ok", True)),
            Transition(work, work),
            Transition(check, end, when=last_contains("DONE", kind="llm")),
            Transition(check, work),
        ],
    )
    spec = AgentSpec.from_text("(define no-end (:states Work Check End) (:behavior (always (or Work Check))))")
    cex = verify(flow, spec).counterexample
    assert cex is not None and cex.path == ("Work", "Check", "End")
    pool = [
        Outcome("ok", "working", ToolResult("", {"ok": True})),
        Outcome("ok, DONE", "DONE", ToolResult("", {"ok": True})),
    ]
    found = replay(flow, cex, {"Work": pool})
    assert found.realizable and [o.label for o in found.outcomes] == ["ok, DONE", "nothing", "nothing"]


def test_a_judge_cannot_be_consulted_offline() -> None:
    judge = Judge("Is it done?", name="done?")
    ask, end = State("Ask", LLM()), State("End", final=True)
    flow = Flow(
        "judged", initial=ask, transitions=[Transition(ask, end, when=judge.answer_is("yes")), Transition(ask, ask)]
    )
    spec = AgentSpec.from_text("(define never (:states Ask End) (:behavior (always Ask)))")
    cex = verify(flow, spec).counterexample
    assert cex is not None
    found = replay(flow, cex, {"Ask": [Outcome("any", "yes")]})
    assert found.unmet is not None and "cannot consult LLM judges" in found.unmet.tried[0]


def test_parallel_paths_are_refused() -> None:
    from stateflow import Parallel

    inner_a, inner_end = State("A", LLM()), State("Z", final=True)
    inner = Flow("inner", initial=inner_a, transitions=[Transition(inner_a, inner_end)])
    fan = State("Fan", Parallel(inner, Tool(lambda c: "x", "t"), merge=lambda c, r: "m"))
    end = State("End", final=True)
    flow = Flow("fan", initial=fan, transitions=[Transition(fan, end)])
    spec = AgentSpec.from_text("(define only-fan (:states Fan A Z End) (:behavior Fan))")
    cex = verify(flow, spec, alphabet={"Fan.inner.A": "A", "Fan.inner.Z": "Z"}).counterexample
    assert cex is not None
    with pytest.raises(StateFlowError, match="parallel branches"):
        replay(flow, cex, {})


def _key(state: str, history) -> object:
    """The toy flows' conditions read the last tool result and the replies in Fix (budget 2)."""
    last = next((m for m in reversed(history) if m.kind.value == "tool"), None)
    fixes = sum(1 for m in history if m.kind.value == "llm" and m.state == "Fix")
    return (None if last is None else tuple(sorted(last.meta.items())), min(fixes, 2))


def test_shortest_replayable_finds_real_runs_and_proves_the_budget() -> None:
    pool = {"Setup": POOL[:2], "Work": POOL, "Fix": POOL}
    loose = shortest_replayable(_flow(budget=False), SPEC, pool, merge_key=_key)
    assert loose is not None and loose.counterexample.path == ("Setup", "Fix", "Fix", "Fix")
    assert [o.label for o in loose.outcomes] == ["fail", "fail", "fail", "ok"]
    assert scripted_run(_flow(budget=False), loose).path == ["Setup", "Fix", "Fix", "Fix"]
    # the budget ends the run after a failure with two replies in Fix: no run breaks the spec
    assert shortest_replayable(_flow(budget=True), SPEC, pool, merge_key=_key) is None
    # without merging the same answer, prefix by prefix, within the bound of 8
    assert shortest_replayable(_flow(budget=True), SPEC, pool) is None


def test_shortest_replayable_gives_up_loudly() -> None:
    pool = {"Setup": POOL[:2], "Work": POOL, "Fix": POOL}
    with pytest.raises(StateFlowError, match="gave up after 10 run prefixes"):
        shortest_replayable(_flow(budget=True), SPEC, pool, max_runs=10)

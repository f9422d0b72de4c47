"""`SpecObserver`: a spec watching real runs through `on_event` (issue 60, part 3)."""

from __future__ import annotations

import pytest

from stateflow import ANY, LLM, Flow, ModelProfile, Prompt, State, Transition, last_contains, run
from stateflow.backends.scripted import ScriptedLLM
from stateflow.events import StateEntered
from stateflow.spec import AgentSpec, SpecViolationError
from stateflow.spec.observer import SpecObserver, SpecViolated

FAKE = ModelProfile(name="fake", model="fake", provider="scripted", api_key_env=None)


def _flow() -> Flow:
    draft = State("Draft", Prompt("Write it."), LLM())
    check = State("Check", Prompt("Check it."), LLM())
    done = State("Done", final=True)
    return Flow(
        "draft-check",
        initial=draft,
        max_transitions=6,
        transitions=[
            Transition(ANY, done, when=last_contains("DONE")),
            Transition(draft, check),
            Transition(check, draft),
        ],
    )


CHECKED = AgentSpec.from_text("(define checked (:states Draft Check Done) (:behavior (until (next Draft Check) Done)))")


def _run(replies: list[str], watch: SpecObserver, **kwargs: object):
    return run(
        _flow(), "task", models=FAKE, scripts={"fake": ScriptedLLM(replies)}, on_event=watch, tokens=False, **kwargs
    )


def test_a_run_that_keeps_the_spec() -> None:
    watch = SpecObserver(CHECKED)
    result = _run(["draft", "DONE"], watch)
    assert result.path == ["Draft", "Check", "Done"]
    assert watch.holds and watch.path == ["Draft", "Check", "Done"]


def test_a_violation_is_recorded_and_forwarded() -> None:
    seen: list[object] = []
    watch = SpecObserver(CHECKED, forward=seen.append)
    result = _run(["DONE"], watch)
    assert result.path == ["Draft", "Done"]
    (v,) = watch.violations
    assert (v.state, v.visit, v.valid) == ("Done", 1, ("Check",))
    assert "does not allow 'Done' here; allowed: Check" in v.reason
    forwarded = [e for e in seen if isinstance(e, SpecViolated)]
    assert forwarded == [v] and v.to_dict()["type"] == "spec_violated"
    assert any(isinstance(e, StateEntered) for e in seen)


def test_stop_ends_the_run_at_the_violation() -> None:
    watch = SpecObserver(CHECKED, stop=True)
    with pytest.raises(SpecViolationError, match="spec 'checked' violated at state 'Done'") as info:
        _run(["DONE"], watch)
    assert info.value.valid == ("Check",)
    result = _run(["DONE"], SpecObserver(CHECKED, stop=True), raise_errors=False)
    assert result.stop_reason == "error"


def test_ending_where_the_spec_may_not_stop_and_an_undeclared_state() -> None:
    twice = AgentSpec.from_text(
        "(define twice (:states Draft Check Done) (:behavior (next Draft Check Draft Check Done)))"
    )
    watch = SpecObserver(twice, alphabet={"Done": None})
    _run(["draft", "DONE"], watch)
    (v,) = watch.violations
    assert v.state == "Done" and "ended in 'Done', where the spec may not stop" in v.reason
    partial = AgentSpec.from_text("(define partial (:states Draft Check) (:behavior (always (next Draft Check))))")
    watch = SpecObserver(partial)
    _run(["draft", "DONE"], watch)
    assert "does not declare 'Done'" in watch.violations[0].reason

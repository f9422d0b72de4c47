"""Repetition guard: a model looping on one action never sends it more than twice."""

from __future__ import annotations

import re
from types import SimpleNamespace

from stateflow import LLM, Flow, Prompt, State, Tool, ToolResult, Transition, meta_is, run
from stateflow.backends.scripted import ScriptedLLM
from stateflow.repetition import RepeatGuard, repeated_action
from tests.core.helpers import scripted

LOOP = "Thought: count pets\nAction: execute[SELECT pet_type FROM pets]"
FIXED = "Thought: right column\nAction: execute[SELECT PetType FROM pets]"


def parse(text: str) -> str | None:
    m = re.search(r"Action: execute\[(.*)\]", text)
    return m.group(1) if m else None


def fake_db(sent: list[str | None]):
    """A database where only the right column name works; ``sent`` records every statement."""

    def execute(ctx) -> ToolResult:
        last = ctx.history.last("llm")
        stmt = parse(last.content) if last else None
        sent.append(stmt)
        if stmt == "SELECT PetType FROM pets":
            return ToolResult("[('cat',), ('dog',)]", {"ok": True, "done": True})
        return ToolResult("Unknown column 'pet_type'", {"ok": False, "done": False})

    return execute


def loop_flow(llm: LLM, sent: list[str | None], *, fallback: bool) -> Flow:
    solve = State("Solve", Prompt("Write one SQL statement."), llm)
    act = State("Act", Tool(fake_db(sent), "execute"))
    submit = State("Submit", Tool(lambda ctx: ToolResult("submitted", {"ok": True, "done": True}), "submit"))
    end = State("End", final=True)
    rules = [Transition(solve, submit, when=repeated_action(parse))] if fallback else []
    rules += [
        Transition(solve, act),
        Transition(act, end, when=meta_is("done")),
        Transition(act, solve),
        Transition(submit, end),
    ]
    return Flow("loop", initial=solve, transitions=rules, max_transitions=12)


def test_without_the_guard_a_looping_model_burns_the_budget():
    sent: list[str | None] = []
    r = run(
        loop_flow(LLM(), sent, fallback=False),
        "T",
        models=scripted(),
        scripts={"fake": ScriptedLLM([LOOP], cycle=True)},
    )
    assert r.stop_reason == "max_transitions"
    assert sent.count("SELECT pet_type FROM pets") >= 4


def test_the_guard_reasks_with_the_repeated_action_and_its_observation_and_the_outcome_changes():
    llm = ScriptedLLM([LOOP, LOOP, FIXED])
    guard = RepeatGuard(parse, temperatures=(0.7, 1.0))
    sent: list[str | None] = []
    r = run(loop_flow(LLM(guard=guard), sent, fallback=True), "T", models=scripted(), scripts={"fake": llm})
    assert sent == ["SELECT pet_type FROM pets", "SELECT PetType FROM pets"]
    assert r.stop_reason == "final"
    reask = llm.requests[2]
    note = reask.messages[-1]["content"]
    assert "SELECT pet_type FROM pets" in note and "Unknown column 'pet_type'" in note
    assert reask.params["temperature"] == 0.7
    repeats = [s for s in r.steps if s.output.endswith("[repeat]")]
    assert len(repeats) == 1 and repeats[0].usage is not None
    assert r.usage().calls == 3  # the discarded reply is paid for and counted


def test_a_model_that_keeps_repeating_is_routed_to_the_fallback_and_never_sends_it_a_third_time():
    llm = ScriptedLLM([LOOP], cycle=True)
    guard = RepeatGuard(parse, temperatures=(0.7, 1.0))
    sent: list[str | None] = []
    r = run(loop_flow(LLM(guard=guard), sent, fallback=True), "T", models=scripted(), scripts={"fake": llm})
    assert sent == ["SELECT pet_type FROM pets"]
    assert [s.state for s in r.steps if s.output == "tool[submit]"] == ["Submit"]
    temps = [q.params.get("temperature") for q in llm.requests]
    assert temps[-2:] == [0.7, 1.0]
    seeds = [q.params.get("seed") for q in llm.requests[-2:]]
    assert len(set(seeds)) == 2
    last_llm = [s for s in r.steps if s.output == "llm"][-1]
    assert last_llm.detail["repeat_guard"] == {"reasks": 2, "still_repeats": True}
    assert repeated_action(parse)(SimpleNamespace(history=r.history))


def test_replies_without_an_action_are_never_repeats():
    guard = RepeatGuard(parse)
    cond = repeated_action(parse)
    sent: list[str | None] = []
    r = run(
        loop_flow(LLM(guard=guard), sent, fallback=True),
        "T",
        models=scripted(),
        scripts={"fake": ScriptedLLM(["no action here", FIXED])},
    )
    assert sent == [None, "SELECT PetType FROM pets"]
    assert not any(s.output.endswith("[repeat]") for s in r.steps)
    assert not cond(SimpleNamespace(history=r.history))

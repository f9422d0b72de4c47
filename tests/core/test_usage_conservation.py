"""Usage that always adds up ([core] part 6): what the model server billed equals what the run reports.

For every flow of the matrix (each output kind, subflow and parallel nesting, each outcome:
success, tool error, a typed reply re-asked then failed, a branch failure, a merge failure, a
model error, pause and resume) and both views, the fake server's own count of answered requests
and tokens equals ``result.usage()`` and the sum of ``usage_by_state()``; a run that fails names
its state (and its branch). Regressions: a typed state failing twice recorded both steps without
usage; a subflow branch of ``Parallel`` was counted twice; a raising merge escaped as a bare
``KeyError`` naming no state.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass

import pytest
from pydantic import BaseModel, Field
from stateflow.sf_agent import SFAgentView

from stateflow import (
    LLM,
    BranchResult,
    Flow,
    Human,
    Judge,
    MemoryCheckpointer,
    ModelProfile,
    Parallel,
    Prompt,
    State,
    Tool,
    ToolResult,
    Transition,
    resume,
    run,
)
from stateflow.testing.fake_openai import FakeOpenAIServer
from stateflow.trace import RunResult, UsageTotals
from stateflow.views import StateFlowView


class Score(BaseModel):
    value: int = Field(ge=0, le=10)


def _reply(model: str, messages: list[dict], body: dict) -> str:
    """Valid JSON for a typed request, unless the prompt asks for a bad one; words otherwise."""
    if "response_format" in body:
        return "not json" if "BAD" in json.dumps(messages) else json.dumps({"value": 3})
    return f"reply to {len(messages)} messages"


def _joined(ctx, results: list[BranchResult]) -> str:
    return " | ".join(f"{r.name}={r.content}" for r in results)


def _broken_merge(ctx, results: list[BranchResult]) -> str:
    return {r.name: r.content for r in results}["missing"]


def _raising_tool(ctx) -> ToolResult:
    raise OSError("disk gone")


def _two_states(first: State) -> Flow:
    done = State("Done", final=True)
    return Flow("f", initial=first, transitions=[Transition(first, done)])


def _inner(bad: bool = False) -> Flow:
    a = State("InA", Prompt("BAD: give JSON" if bad else "first"), LLM(schema=Score) if bad else LLM())
    b = State("InB", Prompt("second"), LLM())
    end = State("InEnd", final=True)
    return Flow("inner", initial=a, transitions=[Transition(a, b), Transition(b, end)])


@dataclass(frozen=True)
class Case:
    name: str
    flow: Callable[[], Flow]
    fails_in: str | None = None  # the state the error names (None: the run succeeds)
    names: tuple[str, ...] = ()  # further words the error must hold (a branch, a merge)
    failures: tuple[int, ...] = ()  # HTTP errors the model server answers first


CASES = [
    Case("prompt and LLM", lambda: _two_states(State("Ask", Prompt("hi"), LLM()))),
    Case("two LLM calls in one state", lambda: _two_states(State("Ask", Prompt("hi"), LLM(), Prompt("again"), LLM()))),
    Case("typed LLM", lambda: _two_states(State("Typed", Prompt("give JSON"), LLM(schema=Score)))),
    Case(
        "typed LLM re-asked then failed",
        lambda: _two_states(State("Typed", Prompt("BAD: give JSON"), LLM(schema=Score))),
        fails_in="Typed",
    ),
    Case(
        "tool error after a call",
        lambda: _two_states(State("Act", Prompt("hi"), LLM(), Tool(_raising_tool, "disk"))),
        fails_in="Act",
        names=("disk",),
    ),
    Case(
        "parallel LLM branches",
        lambda: _two_states(State("Fan", Prompt("hi"), Parallel(LLM(), LLM(schema=Score), merge=_joined))),
    ),
    Case(
        "parallel with a subflow branch",
        lambda: _two_states(State("Fan", Prompt("hi"), Parallel(_inner(), LLM(), merge=_joined))),
    ),
    Case(
        "parallel typed branch fails",
        lambda: _two_states(State("Fan", Prompt("BAD: give JSON"), Parallel(LLM(), LLM(schema=Score), merge=_joined))),
        fails_in="Fan",
    ),
    Case(
        "parallel subflow branch fails",
        lambda: _two_states(State("Fan", Prompt("hi"), Parallel(_inner(bad=True), LLM(), merge=_joined))),
        fails_in="Fan",
        names=("inner",),
    ),
    Case(
        "parallel merge fails",
        lambda: _two_states(State("Fan", Prompt("hi"), Parallel(LLM(), LLM(), merge=_broken_merge))),
        fails_in="Fan",
        names=("_broken_merge", "KeyError"),
    ),
    Case("model error", lambda: _two_states(State("Ask", Prompt("hi"), LLM())), fails_in="Ask", failures=(400,)),
]


def _judged() -> Flow:
    ask = State("Ask", Prompt("hi"), LLM())
    yes, no = State("Yes", final=True), State("No", final=True)
    judge = Judge("Is the reply about messages? Answer yes or no.", choices=("yes", "no"), name="about")
    rules = [Transition(ask, yes, when=judge.answer_is("yes")), Transition(ask, no)]
    return Flow("judged", initial=ask, transitions=rules)


CASES.append(Case("LLM-judged transition", _judged))

VIEWS = {"stateflow": StateFlowView, "sf_agent": SFAgentView}


def _totals(result: RunResult) -> tuple[int, int, int]:
    whole = result.usage()
    return whole.calls, whole.prompt_tokens, whole.completion_tokens


def _sum_by_state(result: RunResult) -> tuple[int, int, int]:
    total = UsageTotals()
    for u in result.usage_by_state().values():
        total.calls += u.calls
        total.prompt_tokens += u.prompt_tokens
        total.completion_tokens += u.completion_tokens
    return total.calls, total.prompt_tokens, total.completion_tokens


def _billed(srv: FakeOpenAIServer) -> tuple[int, int, int]:
    return len(srv.billed), sum(p for p, _ in srv.billed), sum(c for _, c in srv.billed)


def _profile(url: str) -> ModelProfile:
    return ModelProfile(name="fake", model="m", base_url=url, api_key_env=None, max_retries=0)


@pytest.mark.parametrize("view", list(VIEWS))
@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_usage_adds_up(case: Case, view: str) -> None:
    with FakeOpenAIServer(_reply, failures=list(case.failures)) as srv:
        result = run(
            case.flow(), "task", models=_profile(srv.url), view=VIEWS[view](), telemetry=False, raise_errors=False
        )
        billed = _billed(srv)
    assert billed[0] > 0 or case.failures, "the case made no model call: it tests nothing"
    assert _totals(result) == billed, f"reported {result.usage().to_dict()} vs billed {billed}"
    assert _sum_by_state(result) == billed
    if case.fails_in is None:
        assert result.error is None, result.error
        return
    assert result.error is not None and result.exit_state == case.fails_in
    assert f"'{case.fails_in}'" in result.error, result.error
    for word in case.names:
        assert word in result.error, result.error


@pytest.mark.parametrize("view", list(VIEWS))
def test_usage_adds_up_across_a_pause_and_its_resume(view: str) -> None:
    draft = State("Draft", Prompt("draft"), LLM())
    ask = State("Approve", Human(prompt="ok?", defer=True, name="editor"))
    final = State("Final", Prompt("finish"), LLM(schema=Score))
    done = State("Done", final=True)
    flow = Flow(
        "paused",
        initial=draft,
        transitions=[Transition(draft, ask), Transition(ask, final), Transition(final, done)],
    )
    store = MemoryCheckpointer()
    with FakeOpenAIServer(_reply) as srv:
        models = _profile(srv.url)
        paused = run(flow, "t", models=models, view=VIEWS[view](), thread_id="p", checkpointer=store, telemetry=False)
        assert paused.status == "paused" and _totals(paused) == _billed(srv)
        done_ = resume("p", "yes", checkpointer=store, flow=flow, models=models, view=VIEWS[view](), telemetry=False)
        billed = _billed(srv)
    assert billed[0] == 2
    assert _totals(done_) == billed and _sum_by_state(done_) == billed  # the resumed result holds the whole run

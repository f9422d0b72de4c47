"""Subflows: a Flow as a state's output function (issue 45, part 1)."""

from __future__ import annotations

import shutil
import subprocess

import pytest
from stateflow.sf_agent import SFAgentView

from stateflow import (
    ANY,
    LLM,
    Flow,
    FlowDefinitionError,
    Prompt,
    SQLiteCheckpointer,
    State,
    Tool,
    ToolResult,
    Transition,
    last_contains,
    meta_is,
    resume,
    run,
)
from stateflow.backends.scripted import ScriptedLLM
from stateflow.fingerprint import flow_fingerprint
from stateflow.graph import to_dot, to_mermaid
from stateflow.subflow import expand_subflows
from tests.core.helpers import scripted


def _checked(ctx) -> ToolResult:
    n = ctx.vars.get("checks", 0) + 1
    ctx.vars["checks"] = n
    return ToolResult(f"check {n}", {"done": n >= 2})


def _review(check_fn=_checked) -> Flow:
    draft = State("Draft", Prompt("DRAFT"), LLM())
    check = State("Check", Tool(check_fn, "check"))
    ok = State("Ok", final=True)
    return Flow(
        "review",
        initial=draft,
        transitions=[Transition(check, ok, when=meta_is("done")), Transition(draft, check), Transition(check, draft)],
    )


def _outer(inner: Flow) -> Flow:
    plan = State("Plan", Prompt("PLAN"), LLM())
    work = State("Work", Prompt("BEFORE"), inner, Tool(lambda ctx: "after", "after"))
    end = State("End", final=True)
    return Flow("outer", initial=plan, transitions=[Transition(plan, work), Transition(work, end)])


def _model(replies=("x",)):
    return scripted(), {"fake": ScriptedLLM(list(replies), cycle=True)}


def test_inner_states_run_inside_the_parent_state_under_dotted_names():
    profile, scripts = _model()
    r = run(_outer(_review()), "T", models=profile, scripts=scripts, telemetry=False)
    assert r.stop_reason == "final"
    assert r.path == ["Plan", "Work", "Work.Draft", "Work.Check", "Work.Draft", "Work.Check", "Work.Ok", "End"]
    # outputs before the subflow run on entry, outputs after it when the subflow ends
    steps = [(s.state, s.output) for s in r.steps]
    assert steps[2] == ("Work", "prompt") and steps[-1] == ("Work.Ok", "tool[after]")
    assert set(r.usage_by_state()) == {"Plan", "Work.Draft"}
    assert r.usage_by_state()["Work.Draft"].calls == 2


def test_parent_any_rules_do_not_fire_inside_a_subflow_and_inner_any_rules_stay_inside():
    # The parent's ANY rule would end the run at the first reply containing STOP; inside the
    # subflow only the subflow's rules decide, so the run leaves through the subflow's exit.
    draft = State("Draft", Prompt("DRAFT"), LLM())
    done = State("Done", final=True)
    inner = Flow("inner", initial=draft, transitions=[Transition(ANY, done)])
    plan, work = State("Plan", Prompt("PLAN"), LLM()), State("Work", inner)
    end, stopped = State("End", final=True), State("Stopped", final=True)
    outer = Flow(
        "outer",
        initial=plan,
        transitions=[
            Transition(ANY, stopped, when=last_contains("STOP")),
            Transition(plan, work),
            Transition(work, end),
        ],
    )
    profile, scripts = _model(["go", "STOP"])
    r = run(outer, "T", models=profile, scripts=scripts, telemetry=False)
    # Work.Draft replied STOP: no parent rule applies there; at the exit Work.Done the parent's
    # ANY rule (first in priority) sees the last message and fires.
    assert r.path == ["Plan", "Work", "Work.Draft", "Work.Done", "Stopped"]
    flat = expand_subflows(outer)
    assert [str(t) for t in flat.rules_from("Work.Draft")] == ["Work.Draft -> Work.Done [always]"]
    assert next(str(t) for t in flat.rules_from("Plan")).startswith("Plan|Work.Done -> Stopped")


def test_nested_subflows_expand_to_three_part_names():
    deepest = _review()
    mid_state = State("Mid", deepest)
    mid_end = State("MidEnd", final=True)
    middle = Flow("middle", initial=mid_state, transitions=[Transition(mid_state, mid_end)])
    top = State("Top", middle)
    end = State("End", final=True)
    outer = Flow("outer", initial=top, transitions=[Transition(top, end)])
    profile, scripts = _model()
    r = run(outer, "T", models=profile, scripts=scripts, telemetry=False)
    assert r.path[:4] == ["Top", "Top.Mid", "Top.Mid.Draft", "Top.Mid.Check"]
    assert r.path[-2:] == ["Top.MidEnd", "End"]


def test_a_state_takes_at_most_one_subflow():
    with pytest.raises(FlowDefinitionError, match="at most one subflow"):
        State("Two", _review(), _review())


def test_mermaid_draws_a_subgraph_and_dot_a_cluster():
    outer = _outer(_review())
    assert to_mermaid(outer) == (
        "flowchart TD\n"
        "    start(( )) --> s_Plan\n"
        '    s_Plan["Plan<br/><small>prompt → llm</small>"]\n'
        '    subgraph s_Work["Work<br/><small>prompt → flow[review] → after</small>"]\n'
        "        direction TB\n"
        "        s_Work___start(( )) --> s_Work_Draft\n"
        '        s_Work_Draft["Work.Draft<br/><small>prompt → llm</small>"]\n'
        '        s_Work_Check["Work.Check<br/><small>check</small>"]\n'
        '        s_Work_Ok(["Work.Ok"])\n'
        '        s_Work_Draft -->|"1. always"| s_Work_Check\n'
        '        s_Work_Check -->|"1. tool.done == True"| s_Work_Ok\n'
        '        s_Work_Check -->|"2. always"| s_Work_Draft\n'
        "    end\n"
        '    s_End(["End"])\n'
        '    s_Plan -->|"1. always"| s_Work\n'
        '    s_Work -->|"1. always"| s_End\n'
    )
    dot = to_dot(outer)
    assert 'subgraph "cluster_Work" {' in dot
    assert '"Work.Check" -> "Work.Ok" [label="1. tool.done == True"];' in dot
    if shutil.which("dot") is not None:  # Graphviz parses the nested clusters
        proc = subprocess.run(["dot", "-Tsvg"], input=dot, text=True, capture_output=True, timeout=60)
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout.count('class="cluster"') == 1


def test_the_fingerprint_holds_the_subflow_and_changes_with_it():
    a, b = _outer(_review()), _outer(_review())
    assert flow_fingerprint(a) == flow_fingerprint(b)
    draft = State("Draft", Prompt("OTHER DRAFT"), LLM())
    check, ok = State("Check", Tool(_checked, "check")), State("Ok", final=True)
    changed = Flow(
        "review",
        initial=draft,
        transitions=[Transition(check, ok, when=meta_is("done")), Transition(draft, check), Transition(check, draft)],
    )
    assert flow_fingerprint(_outer(changed)) != flow_fingerprint(a)


def test_the_sf_agent_view_gives_inner_states_their_own_agents():
    seen: list[str] = []

    def reply(messages, params):
        seen.append(str(messages[0].get("content", "")))
        return "x"

    r = run(
        _outer(_review()),
        "T",
        models=scripted(),
        scripts={"fake": ScriptedLLM(reply)},
        view=SFAgentView(),
        telemetry=False,
    )
    assert r.stop_reason == "final"
    assert any("DRAFT" in s for s in seen) and any("PLAN" in s for s in seen)


def test_a_run_resumes_in_the_middle_of_a_subflow(tmp_path):
    failures = {"left": 1}

    def flaky_check(ctx) -> ToolResult:
        if ctx.vars.get("checks", 0) == 1 and failures["left"]:
            failures["left"] -= 1
            raise RuntimeError("the checker went away")
        return _checked(ctx)

    outer = _outer(_review(flaky_check))
    calls: list[int] = []

    def reply(messages, params):
        calls.append(len(messages))
        return "x"

    cp = SQLiteCheckpointer(tmp_path / "runs.db")
    models, scripts = scripted(), {"fake": ScriptedLLM(reply)}
    failed = run(outer, "T", models=models, scripts=scripts, checkpointer=cp, thread_id="t", raise_errors=False)
    assert failed.stop_reason == "error" and "checker went away" in (failed.error or "")
    assert failed.exit_state == "Work.Check"
    latest = cp.latest("t")
    assert latest is not None and latest.state == "Work.Check"
    assert len(calls) == 3  # Plan, Work.Draft, Work.Draft again after the first check
    done = resume("t", checkpointer=cp, flow=outer, models=models, scripts=scripts, telemetry=False)
    assert done.stop_reason == "final"
    assert done.path == ["Plan", "Work", "Work.Draft", "Work.Check", "Work.Draft", "Work.Check", "Work.Ok", "End"]
    assert len(calls) == 3  # the resumed run re-ran the failed Work.Check only: no model call twice
    assert [s.state for s in done.steps].count("Work.Check") == 2


def test_streamed_events_name_a_subflows_inner_states_as_the_trace_does():
    from stateflow import ModelProfile
    from stateflow.events import StateEntered, StepRecorded, TokenDelta, ToolReturned, TransitionTaken
    from stateflow.live import stream
    from stateflow.testing.fake_openai import FakeOpenAIServer

    # a real HTTP model (the fake server streams server-sent events), so token deltas come too
    with FakeOpenAIServer(lambda model, messages, body: "a short draft") as srv:
        profile = ModelProfile(name="p", model="m", base_url=srv.url, api_key_env=None)
        events = list(stream(_outer(_review()), "T", models=profile))
    result = events[-1].result
    entered = [e.state for e in events if isinstance(e, StateEntered)]
    assert entered == result.path  # Plan, Work, Work.Draft, Work.Check, ..., Work.Ok, End
    assert "Work.Draft" in entered and "Work.Check" in entered
    moves = [(e.record.source, e.record.target) for e in events if isinstance(e, TransitionTaken)]
    assert moves == [(t.source, t.target) for t in result.transitions]
    assert ("Work", "Work.Draft") in moves and ("Work.Ok", "End") in moves
    # every step event carries its inner state, and the tokens of the inner LLM are attributed to it
    stepped = [e.step for e in events if isinstance(e, StepRecorded | ToolReturned)]
    assert [(s.state, s.output) for s in stepped] == [(s.state, s.output) for s in result.steps]
    assert ("Work.Check", "tool[check]") in [(s.state, s.output) for s in stepped]
    token_states = {e.state for e in events if isinstance(e, TokenDelta)}
    assert token_states == {"Plan", "Work.Draft"}

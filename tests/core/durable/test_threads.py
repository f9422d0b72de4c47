"""Durable runs: a checkpoint at every transition; continue, pause, resume and fork a thread."""

from __future__ import annotations

import threading

import pytest
from stateflow.sf_agent import SFAgentView

from stateflow import LLM, Flow, Kind, State, Transition
from stateflow.errors import CheckpointError, CheckpointMismatch, ConfigError, ThreadBusy, ThreadNotFound
from stateflow.runtime import fork, resume, run
from stateflow.threads import history
from tests.core.durable.flows import edit, fake_profile, long_flow, request_key

VIEWS = {"stateflow": lambda: None, "sf_agent": SFAgentView}
PATH = ["Draft", "Edit", "Review", "Edit", "Review", "Edit", "Review", "Polish", "Done"]


def _said(result) -> list[tuple[str, str, str, str]]:
    """The history without timings: who said what, in which state, of which kind."""
    return [(m.name, m.state, m.kind.value, m.content) for m in result.history]


def _keys(server, since: int = 0) -> list[str]:
    return [request_key(body) for body in server.requests[since:]]


@pytest.mark.parametrize("view", VIEWS)
def test_a_checkpointed_run_is_the_same_run_with_one_checkpoint_per_transition(server, checkpointer, view) -> None:
    model = fake_profile(server.url)
    plain = run(long_flow(server.url), "T", models=model, view=VIEWS[view](), telemetry=False)
    calls = len(server.requests)
    saved = run(
        long_flow(server.url),
        "T",
        models=model,
        view=VIEWS[view](),
        telemetry=False,
        checkpointer=checkpointer,
        thread_id="t",
    )
    assert saved.path == plain.path == PATH
    assert _said(saved) == _said(plain)
    assert _keys(server, calls) == _keys(server)[:calls]  # the same calls, in the same order
    assert saved.status == "finished" and saved.thread_id == "t"
    steps = history("t", checkpointer=checkpointer)
    # entering each of the 9 states, then the end
    assert [s.state for s in steps] == [*PATH, "Done"]
    assert [s.status for s in steps] == ["running"] * len(PATH) + ["finished"]
    assert steps[-1].prompt_tokens == saved.usage().prompt_tokens > steps[3].prompt_tokens > 0


def _failing_once(failures: list[int], at: int):
    """The edit tool, failing the first time it makes edit number ``at``."""

    def flaky(ctx):
        if ctx.vars.get("edits", 0) + 1 == at and not failures:
            failures.append(at)
            raise RuntimeError("disk full")
        return edit(ctx)

    flaky.__qualname__ = flaky.__name__ = "edit"  # the same fingerprint as the flow that resumes it
    flaky.__module__ = edit.__module__
    return flaky


@pytest.mark.parametrize("view", VIEWS)
def test_a_failed_run_continues_from_its_last_checkpoint_and_never_repeats_a_finished_call(
    server, checkpointer, view
) -> None:
    model = fake_profile(server.url)
    plain = run(long_flow(server.url), "T", models=model, view=VIEWS[view](), telemetry=False)
    reference = _keys(server)
    start = len(server.requests)
    flow = long_flow(server.url, tool=_failing_once([], at=2))
    failed = run(
        flow,
        "T",
        models=model,
        view=VIEWS[view](),
        telemetry=False,
        checkpointer=checkpointer,
        thread_id="t",
        raise_errors=False,
    )
    assert failed.status == "failed" and "disk full" in failed.error
    before = _keys(server, start)
    last = history("t", checkpointer=checkpointer)
    assert last[-1].status == "failed" and last[-1].state == "Edit"  # the position to continue from
    done = resume("t", checkpointer=checkpointer, flow=flow, models=model, view=VIEWS[view](), telemetry=False)
    assert done.path == plain.path and _said(done) == _said(plain)
    after = _keys(server, start + len(before))
    # only the failed state's own call is asked again; nothing before its checkpoint
    assert before + after[1:] == reference and after[0] == before[-1]


@pytest.mark.parametrize("view", VIEWS)
def test_a_deferred_question_pauses_the_run_and_an_answer_resumes_it(server, checkpointer, view) -> None:
    model = fake_profile(server.url)
    flow = long_flow(server.url, defer=True)
    paused = run(flow, "T", models=model, view=VIEWS[view](), telemetry=False, checkpointer=checkpointer, thread_id="t")
    assert paused.status == "paused" and paused.stop_reason == "paused"
    assert paused.pending.state == "Approve" and paused.pending.question.endswith("Approve the text?")
    calls = len(server.requests)
    # another process would rebuild everything: fresh flow and view objects, nothing shared in memory
    done = resume(
        "t",
        "approved",
        checkpointer=checkpointer,
        flow=long_flow(server.url, defer=True),
        models=model,
        view=VIEWS[view](),
        telemetry=False,
    )
    assert len(server.requests) == calls  # the answer needs no model call here
    assert done.status == "finished" and done.path == [*PATH[:-1], "Approve", "Done"]
    answer = done.history.last(Kind.HUMAN)
    assert (answer.name, answer.state, answer.content) == ("editor", "Approve", "approved")
    assert [s.status for s in history("t", checkpointer=checkpointer)][-3:] == ["paused", "running", "finished"]


def test_a_fork_reuses_the_prefix_and_continues_with_another_model(server, checkpointer) -> None:
    model = fake_profile(server.url)
    run(long_flow(server.url), "T", models=model, telemetry=False, checkpointer=checkpointer, thread_id="t")
    steps = history("t", checkpointer=checkpointer)
    at = next(s.step for s in steps if s.state == "Review")  # the first Review
    before = len(server.requests)
    other = fake_profile(server.url, name="other", model="other-model")
    branch = fork(
        "t",
        at,
        checkpointer=checkpointer,
        flow=long_flow(server.url),
        models={"default": model, "Review": other},
        new_thread_id="t-other",
        telemetry=False,
    )
    asked = [b["model"] for b in server.requests[before:]]
    assert asked[0] == "other-model"  # the first call is the forked state's: nothing before it again
    assert "other-model" in asked and asked.count("fake-model") < 10
    source = checkpointer.get("t", at).payload["history"]
    assert _said(branch)[: len(source)] == [(m["name"], m["state"], m["kind"], m["content"]) for m in source]
    assert branch.path[:3] == PATH[:3] and branch.status == "finished"
    reviews = [m for m in branch.history if m.state == "Review" and m.kind is Kind.LLM]
    assert reviews and all(m.content.startswith("other-model") for m in reviews)
    assert checkpointer.get("t-other", 0).parent == ("t", at)


def test_continuing_a_thread_is_refused_clearly_when_it_cannot_continue(server, checkpointer) -> None:
    model = fake_profile(server.url)
    run(long_flow(server.url), "T", models=model, telemetry=False, checkpointer=checkpointer, thread_id="done")
    with pytest.raises(CheckpointError, match=r"thread 'done' has finished.*fork"):
        run(long_flow(server.url), "T", models=model, telemetry=False, checkpointer=checkpointer, thread_id="done")
    with pytest.raises(ThreadNotFound, match="no thread 'nope'"):
        resume("nope", checkpointer=checkpointer, flow=long_flow(server.url), models=model)
    paused = long_flow(server.url, defer=True)
    run(paused, "T", models=model, telemetry=False, checkpointer=checkpointer, thread_id="p")
    with pytest.raises(CheckpointError, match=r"paused in state 'Approve'.*resume"):
        resume("p", checkpointer=checkpointer, flow=paused, models=model)
    flaky = long_flow(server.url, tool=_failing_once([], at=1))
    run(flaky, "T", models=model, telemetry=False, checkpointer=checkpointer, thread_id="f", raise_errors=False)
    with pytest.raises(CheckpointError, match="'f' is failed, not waiting for an answer"):
        resume("f", "yes", checkpointer=checkpointer, flow=flaky, models=model)
    ask = State("Ask", LLM())
    other = Flow("other", initial=ask, transitions=[Transition(ask, State("End", final=True))])
    with pytest.raises(CheckpointMismatch, match=r"saved by flow 'durable-demo'.*not by this flow 'other'"):
        resume("p", "yes", checkpointer=checkpointer, flow=other, models=model)
    with pytest.raises(ConfigError, match="runs task 'T', not 'U'"):
        run(flaky, "U", models=model, telemetry=False, checkpointer=checkpointer, thread_id="f")


def test_two_continuations_of_one_thread_cannot_run_at_once(server, checkpointer) -> None:
    model = fake_profile(server.url)
    flow = long_flow(server.url, defer=True)
    run(flow, "T", models=model, telemetry=False, checkpointer=checkpointer, thread_id="p")
    with checkpointer.claim("p", "someone-else"), pytest.raises(ThreadBusy):
        resume("p", "yes", checkpointer=checkpointer, flow=flow, models=model, telemetry=False)
    assert history("p", checkpointer=checkpointer)[-1].status == "paused"  # nothing was written


def test_a_deferred_question_without_a_checkpointer_fails_before_any_call(server) -> None:
    with pytest.raises(ConfigError, match=r"deferred question.*checkpointer="):
        run(long_flow(server.url, defer=True), "T", models=fake_profile(server.url))
    assert server.requests == []
    with pytest.raises(ConfigError, match="needs a checkpointer"):
        run(long_flow(server.url), "T", models=fake_profile(server.url), thread_id="t")


def test_vars_that_a_checkpoint_cannot_save_are_named(server, checkpointer) -> None:
    with pytest.raises(ConfigError, match=r"vars\['lock'\] cannot be saved"):
        run(
            long_flow(server.url),
            "T",
            models=fake_profile(server.url),
            checkpointer=checkpointer,
            vars={"lock": threading.Lock()},
            telemetry=False,
        )


@pytest.mark.parametrize("view", VIEWS)
def test_a_run_continued_from_any_of_its_checkpoints_sends_exactly_the_remaining_calls(server, view) -> None:
    # what a crash right after each checkpoint leaves: that checkpoint and the ones before it
    from stateflow.checkpoint import MemoryCheckpointer

    model = fake_profile(server.url)
    full = MemoryCheckpointer()
    reference = run(
        long_flow(server.url), "T", models=model, view=VIEWS[view](), telemetry=False, checkpointer=full, thread_id="t"
    )
    calls = [request_key(b) for b in server.requests]
    saved = full.list("t")
    for cut in range(len(saved) - 1):  # the last one is the finished run
        crashed = MemoryCheckpointer()
        for checkpoint in saved[: cut + 1]:
            crashed.put(checkpoint)
        before = len(server.requests)
        done = run(
            long_flow(server.url),
            "T",
            models=model,
            view=VIEWS[view](),
            telemetry=False,
            checkpointer=crashed,
            thread_id="t",
        )
        resent = [request_key(b) for b in server.requests[before:]]
        assert _said(done) == _said(reference), cut
        done_before = sum(1 for s in saved[cut].payload["steps"] if s["usage"] is not None)
        assert resent == calls[done_before:], f"continued from step {cut} ({saved[cut].state})"


def test_a_fork_onto_another_flow_definition_is_allowed_and_one_without_the_state_is_refused(
    server, checkpointer
) -> None:
    # continuing a thread under another definition is refused (CheckpointMismatch, above); a fork
    # names its flow explicitly, so it may change the definition, as long as the state exists there
    model = fake_profile(server.url)
    run(long_flow(server.url), "T", models=model, telemetry=False, checkpointer=checkpointer, thread_id="src")
    at = next(s.step for s in history("src", checkpointer=checkpointer) if s.state == "Review")
    source_fingerprint = checkpointer.get("src", at).flow_fingerprint
    flow = long_flow(server.url)
    stricter = flow.variant(
        "durable-demo-strict", replace=[flow.states["Review"].with_instruction("Review it strictly.")]
    )
    before = len(server.requests)
    branch = fork(
        "src", at, checkpointer=checkpointer, flow=stricter, models=model, new_thread_id="strict", telemetry=False
    )
    assert branch.status == "finished" and branch.path[-1] == "Done"
    first = checkpointer.get("strict", 0)
    assert first.parent == ("src", at) and first.flow_name == "durable-demo-strict"
    assert first.flow_fingerprint != source_fingerprint
    # the new definition's instruction reaches the model from the fork point on
    asked = server.requests[before:]
    assert any("Review it strictly." in str(m.get("content")) for body in asked for m in body["messages"])
    ask = State("Ask", LLM())
    other = Flow("other", initial=ask, transitions=[Transition(ask, State("End", final=True))])
    with pytest.raises(ConfigError, match=r"state 'Review', which flow 'other' does not have.*Ask, End"):
        fork("src", at, checkpointer=checkpointer, flow=other, models=model, new_thread_id="nowhere", telemetry=False)
    assert checkpointer.threads() and "nowhere" not in {t.thread_id for t in checkpointer.threads()}

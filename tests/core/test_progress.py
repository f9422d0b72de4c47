"""Issue 57 item 19: a run's long waits show progress where a person is watching (a terminal on
standard error), nothing otherwise, and the result is the same either way."""

from __future__ import annotations

import io
import sys

import pytest

from stateflow import LLM, Flow, Prompt, State, Transition, last_contains, run
from stateflow.backends.local.pool import LocalServerPool
from stateflow.backends.scripted import ScriptedLLM
from tests.core.helpers import scripted


class Terminal(io.StringIO):
    """Standard error as a terminal: what a person running a script sees."""

    def isatty(self) -> bool:
        return True


def _flow() -> Flow:
    draft = State("Draft", Prompt("Write a function."), LLM())
    review = State("Review", Prompt("Reply APPROVED if correct."), LLM())
    done = State("Done", final=True)
    return Flow(
        "draft-review",
        initial=draft,
        max_transitions=4,
        transitions=[
            Transition(draft, review),
            Transition(review, done, when=last_contains("APPROVED")),
            Transition(review, review),
        ],
    )


def _run(**kw):
    replies = ScriptedLLM(["def rev(s): return s[::-1]", "APPROVED"])
    return run(_flow(), "Task: reverse", models=scripted(), scripts={"fake": replies}, **kw)


def _shape(result) -> tuple:
    return (
        result.path,
        result.stop_reason,
        [(m.state, m.kind.value, m.content) for m in result.history],
        [(s.state, s.output, s.usage.completion_tokens if s.usage else None) for s in result.steps],
        [t.to_dict() for t in result.transitions],
    )


@pytest.fixture
def no_setting(monkeypatch):
    monkeypatch.delenv("STATEFLOW_PROGRESS", raising=False)


def test_a_run_at_a_terminal_shows_each_state_and_reply_and_its_result_is_unchanged(monkeypatch, no_setting):
    quiet = _run()
    tty = Terminal()
    monkeypatch.setattr(sys, "stderr", tty)
    shown = _run()
    lines = tty.getvalue().splitlines()
    assert lines[0] == "stateflow: draft-review: now in Draft (0.0 s so far)"
    assert any(line.startswith("stateflow: draft-review: Draft replied (") for line in lines)
    assert any(line.startswith("stateflow: draft-review: now in Review (") for line in lines)
    assert lines[-1].startswith("stateflow: draft-review: finished in Done after 3 states, ")
    assert _shape(shown) == _shape(quiet)


def test_no_progress_when_not_at_a_terminal_or_turned_off(monkeypatch, no_setting):
    pipe = io.StringIO()  # a log file, CI, a pipe
    monkeypatch.setattr(sys, "stderr", pipe)
    _run()
    assert pipe.getvalue() == ""
    tty = Terminal()
    monkeypatch.setattr(sys, "stderr", tty)
    _run(progress=False)
    monkeypatch.setenv("STATEFLOW_PROGRESS", "0")
    _run()
    assert tty.getvalue() == ""
    monkeypatch.setenv("STATEFLOW_PROGRESS", "1")  # forced on, even into a pipe
    monkeypatch.setattr(sys, "stderr", pipe)
    _run()
    assert "now in Draft" in pipe.getvalue()


def test_a_run_with_its_own_event_sink_still_gets_every_event(monkeypatch, no_setting):
    monkeypatch.setattr(sys, "stderr", Terminal())
    seen: list[str] = []
    _run(on_event=lambda e: seen.append(e.type))
    assert seen[0] == "run_started" and seen[-1] == "run_finished" and "transition_taken" in seen
    assert "now in Review" in sys.stderr.getvalue()


class SlowServer:
    """A managed server that takes a moment to start (the embedded model loading)."""

    def __init__(self) -> None:
        self.up = False

    def alive(self) -> bool:
        return self.up

    def ensure_running(self) -> str:
        self.up = True
        return "http://127.0.0.1:9/v1"

    def check(self) -> None:
        pass

    def stop(self) -> None:
        self.up = False


def test_the_embedded_model_start_is_announced_once(monkeypatch, no_setting):
    tty = Terminal()
    monkeypatch.setattr(sys, "stderr", tty)
    pool = LocalServerPool()
    pool.attach("local-small", SlowServer())
    assert pool.endpoint("local-small") == "http://127.0.0.1:9/v1"
    assert pool.endpoint("local-small") == "http://127.0.0.1:9/v1"  # running: nothing to say
    lines = tty.getvalue().splitlines()
    assert len(lines) == 2, lines
    assert lines[0].startswith("stateflow: starting the embedded model local-small")
    assert lines[1].startswith("stateflow: embedded model local-small ready after ")


def test_a_resumed_or_forked_thread_shows_progress_too(monkeypatch, no_setting, tmp_path):
    from stateflow.checkpoint import SQLiteCheckpointer
    from stateflow.runtime import fork
    from stateflow.threads import history

    store = SQLiteCheckpointer(tmp_path / "runs.db")
    _run(checkpointer=store, thread_id="t")
    review = next(s.step for s in history("t", checkpointer=store) if s.state == "Review")
    tty = Terminal()
    monkeypatch.setattr(sys, "stderr", tty)
    again = ScriptedLLM(["APPROVED"])
    branch = fork("t", review, checkpointer=store, flow=_flow(), models=scripted(), scripts={"fake": again})
    assert branch.path[-1] == "Done"
    lines = tty.getvalue().splitlines()
    assert lines[0].startswith("stateflow: draft-review: now in Review")
    assert lines[-1].startswith("stateflow: draft-review: finished in Done")

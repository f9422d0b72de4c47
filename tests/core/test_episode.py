"""How a run ends, and what running (not importing) changes globally."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from stateflow import ChatEndedError, Flow, State, Tool, Transition, View, run
from stateflow.backends.scripted import ScriptedLLM
from stateflow.flow import State as StateT
from stateflow.outputs import OutputFunction
from tests.core.helpers import plan_act_flow, scripted


def test_a_model_that_writes_terminate_does_not_end_the_run():
    # Regression: AutoGen's chat manager ended the chat on a message reading exactly
    # "TERMINATE"; the run then reported stop_reason="max_transitions" after one state.
    r = run(
        plan_act_flow(),
        "T",
        models=scripted(),
        scripts={"fake": ScriptedLLM(["TERMINATE"], cycle=True)},
        vars={"limit": 2},
    )
    assert r.stop_reason == "final" and r.path == ["Plan", "Act", "Act", "End"]
    assert [m.content for m in r.history if m.name == "assistant"] == ["TERMINATE"] * 3


def test_a_task_reading_terminate_runs_normally():
    r = run(plan_act_flow(), "TERMINATE", models=scripted(), scripts={"fake": ScriptedLLM(["x"], cycle=True)})
    assert r.stop_reason == "final"


class _NeverDoneView(View):
    """A (broken) view that emits one more output every time it is asked: no state ever ends,
    so only AutoGen's round bound stops the chat."""

    def __init__(self) -> None:
        self.asked = 0

    def emitted_outputs(self, state: StateT) -> tuple[OutputFunction, ...]:
        self.asked += 1
        return state.outputs * self.asked


def _tool_flow() -> Flow:
    work = State("Work", Tool(lambda ctx: "did it", "work"))
    return Flow("tooling", initial=work, transitions=[Transition(work, State("End", final=True))])


def test_a_chat_autogen_ends_on_its_own_is_an_error_naming_what_happened():
    with pytest.raises(ChatEndedError) as exc:
        run(_tool_flow(), "T", view=_NeverDoneView())
    err = exc.value
    assert err.reason is not None and err.reason.startswith("Maximum rounds (")
    assert (err.state, err.agent, err.output, err.transitions) == ("Work", "environment", "tool[work]", 0)
    assert "AutoGen ended the chat in state 'Work'" in str(err) and "Maximum rounds" in str(err)
    assert err.result.history[-1].content == "did it"  # nothing recorded is lost
    r = run(_tool_flow(), "T", view=_NeverDoneView(), raise_errors=False)
    assert r.stop_reason == "error" and r.error.startswith("ChatEndedError: ")


def test_the_transition_bound_is_still_a_normal_end():
    r = run(
        plan_act_flow(max_transitions=3),
        "T",
        models=scripted(),
        scripts={"fake": ScriptedLLM(["x"], cycle=True)},
        vars={"limit": 99},
    )
    assert r.stop_reason == "max_transitions" and r.error is None


_LOGGING_PROBE = textwrap.dedent(
    """
    import logging, importlib
    import autogen  # its own loggers exist before StateFlow is imported

    def snapshot():
        out = {}
        for name in ["", *sorted(logging.root.manager.loggerDict)]:
            lg = logging.getLogger(name)
            if isinstance(lg, logging.Logger):
                out[name] = (lg.level, lg.propagate, lg.disabled, tuple(lg.filters), tuple(lg.handlers))
        return out

    before = snapshot()
    import stateflow
    for mod in ("stateflow.runtime", "stateflow.episode", "stateflow.views", "stateflow.state_agent",
                "stateflow.backends.autogen_clients", "stateflow.backends.endpoint", "stateflow.sf_agent",
                "stateflow.spec", "stateflow.spec.completer"):
        importlib.import_module(mod)
    after = snapshot()
    changed = [n for n in before if before[n] != after.get(n)]
    added = [n for n in after if n not in before and after[n][0] | len(after[n][3]) | len(after[n][4])]
    assert not changed and not added, (changed, added)
    notice = logging.getLogger("autogen.oai.client")
    assert notice.filters == []

    from stateflow import LLM, Flow, ModelProfile, Prompt, State, Transition, run
    from stateflow.backends.scripted import ScriptedLLM
    ask = State("Ask", Prompt("p"), LLM())
    flow = Flow("f", initial=ask, transitions=[Transition(ask, State("End", final=True))])
    prof = ModelProfile(name="s", model="s", provider="scripted", api_key_env=None)
    for _ in range(2):
        run(flow, "T", models=prof, scripts={"s": ScriptedLLM(["ok"])}, telemetry=False)
    assert len(notice.filters) == 1, notice.filters
    def record(msg):
        return logging.LogRecord("autogen.oai.client", logging.INFO, "probe", 1, msg, None, None)
    keep, drop = record("other news"), record("Detected custom model client x")
    assert notice.filter(keep) and not notice.filter(drop)
    assert [n for n in before if before[n] != snapshot().get(n)] == ["autogen.oai.client"]
    print("ok")
    """
)


def test_importing_stateflow_changes_no_logging_config_and_a_run_adds_one_filter():
    proc = subprocess.run([sys.executable, "-c", _LOGGING_PROBE], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0 and proc.stdout.strip().endswith("ok"), proc.stderr[-2000:]


def test_a_state_agent_without_a_system_message_reports_an_empty_one():
    # AutoGen's property indexes the (empty) list; the call log hashes it for every model call
    from stateflow.state_agent import StateAgent

    assert StateAgent("a", "").system_message == ""
    assert StateAgent("b", "Be brief.").system_message == "Be brief."

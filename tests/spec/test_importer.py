"""A spec imported as a StateFlow flow runs end to end on the real runtime (scripted models)."""

from __future__ import annotations

import warnings

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import stateflow
from stateflow import ModelProfile, ToolResult
from stateflow.backends.scripted import ScriptedLLM
from stateflow.spec import SpecError, SpecViolationError, library_spec
from stateflow.spec.grammar import line_grammar
from stateflow.spec.importer import SpecRun, spec_to_flow, task_input
from tests.spec.specs import react_tools

SCRIPTED = ModelProfile(name="scripted-a", model="a", provider="scripted", api_key_env=None)
SCRIPTED_B = ModelProfile(name="scripted-b", model="b", provider="scripted", api_key_env=None)

REACT_TOOLS = react_tools()


def _observations(*texts):
    it = iter(texts)
    return lambda ctx: next(it)


def _run(spec, replies, *, models=None, scripts=None, view=None, **flow_kw):
    sf = spec_to_flow(
        spec, env_inputs={"Question": task_input, "Observation": _observations("Paris.", "Still Paris.")}, **flow_kw
    )
    llm = ScriptedLLM(replies)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # scripted profiles cannot take grammars (monitor-only)
        result = stateflow.run(
            sf.flow,
            "What is the capital of France?",
            models=models or {"*": SCRIPTED},
            scripts=scripts or {"scripted-a": llm},
            view=view,
        )
    return sf, result, llm


def test_react_runs_along_the_automaton_with_a_judge_at_each_choice():
    replies = ["thought", "Search for it.", "search", "capital of France", "final-thought", "It is Paris.", "Paris"]
    sf, result, llm = _run(REACT_TOOLS, replies)
    assert result.stop_reason == "final" and result.exit_state == sf.end_state
    trace = sf.trace(result)
    assert trace == ["Question", "Thought", "Action", "Action-Input", "Observation", "Final-Thought", "Answer"]
    assert REACT_TOOLS.dfa.accepts(trace)
    judges = [s for s in result.steps if s.output.startswith("judge")]
    assert [j.detail["answer"] for j in judges] == ["thought", "final-thought"]  # only where two states were valid
    # LLM states are cued by their text and stop at any other state's text
    action_call = llm.requests[2]
    assert action_call.messages[-1]["content"] == "Action:"
    assert "\nAction Input:" in action_call.params["stop"]


def test_invalid_value_is_retried_never_coerced():
    replies = ["thought", "Search.", "Google", "search", "q", "final-thought", "done", "Paris"]
    sf, result, _ = _run(REACT_TOOLS, replies)
    assert result.stop_reason == "final"
    assert result.board.get(SpecRun).violations == ["Action: 'Google' is not one of ['search', 'finish']"]
    assert result.vars == {}  # the importer keeps its own records off the user's variables
    assert sf.trace(result) == [
        "Question",
        "Thought",
        "Action",
        "Action-Input",
        "Observation",
        "Final-Thought",
        "Answer",
    ]
    actions = [m.content for m in result.history if m.state == "Action" and m.kind.value == "llm"]
    assert actions == ["Google", "search"]


def test_repeated_invalid_values_end_the_run_with_a_spec_violation():
    replies = ["thought", "Search.", "Google", "Bing", "DuckDuckGo"]
    with pytest.raises(SpecViolationError, match="3 invalid entries in a row"):
        _run(REACT_TOOLS, replies)


def test_model_writing_several_steps_keeps_only_its_own_state_content():
    # the scripted backend ignores stop sequences, like a server that drops some
    replies = ["final-thought", "Final Thought: it is Paris\nAnswer: Lyon", "Paris"]
    sf, result, _ = _run(REACT_TOOLS, replies)
    assert sf.trace(result) == ["Question", "Final-Thought", "Answer"]


def test_writing_another_states_step_is_a_violation_and_the_state_is_retried():
    # cued with "Thought:", the model writes an Action line instead (seen with small local models)
    replies = ["thought", "Action: search", "I will search.", "search", "q", "final-thought", "ok", "Paris"]
    sf, result, _ = _run(REACT_TOOLS, replies)
    assert result.board.get(SpecRun).violations == ["Thought: the model wrote the Action step ('Action:') instead"]
    thoughts = [m.content for m in result.history if m.state == "Thought" and m.kind.value == "llm"]
    assert thoughts == ["Action: search", "I will search."]
    assert sf.trace(result) == [
        "Question",
        "Thought",
        "Action",
        "Action-Input",
        "Observation",
        "Final-Thought",
        "Answer",
    ]


def test_unparseable_judge_answer_falls_back_visibly():
    replies = ["I am not sure", "Think.", "search", "q", "final-thought", "done", "Paris"]  # 1st: no option
    sf, result, _ = _run(REACT_TOOLS, replies)
    assert result.stop_reason == "final"
    assert "gave no valid option" in result.board.get(SpecRun).fallbacks[0]
    assert sf.trace(result)[1] == "Thought"


def test_per_state_models_and_sf_agent_view():
    from stateflow.sf_agent import SFAgentView

    a = ScriptedLLM(["thought", "Search.", "search", "q", "final-thought", "done"])
    b = ScriptedLLM(["Paris"])
    sf, result, _ = _run(
        REACT_TOOLS,
        [],
        models={"*": SCRIPTED, "Answer": SCRIPTED_B},
        scripts={"scripted-a": a, "scripted-b": b},
        view=SFAgentView(),
    )
    assert result.stop_reason == "final"
    answer = [s for s in result.steps if s.state == "Answer" and s.usage is not None]
    assert answer and answer[0].usage.profile == "scripted-b"
    assert len(b.requests) == 1
    assert REACT_TOOLS.dfa.accepts(sf.trace(result))


def test_chat_bot_ends_when_the_environment_says_done():
    spec = library_spec("chat-bot")
    turns = iter([ToolResult("hi"), ToolResult("bye", meta={"done": True})])
    sf = spec_to_flow(spec, env_inputs={"User": lambda ctx: next(turns)})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = stateflow.run(
            sf.flow,
            "start",
            models={"*": SCRIPTED},
            scripts={"scripted-a": ScriptedLLM(["Hello!", "chat-bot", "Bye!"])},
        )
    assert result.stop_reason == "final"
    assert sf.trace(result) == ["Chat-Bot", "User", "Chat-Bot", "User"]


def test_handlers_must_cover_env_input_states():
    with pytest.raises(SpecError, match=r"no handler for env-input state\(s\) \['Observation'\]"):
        spec_to_flow(REACT_TOOLS, env_inputs={"Question": task_input})
    with pytest.raises(SpecError, match="not env-input states"):
        spec_to_flow(REACT_TOOLS, env_inputs={"Question": task_input, "Observation": task_input, "Answer": task_input})


def test_llm_states_carry_line_grammars():
    sf = spec_to_flow(REACT_TOOLS, env_inputs={"Question": task_input, "Observation": task_input})
    llm = next(o for o in sf.flow.states["Action"].outputs if isinstance(o, stateflow.LLM))
    assert llm.grammar == line_grammar(REACT_TOOLS, "Action") == 'root ::= "Action:" " " ("search" | "finish")'


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(st.sampled_from(["search", "finish", "Google", "thought", "final-thought", "end", "??", ""]), min_size=1)
)
def test_imported_flow_never_leaves_the_spec_whatever_the_model_says(replies):
    sf = spec_to_flow(
        REACT_TOOLS, env_inputs={"Question": task_input, "Observation": lambda ctx: "obs"}, max_transitions=12
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = stateflow.run(
            sf.flow,
            "q",
            models={"*": SCRIPTED},
            scripts={"scripted-a": ScriptedLLM(replies, cycle=True)},
            raise_errors=False,
        )
    trace = sf.trace(result)
    assert REACT_TOOLS.dfa.accepts_prefix(trace), trace
    if result.stop_reason == "final":
        assert REACT_TOOLS.dfa.accepts(trace)
    else:
        assert result.stop_reason == "max_transitions" or "SpecViolationError" in (result.error or ""), result.error


class _CountingEnv:
    """A stand-in environment with the stateflow.envs.base contract: counts executes, ends on submit."""

    def __init__(self):
        self.actions = []

    def step(self, action):
        self.actions.append(action)
        if action == "submit":
            return "submitted", 1.0, True, {"ok": True}
        return [("row", len(self.actions))], 0.0, False, {}


def test_environment_step_drives_an_environment_and_its_done_ends_the_run():
    from stateflow.spec.importer import environment_step

    spec = library_spec("intercode-react")

    def make_action(latest):
        action = latest["Action"]
        return action[len("execute[") : -1] if action.startswith("execute[") else action

    sf = spec_to_flow(
        spec,
        env_inputs={"Question": task_input, "Observation": environment_step(spec, make_action)},
        ending="environment",
    )
    env = _CountingEnv()
    llm = ScriptedLLM(["Look first.", "execute[SELECT 1]", "Done.", "Action: submit"])  # repeated cue is stripped
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = stateflow.run(sf.flow, "Count rows", models={"*": SCRIPTED}, scripts={"scripted-a": llm}, env=env)
    assert env.actions == ["SELECT 1", "submit"]
    assert result.stop_reason == "final"
    assert sf.trace(result) == ["Question", "Thought", "Action", "Observation", "Thought", "Action", "Observation"]
    assert not [s for s in result.steps if s.output.startswith("judge")]  # no judge: the environment ends it
    last_tool = result.history.last("tool")
    assert last_tool.meta["reward"] == 1.0 and last_tool.meta["done"] is True


def test_environment_ending_where_the_behaviour_cannot_stop_is_an_error():
    done = lambda ctx: ToolResult("over", meta={"done": True})  # noqa: E731
    sf = spec_to_flow(REACT_TOOLS, env_inputs={"Question": task_input, "Observation": done}, ending="environment")
    with warnings.catch_warnings(), pytest.raises(SpecViolationError, match="cannot stop"):
        warnings.simplefilter("ignore")
        stateflow.run(
            sf.flow, "q", models={"*": SCRIPTED}, scripts={"scripted-a": ScriptedLLM(["thought", "t", "search", "i"])}
        )

"""Regression tests for the defects a new user hit in their first hour (issue 48, item 4).

Each test reproduces the defect as the issue describes it and is named after it.
"""

from __future__ import annotations

import pytest

from stateflow import (
    LLM,
    ConditionError,
    ConfigError,
    Flow,
    FlowDefinitionError,
    ModelAssignment,
    Prompt,
    State,
    StateDefinitionError,
    Tool,
    ToolError,
    Transition,
    predicate,
    run,
)
from stateflow.backends.scripted import ScriptedLLM
from stateflow.profiles import load_config
from tests.core.helpers import plan_act_flow, scripted


def test_issue48_per_state_model_key_naming_no_state_is_an_error_with_the_closest_match():
    fake = scripted("fake")
    with pytest.raises(ConfigError) as exc:
        run(
            plan_act_flow(),
            "t",
            models={"default": fake, "Pln": fake},  # a typo of "Plan"
            scripts={"fake": ScriptedLLM(["x"] * 10)},
            vars={"limit": 1},
        )
    message = str(exc.value)
    assert "'Pln' (did you mean 'Plan'?)" in message
    assert "flow 'plan-act'" in message
    assert "its states: Plan, Act, End" in message


def test_issue48_assignment_keys_without_any_close_state_still_list_the_states():
    assignment = ModelAssignment.of({"default": "local", "Zzz": "local"})
    with pytest.raises(ConfigError) as exc:
        assignment.check_states(["A", "B"], "flow 'f'")
    assert str(exc.value).startswith("model assignment names no state of flow 'f': 'Zzz'; its states: A, B;")
    assignment.check_states(["A", "Zzz"], "flow 'f'")  # known keys pass
    assert dict(assignment.restricted_to(["A"]).by_state) == {"default": "local"}


def test_issue48_raising_condition_names_the_rule_the_state_and_the_step():
    def broken(ctx):
        return ctx.history.last().no_such_attribute  # the AttributeError a newcomer wrote

    solve = State("Solve", Prompt("p"), LLM())
    done = State("Done", final=True)
    flow = Flow(
        "cond",
        initial=solve,
        transitions=[Transition(solve, done, when=predicate(broken, "answered")), Transition(solve, solve)],
    )
    with pytest.raises(ConditionError) as exc:
        run(flow, "t", models=scripted("fake"), scripts={"fake": ScriptedLLM(["a"])})
    err = exc.value
    assert err.state == "Solve"
    assert err.rule == "transition #1: Solve -> Done [answered]"
    assert err.step == 1  # step 0: the prompt, step 1: the model's reply
    assert isinstance(err.__cause__, AttributeError)
    assert "AttributeError" in str(err) and "'Solve'" in str(err) and "after step 1" in str(err)


def test_issue48_raising_tool_names_the_tool_the_state_and_the_step():
    def lookup(ctx):
        raise KeyError("no such table")

    act = State("Act", Prompt("p"), LLM(), Tool(lookup, "lookup"))
    done = State("Done", final=True)
    flow = Flow("tool", initial=act, transitions=[Transition(act, done)])
    with pytest.raises(ToolError) as exc:
        run(flow, "t", models=scripted("fake"), scripts={"fake": ScriptedLLM(["a"])})
    err = exc.value
    assert (err.tool, err.state, err.step) == ("lookup", "Act", 2)
    assert isinstance(err.__cause__, KeyError)
    # raise_errors=False records the same message on the result
    result = run(flow, "t", models=scripted("fake"), scripts={"fake": ScriptedLLM(["a"])}, raise_errors=False)
    assert "tool 'lookup' raised in state 'Act' at step 2" in (result.error or "")


def test_issue48_invalid_state_name_is_reported_as_a_state_not_a_flow():
    with pytest.raises(StateDefinitionError) as exc:
        State("My State")
    assert str(exc.value).startswith("state 'My State' is invalid:")
    assert isinstance(exc.value, FlowDefinitionError)  # existing handlers still catch it


def test_issue48_config_that_is_not_utf8_or_a_directory_names_the_file(tmp_path):
    bad = tmp_path / "models.toml"
    bad.write_bytes(b"\xff\xfe[models]\n")
    with pytest.raises(ConfigError, match=r"models\.toml: not UTF-8 text \(byte 0xff at offset 0\)"):
        load_config(bad)
    with pytest.raises(ConfigError, match=r"is a directory, not a config file"):
        load_config(tmp_path)
    listed = tmp_path / "OAI_CONFIG_LIST"
    listed.write_bytes(b'[{"model": "caf\xe9"}]')
    with pytest.raises(ConfigError, match=r"OAI_CONFIG_LIST: not UTF-8 text"):
        load_config(listed)


def test_issue48_scripted_profile_is_refused_by_the_check_commands_run():
    assignment = ModelAssignment.of({"default": "local", "Solve": scripted("fake")})
    with pytest.raises(ConfigError, match=r"Solve=fake \(provider 'scripted'\).*test doubles"):
        assignment.refuse_test_doubles()
    ModelAssignment.of("local").refuse_test_doubles()  # real models pass

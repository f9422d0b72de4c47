"""The Bash levers (stateflow.tasks.bash.levers): recipes over the paper's Bash flow, run end to end
by the real runner in the real sandbox on the demo tasks, with a scripted model whose replies are
chosen by the state asking (read from the instruction it receives)."""

from __future__ import annotations

from pathlib import Path

import pytest
from stateflow.tasks.agents.methods import resolve_method
from stateflow.tasks.bash.benchmark import INTERCODE_BASH
from stateflow.tasks.bash.flow import build_bash_flow
from stateflow.tasks.bash.levers import BASH_LEVERS, bash_recipe_flow
from stateflow.tasks.harness.identity import flow_fingerprint
from stateflow.tasks.harness.runner import RunSpec, evaluate
from stateflow.tasks.kit.episode_record import EpisodeRecord
from stateflow.tasks.kit.levers import LeverError
from stateflow.tasks.kit.prompts import load_prompt

from stateflow import ModelAssignment, ModelProfile
from stateflow.backends.scripted import ScriptedLLM

# demo task 5: "Create the directory /demo/archive and copy every .log file from /demo/logs into it."
TASK = 5
ANSWER = "mkdir -p /demo/archive && cp /demo/logs/*.log /demo/archive/"
CHECK = "ls /demo/archive"
FAILS = "cp /demo/nosuch/*.log /demo/archive/"
_NO_CHECK_RULE = "Only the output of the LAST command you run is graded"


def test_the_bash_methods_are_the_recipe_with_no_lever_on():
    # the records of sf_agent and stateflow must keep their identity (also the golden test's job)
    for method in ("sf_agent", "stateflow"):
        m = INTERCODE_BASH.methods[method]
        assert m.recipe is not None and m.recipe.levers == ()
        for grammar in (False, True):
            assert flow_fingerprint(m.build(grammar)) == flow_fingerprint(build_bash_flow(grammar=grammar))


def test_levers_compose_on_the_bash_methods_and_every_problem_is_one_error():
    flow = resolve_method(INTERCODE_BASH, "sf_agent+submit_first").build(False)
    assert "Verify" not in flow.states and "Submit" in flow.states
    with pytest.raises(LeverError) as err:
        resolve_method(INTERCODE_BASH, "sf_agent+submit_first+verify_budget+no_chek")
    problems = "; ".join(err.value.problems)
    assert "unknown lever 'no_chek'" in problems and "'submit_first' and 'verify_budget' conflict" in problems
    with pytest.raises(LeverError, match=r"no_check.*submit_first.*conflict"):
        BASH_LEVERS.check({"no_check", "submit_first"})
    # a setting is part of the flow, and so of its fingerprint
    one, two = (flow_fingerprint(bash_recipe_flow({"verify_budget"}, settings={"verify_budget": n})) for n in (1, 2))
    assert one != two


def test_no_check_replaces_verifys_instruction_and_its_ls_example():
    plain, changed = bash_recipe_flow(()).states["Verify"], bash_recipe_flow({"no_check"}).states["Verify"]
    assert "ls -d /tmp/out/reports" in plain.instruction and _NO_CHECK_RULE not in plain.instruction
    assert changed.instruction == load_prompt("bash-levers", "verify_no_check")
    assert "execute[ls" not in changed.instruction
    assert [type(o) for o in changed.outputs] == [type(o) for o in plain.outputs]


def _reply_by_state(verify: str, error: str = ANSWER, solve: str = ANSWER):
    """Solve answers ``solve``, Verify ``verify``, Error ``error`` (each recognised by its instruction)."""

    def reply(messages: list[dict], params: dict) -> str:
        text = str(messages[-1].get("content") or "") + str(messages[0].get("content") or "")
        if "Your last command failed" in text:
            command = error
        elif "Check whether your last command" in text or _NO_CHECK_RULE in text:
            command = verify
        else:
            command = solve
        return "Action: submit" if command == "submit" else f"Thought: t\nAction: execute[{command}]"

    return reply


def _episode(tmp_path: Path, method: str, script: ScriptedLLM, max_turns: int = 6) -> EpisodeRecord:
    spec = RunSpec(
        INTERCODE_BASH,
        (method,),
        models=ModelAssignment.of(ModelProfile(name="m", model="m", provider="scripted", api_key_env=None)),
        models_label="default=m",
        out=tmp_path / "run",
        dataset="demo",
        tasks=str(TASK),
        max_turns=max_turns,
        scripts={"m": script},
    )
    (record,) = evaluate(spec, progress=False).records
    assert record.status == "ok", record.error
    return record


def test_without_a_budget_a_checking_verify_runs_to_the_turn_limit(bash_available, tmp_path):
    record = _episode(tmp_path, "sf_agent", ScriptedLLM(_reply_by_state(verify=CHECK)))
    assert record.turns == 6 and record.last_action == CHECK and not record.submitted


def test_verify_budget_submits_after_n_verify_replies(bash_available, tmp_path):
    script = ScriptedLLM(_reply_by_state(verify=CHECK))
    record = _episode(tmp_path, "sf_agent+verify_budget=2", script)
    assert record.path == ["Init", "Solve", "Verify", "Verify", "Submit", "End"]
    # 3 replies that ran; the second check repeats the first and is resampled once (the flow's guard)
    assert record.submitted and record.turns == 3 and record.llm_calls == len(script.requests) == 4


def test_submit_first_submits_the_first_command_that_runs(bash_available, tmp_path):
    script = ScriptedLLM(_reply_by_state(verify=CHECK))
    record = _episode(tmp_path, "sf_agent+submit_first", script)
    assert record.path == ["Init", "Solve", "Submit", "End"] and record.llm_calls == 1
    # the answer's own output is what got graded: a full reward, where a trailing check costs it
    assert record.submitted and record.last_action == ANSWER and record.reward == 1.0


def test_submit_first_still_repairs_a_failed_command(bash_available, tmp_path):
    script = ScriptedLLM(_reply_by_state(verify=CHECK, solve=FAILS, error=ANSWER))
    record = _episode(tmp_path / "fix", "stateflow+submit_first", script)
    assert record.path == ["Init", "Solve", "Error", "Submit", "End"] and record.failed_actions == 1
    assert record.submitted and record.reward == 1.0


def test_no_check_is_what_verify_is_told(bash_available, tmp_path):
    script = ScriptedLLM(_reply_by_state(verify="submit"))
    record = _episode(tmp_path, "sf_agent+no_check", script)
    assert record.path == ["Init", "Solve", "Verify", "End"] and record.submitted and record.reward == 1.0
    verify_request = script.requests[1].messages
    assert any(_NO_CHECK_RULE in str(m.get("content")) for m in verify_request)
    assert not any("ls -d /tmp/out/reports" in str(m.get("content")) for m in verify_request)


def test_listing_is_the_prefix_first_flow_and_composes_with_the_other_levers(bash_available, tmp_path):
    listed = INTERCODE_BASH.methods["sf_agent_prefix_first"].build(True)
    assert flow_fingerprint(resolve_method(INTERCODE_BASH, "sf_agent+listing").build(True)) == flow_fingerprint(listed)
    script = ScriptedLLM(_reply_by_state(verify="submit"))
    record = _episode(tmp_path, "sf_agent+listing+verify_budget+no_check", script)
    # the listing ran in Init (one turn, no model call), the answer ran after it and was graded
    assert record.path == ["Init", "Solve", "Verify", "End"] and record.llm_calls == 2
    first_prompt = "\n".join(str(m.get("content")) for m in script.requests[0].messages)
    assert "The file system" in first_prompt and "/demo/logs" in first_prompt
    assert first_prompt.index("The file system") < first_prompt.index("Task: Create the directory")
    assert record.submitted and record.last_action == ANSWER and record.reward == 1.0

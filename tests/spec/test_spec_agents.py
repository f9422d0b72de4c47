"""The library's spec agents on InterCode through the runner, with spec-format scripted models."""

from __future__ import annotations

import shutil

import pytest
from stateflow.tasks.agents.spec_agents import ENFORCEMENTS, SPEC_AGENTS, SpecAgentConfig, build_spec_agent
from stateflow.tasks.bash.benchmark import INTERCODE_BASH
from stateflow.tasks.harness.runner import RunSpec, evaluate, open_env
from stateflow.tasks.kit.blackboard import episode_vars
from stateflow.tasks.kit.spec_prompts import BASH_SPEC_DOMAIN, SQL_SPEC_DOMAIN, example_transcript
from stateflow.tasks.sql.benchmark import INTERCODE_SQL

import stateflow
from stateflow import ModelAssignment, ModelProfile
from stateflow.backends.scripted import ScriptedLLM
from stateflow.spec import check_example, library_spec

PROFILE = ModelProfile(name="scripted-spec", model="s", provider="scripted", api_key_env=None)


@pytest.fixture(scope="module")
def sql_available() -> None:
    if shutil.which("mariadbd") is None and shutil.which("mysqld") is None:
        pytest.skip("no MariaDB/MySQL server binary: run scripts/setup.sh (installs mariadb-server)")


@pytest.mark.parametrize("domain", [SQL_SPEC_DOMAIN, BASH_SPEC_DOMAIN], ids=["sql", "bash"])
@pytest.mark.parametrize("stem", list(SPEC_AGENTS))
def test_worked_examples_are_valid_runs_of_their_spec(stem, domain):
    spec = library_spec(SPEC_AGENTS[stem])
    report = check_example(spec, example_transcript(spec, domain))
    assert report.ok, str(report)


def test_every_spec_agent_and_enforcement_is_a_runner_method():
    for stem in SPEC_AGENTS:
        for mode in ENFORCEMENTS:
            for bench in (INTERCODE_SQL, INTERCODE_BASH):
                flow = bench.methods[f"spec_{stem}_{mode}"].build(False)
                assert flow.name == f"{bench.domain}-spec-{stem}-{mode}"


def react_model(messages, params):
    """A ReAct spec agent that inspects once and answers with the books count query."""
    last = messages[-1]
    if last["role"] == "user" and last["content"].startswith("Continue with exactly one"):
        return "Final Thought:" if "Observation:" in messages[-2]["content"] else "Thought:"
    transcript = last["content"] if last["role"] == "assistant" else ""
    if "Observation:" not in transcript:
        return "Thought: see the books\nAction: execute\nAction Input: SELECT count(*) FROM book"
    return "Final Thought: the count is known\nAnswer: SELECT count(*) FROM book"


@pytest.mark.parametrize("mode", ENFORCEMENTS)
def test_react_spec_agent_records_like_any_method(tmp_path, sql_available, mode):
    spec = RunSpec(
        INTERCODE_SQL,
        (f"spec_react_{mode}",),
        models=ModelAssignment.of(PROFILE),
        models_label="default=scripted-spec",
        out=tmp_path,
        tasks="0:1",  # demo task 0: "How many books does the library have?"
        scripts={"scripted-spec": ScriptedLLM(react_model)},
    )
    (r,) = evaluate(spec, progress=False).records
    assert r["status"] == "ok", r["error"]
    assert r["success"] and r["submitted"] and r["path"] == ["Agent", "End"]
    # schema set-up + the action + the answer
    assert r["turns"] == 3 and r["failed_actions"] == 0
    assert r["llm_calls"] == 0 or r["prompt_tokens"] > 0
    assert r["prompt_tokens"] > 0 and r["completion_tokens"] > 0
    info = r["history"][-1]["meta"]["spec"]
    assert info["enforcement"] == mode and info["answer"] == "SELECT count(*) FROM book"
    assert info["trace"]["valid_step_rate"] == 1.0 and info["trace"]["stop_reason"] == "must_stop"


class FixedScorer:
    """Test double: the raw results always score higher (longer text, same per-token log-prob)."""

    def __init__(self):
        self.seen: list[str] = []

    def token_logprobs(self, messages, prefix, continuation):
        self.seen.append(prefix)
        return [-0.1] * max(1, len(continuation.split()))


def continuing(transcript: str, text: str) -> str:
    """What a model continuing ``transcript`` writes when it means ``text``: the monitor's cue
    (an unfinished last line) is not repeated."""
    cue = transcript[transcript.rfind("\n") + 1 :]
    return text[len(cue) :] if cue and text.startswith(cue) else text


def pass_model(messages, params):
    if messages[0]["content"].startswith("Summarise"):
        return "There are some books."
    transcript = messages[-1]["content"] if messages[-1]["role"] == "assistant" else ""
    if "[Summary]" not in transcript:
        text = (
            "[Plan] count books and list tables\n[Action] execute\n[Action Input] SHOW TABLES\n"
            "[Action] execute\n[Action Input] SELECT count(*) FROM book"
        )
    else:
        text = "[Final Thought] the second result is the answer\n[Answer] SELECT count(*) FROM book"
    return continuing(transcript, text)


def test_pass_runs_listed_actions_as_one_step_and_keeps_the_better_scored_text(sql_available):
    scorer = FixedScorer()
    flow = build_spec_agent(
        "pass",
        "monitor",
        SQL_SPEC_DOMAIN,
        prefix="sql",
        fmt=INTERCODE_SQL.observation,
        config=SpecAgentConfig("pass", "monitor", scorer=scorer, alpha=0),
    )
    env = open_env(RunSpec(INTERCODE_SQL, ("spec_pass_monitor",), ModelAssignment.of(PROFILE), "x", out=None))
    try:
        env.reset(0)
        result = stateflow.run(
            flow,
            "Question: How many books does the library have?",
            models=PROFILE,
            env=env,
            scripts={"scripted-spec": ScriptedLLM(pass_model)},
            vars={"max_turns": 10},
        )
    finally:
        env.close()
    assert episode_vars(result).reward == 1.0 and result.vars == {"max_turns": 10}
    meta = result.history.last().meta["spec"]
    (step,) = meta["multi_action_steps"]
    calls = step["concurrent"]["calls"]
    assert [c["argument"] for c in calls] == ["SHOW TABLES", "SELECT count(*) FROM book"]
    assert step["concurrent"]["overlapping_pairs"] == []  # one environment: calls serialised
    summary = step["summary"]
    # alpha 0 and -0.1 per word: the 4-word summary beats the longer raw results
    assert summary["kept"] == "summary" and summary["scores"]["best"] == "summary"
    assert summary["raw"].startswith("1. execute[SHOW TABLES] -> [('author',)")
    assert scorer.seen and scorer.seen[0].endswith("[Summary]")
    summary_step = next(s for s in meta["trace"]["steps"] if s["state"] == "Summary")
    assert summary_step["content"] == "There are some books."
    assert result.usage().prompt_tokens > 0  # the tool's model usage is counted in the run


def test_an_episode_over_its_time_budget_ends_is_scored_and_keeps_its_usage(sql_available):
    config = SpecAgentConfig("react", "monitor", max_seconds=0.0)
    flow = build_spec_agent(
        "react", "monitor", SQL_SPEC_DOMAIN, prefix="sql", fmt=INTERCODE_SQL.observation, config=config
    )
    env = open_env(RunSpec(INTERCODE_SQL, ("spec_react_monitor",), ModelAssignment.of(PROFILE), "x", out=None))
    try:
        env.reset(0)
        result = stateflow.run(
            flow,
            "Question: How many books does the library have?",
            models=PROFILE,
            env=env,
            scripts={"scripted-spec": ScriptedLLM(react_model)},
        )
    finally:
        env.close()
    meta = result.history.last().meta["spec"]
    assert meta["error"].startswith("EpisodeTimeout") and meta["trace"]["calls"] == 0
    assert episode_vars(result).done and episode_vars(result).reward == 0.0  # submitted: only the schema ran

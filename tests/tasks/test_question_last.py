"""The question repeated after the schema listing (tasks/kit/tools.py ``restate_question``,
tasks/sql/flow.py ``with_question_last``), over real HTTP and the real SQL environment."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from stateflow.envs.base import Task
from stateflow.tasks.agents.methods import build_method
from stateflow.tasks.harness.identity import flow_fingerprint
from stateflow.tasks.harness.registry import default_registry
from stateflow.tasks.kit.blackboard import episode_vars
from stateflow.tasks.kit.tools import restate_question
from stateflow.tasks.sql.levers import build_sql_flow

from stateflow import ModelProfile, run
from stateflow.testing.fake_openai import FakeOpenAIServer


def test_the_tool_repeats_the_current_question_and_needs_an_environment_with_a_task():
    task = Task(index=3, query="How many singers are there?", gold="SELECT count(*) FROM singer", context="music")
    tool = restate_question()
    result = tool.fn(SimpleNamespace(env=SimpleNamespace(current_task=task)))
    assert result.content == "Question: How many singers are there?"
    with pytest.raises(RuntimeError, match="needs an environment with a current task"):
        tool.fn(SimpleNamespace(env=None))


def test_question_last_needs_the_schema_listing_and_follows_it():
    with pytest.raises(ValueError, match="lever 'question_last' needs 'schema'"):
        build_sql_flow(question_last=True)
    flow = build_sql_flow(schema=True, examples=False, thoughts=False, values=3, question_last=True)
    assert [o.name for o in flow.states["Init"].outputs] == ["describe_schema_values3", "restate_question"]
    without = build_sql_flow(schema=True, examples=False, thoughts=False, values=3)
    assert flow_fingerprint(flow) != flow_fingerprint(without)  # its records are told apart


def test_every_voted_answer_reads_the_question_after_the_schema(sql_env):
    flow, view = build_method("sf_agent_vote_question_last", default_registry().get("intercode-sql"), grammar=True)
    sql_env.reset(0)
    task = sql_env.task(0)
    replies = iter([f"Action: execute[{task.gold}]", f"Action: execute[{task.gold}]"])  # the first two agree
    with FakeOpenAIServer(lambda *a: next(replies)) as srv:
        profile = ModelProfile(name="lc", model="m", provider="llamacpp", base_url=srv.url, api_key_env=None)
        r = run(flow, task.query, models=profile, env=sql_env, vars={"max_turns": 10}, view=view)
    assert episode_vars(r).reward == 1.0 and len(srv.requests) == 2
    assert episode_vars(r).turns == 2  # the schema and the statement: the repeated question costs no turn
    for request in srv.requests:
        last = request["messages"][-1]["content"]
        assert last.endswith(f"Question: {task.query}")  # nothing between the question and the answer
        prompt = "\n".join(m["content"] for m in request["messages"])
        assert prompt.index("Tables and their columns") < prompt.rindex(f"Question: {task.query}")


def test_the_one_shot_reads_the_question_between_the_schema_and_its_instruction(sql_env):
    flow, view = build_method("oneshot_direct_question_last", default_registry().get("intercode-sql"), grammar=True)
    assert [o.name for o in flow.states["Setup"].outputs] == ["describe_schema", "restate_question"]
    sql_env.reset(1)
    task = sql_env.task(1)
    with FakeOpenAIServer(lambda *a: f"Action: execute[{task.gold}]") as srv:
        profile = ModelProfile(name="lc", model="m", provider="llamacpp", base_url=srv.url, api_key_env=None)
        r = run(flow, task.query, models=profile, env=sql_env, vars={"max_turns": 10}, view=view)
    assert episode_vars(r).reward == 1.0 and len(srv.requests) == 1
    prompt = "\n".join(m["content"] for m in srv.requests[0]["messages"])
    schema, question = prompt.index("Tables and their columns"), prompt.rindex(f"Question: {task.query}")
    assert schema < question < prompt.index("Answer YOUR question with one SELECT")

"""Prompts laid out for reuse (tasks/kit/layout.py, the SQL lever ``prefix_first``): the question
said once, after the schema, so episodes on one database share their prompt prefix."""

from __future__ import annotations

import pytest
from stateflow.tasks.agents.methods import build_method
from stateflow.tasks.harness.identity import flow_fingerprint
from stateflow.tasks.harness.runner import RunSpec, evaluate
from stateflow.tasks.kit.layout import CONTEXT_FIRST_OPENING, states_question
from stateflow.tasks.reports.metrics import summarize
from stateflow.tasks.sql.benchmark import INTERCODE_SQL
from stateflow.tasks.sql.levers import build_sql_flow

from stateflow import ModelAssignment, ModelProfile
from stateflow.testing.fake_openai import FakeOpenAIServer


def test_prefix_first_needs_the_repeated_question_and_is_a_new_identity():
    with pytest.raises(ValueError, match="lever 'prefix_first' needs 'question_last'"):
        build_sql_flow(schema=True, prefix_first=True)
    old = build_sql_flow(schema=True, examples=False, thoughts=False, values=3, question_last=True)
    new = build_sql_flow(schema=True, examples=False, thoughts=False, values=3, question_last=True, prefix_first=True)
    assert [o.name for o in new.states["Init"].outputs] == ["describe_schema_values3", "state_question"]
    assert states_question(new) and not states_question(old)
    assert flow_fingerprint(new) != flow_fingerprint(old)  # what the model is told changed: records apart
    for method in ("oneshot_direct_prefix_first", "sf_agent_vote_prefix_first", "stateflow_vote_prefix_first"):
        assert states_question(build_method(method, INTERCODE_SQL)[0]), method


def _run(tmp_path, method: str) -> tuple[FakeOpenAIServer, list]:
    with FakeOpenAIServer(lambda *a: "Action: execute[SELECT 1]", prefix_cache=True) as srv:
        profile = ModelProfile(name="lc", model="m", provider="llamacpp", base_url=srv.url, api_key_env=None)
        spec = RunSpec(
            INTERCODE_SQL,
            (method,),
            models=ModelAssignment.of(profile),
            models_label="default=lc",
            out=tmp_path / method,
            tasks="0,1,2",  # all on the `library` database
        )
        records = evaluate(spec, progress=False).records
    return srv, records


def _episode_starts(srv: FakeOpenAIServer) -> list[int]:
    """Indices of each episode's first request (the first one naming a new question)."""
    seen: set[str] = set()
    starts = []
    for i, request in enumerate(srv.requests):
        question = next(m["content"] for m in request["messages"][2:] if m["content"].startswith("Question: "))
        if question not in seen:
            seen.add(question)
            starts.append(i)
    return starts


@pytest.mark.parametrize("method", ["oneshot_direct_prefix_first", "sf_agent_vote_prefix_first"])
def test_the_question_comes_once_after_the_schema_and_the_schema_is_served_from_the_cache(
    tmp_path, sql_available, method
):
    srv, records = _run(tmp_path, method)
    old_srv, old_records = _run(tmp_path, method.replace("prefix_first", "question_last"))
    for request in srv.requests:
        messages = request["messages"]
        question = next(m["content"] for m in messages if m["content"].startswith("Question: "))
        assert messages[1]["content"] == CONTEXT_FIRST_OPENING  # right after the system message
        text = "\n".join(m["content"] for m in messages)
        assert text.count(question) == 1 and text.index("Tables and their columns") < text.index(question)
    # system, opening, schema: what the fake counts as tokens (words plus a role mark per message)
    shared = sum(1 + len(m["content"].split()) for m in srv.requests[0]["messages"][:3])
    new_firsts, old_firsts = _episode_starts(srv), _episode_starts(old_srv)
    assert len(new_firsts) == len(old_firsts) == 3
    # the second and third episodes found everything before their question in the cache...
    assert all(srv.cached_counts[i][1] >= shared for i in new_firsts[1:])
    # ...which the question-first layout cannot: its prompts differ from the second message on
    assert all(old_srv.cached_counts[i][1] < shared for i in old_firsts[1:])
    (new_row,) = summarize(records)
    (old_row,) = summarize(old_records)
    assert new_row.eval_share < old_row.eval_share


LAID_OUT = [
    ("intercode-sql", "oneshot_prefix_first", "Tables and their columns", "Question: "),
    ("intercode-bash", "sf_agent_prefix_first", "The file system", "Task: "),
    ("intercode-bash", "stateflow_prefix_first", "The file system", "Task: "),
    ("intercode-bash", "oneshot_prefix_first", "The file system", "Task: "),
]


@pytest.mark.parametrize(("bench", "method", "listing", "ask"), LAID_OUT)
def test_bash_and_the_baselines_laid_out_for_reuse_share_everything_before_the_question(
    request, tmp_path, bench, method, listing, ask
):
    from stateflow.tasks.harness.registry import default_registry

    request.getfixturevalue("sql_available" if bench == "intercode-sql" else "bash_available")
    benchmark = default_registry().get(bench)
    with FakeOpenAIServer(lambda *a: "Thought: done\nAction: submit", prefix_cache=True) as srv:
        profile = ModelProfile(name="lc", model="m", provider="llamacpp", base_url=srv.url, api_key_env=None)
        spec = RunSpec(
            benchmark,
            (method,),
            models=ModelAssignment.of(profile),
            models_label="default=lc",
            out=tmp_path / method,
            dataset="demo",
            tasks="0,1,2",  # one database (`library`) / one file system (`demo`)
        )
        records = evaluate(spec, progress=False).records
    assert len(records) == 3 and all(r.status == "ok" for r in records), [r.error for r in records]
    firsts = srv.requests[:: len(srv.requests) // 3]
    for req in firsts:
        messages = req["messages"]
        assert messages[1]["content"] == CONTEXT_FIRST_OPENING
        text = "\n".join(m["content"] for m in messages)
        question = next(m["content"] for m in messages if m["content"].startswith(ask))
        assert text.count(question) == 1 and text.index(listing) < text.index(question)
    # everything before the question (system, opening, listing) is the same for the three tasks,
    # so the second and third episodes' first prompts found it in the cache
    shared = sum(1 + len(m["content"].split()) for m in firsts[0]["messages"][:3])
    starts = [i for i, r in enumerate(srv.requests) if r in firsts]
    assert all(srv.cached_counts[i][1] >= shared for i in starts[1:])
    assert states_question(build_method(method, benchmark)[0])


# demo task 5 and a command that solves it (as in test_bash_levers)
_BASH_TASK, _BASH_ANSWER = 5, "mkdir -p /demo/archive && cp /demo/logs/*.log /demo/archive/"


@pytest.mark.parametrize("method", ["oneshot_prefix_first", "sf_agent_prefix_first", "stateflow_prefix_first"])
def test_after_the_file_system_listing_the_agents_commands_still_run(bash_available, tmp_path, method):
    # The listing runs in the episode's own shell before the task. A first version began with
    # `cd / && ...`, which the environment's upstream cd emulation took as the new working
    # directory: every later command failed to start, and the 1.5B model solved 0 of 28 tasks.
    from stateflow.tasks.harness.registry import default_registry

    from stateflow.backends.scripted import ScriptedLLM

    def reply(messages: list[dict], params: dict) -> str:
        ran = any("execute[" in str(m.get("content")) for m in messages if m.get("role") == "assistant")
        return "Action: submit" if ran else f"Thought: t\nAction: execute[{_BASH_ANSWER}]"

    script = ScriptedLLM(reply)
    spec = RunSpec(
        default_registry().get("intercode-bash"),
        (method,),
        models=ModelAssignment.of(ModelProfile(name="m", model="m", provider="scripted", api_key_env=None)),
        models_label="default=m",
        out=tmp_path / method,
        dataset="demo",
        tasks=str(_BASH_TASK),
        max_turns=6,
        scripts={"m": script},
    )
    (record,) = evaluate(spec, progress=False).records
    assert record.status == "ok", record.error
    observations = [str(m.get("content")) for m in record.history if m.get("role") != "assistant"]
    assert not any("Can't chdir" in o for o in observations), observations
    assert record.last_action == _BASH_ANSWER and record.failed_actions == 0
    assert record.submitted and record.reward == 1.0

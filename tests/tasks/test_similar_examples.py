"""Retrieved worked answers (tasks/sql/examples.py): what the pool holds, how it ranks, and the
flow that shows them, over real HTTP and the real SQL environment."""

from __future__ import annotations

import random
import re
from types import SimpleNamespace

import pytest
from stateflow.envs.base import Task
from stateflow.tasks.agents.methods import build_method
from stateflow.tasks.harness.registry import default_registry
from stateflow.tasks.kit.blackboard import episode_vars
from stateflow.tasks.kit.samples import sample_of
from stateflow.tasks.sql.examples import ExamplePool, similar_examples
from stateflow.tasks.sql.levers import build_sql_flow

from stateflow import ModelProfile, run
from stateflow.testing.fake_openai import FakeOpenAIServer


def _task(i: int, db: str, question: str, gold: str = "SELECT 1") -> Task:
    return Task(index=i, query=question, gold=gold, context=db)


def test_the_pool_ranks_by_how_a_question_is_built_and_skips_the_questions_database():
    pool = ExamplePool(
        [
            _task(0, "music", "How many concerts are there?"),  # the same shape, but the question's database
            _task(1, "sports", "List the names of all stadiums."),
            _task(2, "sports", "How many stadiums are there?"),
            _task(3, "zoo", "How many keepers are there?"),
            _task(4, "zoo", "List the names of all keepers."),
        ],
        min_databases=2,
    )
    assert {"how", "many", "are", "there", "list", "names"} <= pool.structure_words
    assert "stadiums" not in pool.structure_words  # a domain word: one database uses it
    found = pool.similar("How many singers are there?", "MUSIC", k=2)
    assert [t.index for t in found] == [2, 3]  # both counts, pool order on the tie; never task 0
    assert [t.index for t in pool.similar("List the names of all singers.", "music", k=1)] == [1]


@pytest.fixture(scope="module")
def spider():
    from stateflow.envs.datasets import DataNotFoundError
    from stateflow.envs.sql.tasks import resolve_dataset

    try:
        return resolve_dataset("spider")
    except DataNotFoundError as e:
        pytest.skip(f"the Spider tasks are not on disk: {e}")


def _skeleton(sql: str) -> str:
    keywords = r"select|from|where|group by|order by|having|limit|join|intersect|union|except|not|in|count|avg|sum|max|min|distinct|desc|asc|like|between"  # noqa: E501
    return " ".join(re.findall(rf"\b({keywords})\b", sql.lower()))


def test_the_spider_pool_holds_neither_fixed_sample_and_finds_answers_of_the_same_shape(spider):
    dev = sample_of("dev", "spider", spider.tasks).indices
    scored = set(dev) | set(sample_of("heldout", "spider", spider.tasks).indices)
    pool = ExamplePool.for_dataset("spider", spider.tasks)
    assert len(pool.tasks) == len(spider.tasks) - len(scored)
    assert not scored & {t.index for t in pool.tasks}  # no scored task shows its gold or its paraphrase
    same_shape = by_chance = 0
    rng = random.Random(0)
    for i in dev:
        task = spider.tasks[i]
        found = pool.similar(task.query, task.context, k=3)
        assert len(found) == 3 and all(t.context.lower() != task.context.lower() for t in found)
        others = [t for t in pool.tasks if t.context.lower() != task.context.lower()]
        same_shape += any(_skeleton(t.gold) == _skeleton(task.gold) for t in found)
        by_chance += any(_skeleton(t.gold) == _skeleton(task.gold) for t in rng.sample(others, 3))
    # measured when it was written: 37 of 100 against 8; a ranking that ignores the question is near 8
    assert same_shape >= 2 * by_chance + 10, (same_shape, by_chance)


def test_the_tool_shows_one_line_answers_and_needs_an_environment_with_a_task(spider):
    tool = similar_examples(2)
    task = spider.tasks[sample_of("dev", "spider", spider.tasks).indices[0]]
    ctx = SimpleNamespace(env=SimpleNamespace(dataset=spider, current_task=task))
    text = tool.fn(ctx).content
    assert text.startswith("Solved questions built like this one, on other databases")
    assert text.count("\nQuestion: ") == 2 and text.count("\nAction: execute[SELECT") == 2
    assert task.gold not in text
    with pytest.raises(RuntimeError, match="needs a SQL environment with a current task"):
        tool.fn(SimpleNamespace(env=None))
    with pytest.raises(ValueError, match="k must be >= 1"):
        similar_examples(0)


def test_similar_examples_needs_the_schema_listing_and_one_line_replies():
    with pytest.raises(ValueError, match="needs 'schema'; lever 'similar_examples' needs 'no_thoughts'"):
        build_sql_flow(similar_examples=3)
    with pytest.raises(ValueError, match="lever 'similar_examples' needs 'no_thoughts'"):
        build_sql_flow(schema=True, similar_examples=3)  # Thought lines still on
    flow = build_sql_flow(schema=True, examples=False, thoughts=False, similar_examples=3)
    assert [o.name for o in flow.states["Init"].outputs] == ["describe_schema", "similar_examples3"]


def test_every_voted_answer_sees_the_examples_of_other_databases(sql_env):
    flow, view = build_method("sf_agent_vote_similar", default_registry().get("intercode-sql"), grammar=True)
    sql_env.reset(0)  # a question on the demo's `library` database
    library_golds = [t.gold for t in sql_env.dataset.tasks if t.context == "library"]
    gold = sql_env.task(0).gold
    replies = iter([f"Action: execute[{gold}]", f"Action: execute[{gold}]"])  # the first two agree
    with FakeOpenAIServer(lambda *a: next(replies)) as srv:
        profile = ModelProfile(name="lc", model="m", provider="llamacpp", base_url=srv.url, api_key_env=None)
        r = run(flow, sql_env.task(0).query, models=profile, env=sql_env, vars={"max_turns": 10}, view=view)
    assert episode_vars(r).reward == 1.0 and len(srv.requests) == 2
    assert episode_vars(r).turns == 2  # the schema and the statement: the examples cost no turn
    for request in srv.requests:
        prompt = "\n".join(m["content"] for m in request["messages"])
        shown = prompt[prompt.index("Solved questions built like this one") :]
        assert shown.count("Question: ") == 3
        assert not any(g in shown for g in library_golds)  # only the weather and bakery databases

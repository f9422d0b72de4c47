"""Vote(k) on the real demo SQL environment: candidates run read-only, the episode is untouched."""

from __future__ import annotations

import re

from stateflow.envs.sql import EmbeddedServerPool, open_sql_env
from stateflow.envs.sql.readonly import ReadOnlyExecutor

from stateflow import LLM, Flow, Prompt, State, Transition, run
from stateflow.backends.scripted import ScriptedLLM
from stateflow.vote import Vote
from tests.core.helpers import scripted


def parse(text: str) -> str | None:
    m = re.search(r"Action: execute\[(.*)\]", text)
    return m.group(1) if m else None


def test_candidates_execute_read_only_and_the_majority_result_wins(sql_pool: EmbeddedServerPool) -> None:
    env = open_sql_env("demo", pool=sql_pool)
    try:
        env.reset(0)  # library: "How many books does the library have?"
        executor = ReadOnlyExecutor(env.server, env.task(0).context, env.database_scope)
        replies = [
            "Thought: t\nAction: execute[SELECT count(*) FROM books]",  # no such table: an error
            "Thought: t\nAction: execute[USE mysql]",  # would move a session; ours is separate
            "Thought: t\nAction: execute[SELECT count(*) FROM book]",
            "Thought: t\nAction: execute[SELECT COUNT(book_id) FROM book]",
            "Thought: t\nAction: execute[SELECT 1]",
        ]
        ask = State("Ask", Prompt("p"), LLM(vote=Vote(parse, executor, k=5)))
        flow = Flow("vote-sql", initial=ask, transitions=[Transition(ask, State("End", final=True))])
        try:
            r = run(flow, "How many books?", models=scripted(), scripts={"fake": ScriptedLLM(replies)}, env=env)
        finally:
            executor.close()
        cands = [s for s in r.steps if "[candidate" in s.output]
        assert cands[0].detail["error"] is not None
        assert [s.detail["won"] for s in cands].index(True) == 2
        assert cands[2].detail["votes"] == 2
        assert parse(r.history.last("llm").content) == "SELECT count(*) FROM book"
        # the agent's session is where reset put it, with nothing executed on it
        assert env.observation is None
        obs, _reward, done, info = env.step("SELECT DATABASE()")
        assert str(obs[0][0]).lower() == env.task(0).context.lower() and not done and info["action_executed"]
    finally:
        env.close()

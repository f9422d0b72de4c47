"""Runs that share pools reuse prepared AutoGen agents (stateflow.episode.pool), and no run ever
sees another's messages: concurrent runs of different tasks, flows and views, over real HTTP."""

from __future__ import annotations

import asyncio
import re
import threading
from typing import Any

import pytest
from stateflow.sf_agent import SFAgentView

from stateflow import LLM, Flow, ModelProfile, Prompt, State, Tool, ToolResult, Transition, run
from stateflow.backends.http import HttpClients
from stateflow.episode.agents import ChatAgents
from stateflow.episode.pool import AgentPool
from stateflow.live import arun
from stateflow.state_agent import StateAgent
from stateflow.testing.fake_openai import FakeOpenAIServer

TASK = re.compile(r"task-\d+")


def _tasks_in(messages: list[dict[str, Any]]) -> set[str]:
    return {t for m in messages for t in TASK.findall(str(m.get("content") or ""))}


def _answer(model: str, messages: list[dict[str, Any]], body: dict[str, Any]) -> str:
    """Names every task the request mentions, so a leaked message shows in the reply too."""
    return "answer to " + " ".join(sorted(_tasks_in(messages)))


def _check(ctx) -> ToolResult:
    return ToolResult(f"checked {ctx.task}", {"ok": True})


def _flow(name: str) -> Flow:
    ask = State("Ask", Prompt(f"Answer the question ({name})."), LLM())
    check = State("Check", Prompt(f"Check your answer ({name})."), LLM(), Tool(_check, "check"))
    done = State("Done", final=True)
    return Flow(name, initial=ask, transitions=[Transition(ask, check), Transition(check, done)])


class _WatchedPool(AgentPool):
    """The pool, noting which agent sets are held by a run at any moment."""

    def __init__(self) -> None:
        super().__init__()
        self.held: set[int] = set()
        self.overlaps = 0
        self.most_held = 0
        self.sets_seen: set[int] = set()
        self._watch = threading.Lock()

    def take(self, ep: Any) -> tuple[ChatAgents, Any]:
        agents, key = super().take(ep)
        with self._watch:
            if id(agents) in self.held:
                self.overlaps += 1
            self.held.add(id(agents))
            self.sets_seen.add(id(agents))
            self.most_held = max(self.most_held, len(self.held))
        return agents, key

    def give_back(self, key: Any, agents: ChatAgents, ep: Any) -> None:
        with self._watch:
            self.held.discard(id(agents))
        super().give_back(key, agents, ep)


def test_concurrent_runs_of_different_tasks_flows_and_views_each_see_only_their_own_messages():
    flows = [_flow("first"), _flow("second")]
    views = [None, SFAgentView()]
    with FakeOpenAIServer(_answer, latency_s=0.05) as srv, HttpClients() as http:
        pool = http.shared(AgentPool, _WatchedPool)
        profile = ModelProfile(name="p", model="m", base_url=srv.url, api_key_env=None)

        async def batch(start: int) -> list[Any]:
            runs = []
            for i in range(start, start + 16):
                flow, view = flows[i % 2], views[(i // 2) % 2]
                runs.append(arun(flow, f"question task-{i:03d}?", models=profile, http=http, view=view))
            return await asyncio.gather(*runs)

        # two rounds: the second one runs on agents the first one gave back
        results = asyncio.run(batch(0)) + asyncio.run(batch(16))

    assert isinstance(pool, _WatchedPool)
    assert pool.overlaps == 0  # no set was ever held by two runs at once
    assert pool.most_held > 1  # the runs did overlap
    assert pool.stats.reused >= 16 and pool.stats.built <= 16 + 4
    assert len(pool.sets_seen) == pool.stats.built
    for i, r in enumerate(results):
        own = f"task-{i:03d}"
        assert r.exit_state == "Done", r.error
        assert r.flow == ("first", "second")[i % 2]
        assert r.view == ("stateflow", "sf_agent")[(i // 2) % 2]
        # the whole transcript mentions this run's task and no other
        assert _tasks_in([{"content": m.content} for m in r.history]) == {own}
        replies = [s.message.content for s in r.steps if s.output == "llm"]
        assert replies == [f"answer to {own}", f"answer to {own}"]
    # what reached the model: every request carries one task only, and its instructions are
    # those of its own flow and view (SF_Agent: in the system message; StateFlow: in the chat)
    assert len(srv.requests) == 2 * len(results)
    for body in srv.requests:
        msgs = body["messages"]
        (task,) = _tasks_in(msgs)
        i = int(task.split("-")[1])
        flow_name, sf_agent = ("first", "second")[i % 2], (i // 2) % 2 == 1
        other = ("second", "first")[i % 2]
        system = [m["content"] for m in msgs if m["role"] == "system"]
        texts = " ".join(str(m.get("content")) for m in msgs)
        assert f"({flow_name})" in texts and f"({other})" not in texts
        if sf_agent:
            assert system in ([f"Answer the question ({flow_name})."], [f"Check your answer ({flow_name})."])
        else:
            assert not system
            assert sum(m.get("name") == "user" for m in msgs) == 1  # one task, said once


def test_sequential_runs_reuse_one_set_and_start_from_a_clean_chat():
    flow = _flow("again")
    with FakeOpenAIServer(_answer) as srv, HttpClients() as http:
        profile = ModelProfile(name="p", model="m", base_url=srv.url, api_key_env=None)
        first = run(flow, "task-1", models=profile, http=http)
        second = run(flow, "task-2", models=profile, http=http)
        pool = http.shared(AgentPool, AgentPool)
        (waiting,) = pool.idle()
    assert (pool.stats.built, pool.stats.reused) == (1, 1)
    # the set waiting for the next run holds nothing of the last one
    assert waiting.groupchat.messages == [] and waiting.binding.episode is None
    assert all(a.chat_messages == {} for a in waiting.members())
    assert all(a.last_response is None for a in waiting.llm_agents.values())
    # the second run's model calls look exactly like the first's, with its own task
    one, two = srv.requests[:2], srv.requests[2:]
    assert [len(b["messages"]) for b in one] == [len(b["messages"]) for b in two]
    for a, b in zip(one, two, strict=True):
        assert [dict(m, content=m["content"].replace("task-1", "task-2")) for m in a["messages"]] == b["messages"]
    assert [s.message.content for s in first.steps] != [s.message.content for s in second.steps]


def _boom(ctx) -> ToolResult:
    if "fail" in ctx.task:
        raise ValueError("the tool broke")
    return ToolResult("fine", {"ok": True})


def test_a_failed_run_gives_no_agents_back_and_the_next_run_is_clean():
    ask = State("Ask", Prompt("Answer."), LLM(), Tool(_boom, "boom"))
    done = State("Done", final=True)
    flow = Flow("fails", initial=ask, transitions=[Transition(ask, done)])
    with FakeOpenAIServer(_answer) as srv, HttpClients() as http:
        profile = ModelProfile(name="p", model="m", base_url=srv.url, api_key_env=None)
        failed = run(flow, "task-1 fail", models=profile, http=http, raise_errors=False)
        after = run(flow, "task-2", models=profile, http=http)
        pool = http.shared(AgentPool, AgentPool)
    assert failed.stop_reason == "error" and "the tool broke" in (failed.error or "")
    assert (pool.stats.built, pool.stats.reused, pool.stats.dropped) == (2, 0, 1)
    assert after.exit_state == "Done"
    assert _tasks_in(srv.requests[-1]["messages"]) == {"task-2"}


def test_a_run_without_shared_pools_builds_its_own_agents():
    flow = _flow("alone")
    with FakeOpenAIServer(_answer) as srv:
        profile = ModelProfile(name="p", model="m", base_url=srv.url, api_key_env=None)
        r = run(flow, "task-7", models=profile)
    assert r.exit_state == "Done" and _tasks_in(srv.requests[-1]["messages"]) == {"task-7"}


def test_a_state_agent_reset_forgets_its_chats_and_restores_its_system_message():
    agent, other = StateAgent("Solve", "Solve it."), StateAgent("Other", "")
    agent.receive({"content": "task-1", "role": "user"}, other, request_reply=False, silent=True)
    agent.update_system_message("Solve it, once more.")
    agent.last_response = object()
    agent.reset()
    assert agent.chat_messages == {} and agent.last_response is None
    assert agent.system_message == "Solve it." and agent._oai_system_message == [
        {"content": "Solve it.", "role": "system"}
    ]
    other.reset()
    assert other.system_message == "" and other._oai_system_message == []  # still none sent


@pytest.mark.parametrize("max_idle", [1])
def test_a_full_pool_drops_what_comes_back(max_idle: int):
    flow = _flow("burst")
    with FakeOpenAIServer(_answer, latency_s=0.05) as srv, HttpClients() as http:
        pool = http.shared(AgentPool, lambda: AgentPool(max_idle=max_idle))
        profile = ModelProfile(name="p", model="m", base_url=srv.url, api_key_env=None)

        async def burst() -> list[Any]:
            return await asyncio.gather(*[arun(flow, f"task-{i}", models=profile, http=http) for i in range(4)])

        results = asyncio.run(burst())
    assert all(r.exit_state == "Done" for r in results)
    assert pool.stats.built == 4 and pool.stats.dropped == 3  # one set kept, three dropped

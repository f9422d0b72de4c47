"""Many runs in one process must not see each other's messages."""

from __future__ import annotations

import re
from concurrent.futures import ThreadPoolExecutor

from stateflow.sf_agent import SFAgentView

from stateflow import ModelProfile, run
from stateflow.testing.fake_openai import FakeOpenAIServer
from tests.core.helpers import plan_act_flow


def _echo_task(model, messages, body):
    # Reply with the task id found in the first user message, so cross-talk would show.
    task = next(m["content"] for m in messages if m["role"] == "user")
    return f"working on {task}"


def test_fifty_concurrent_runs_over_http_without_cross_talk():
    with FakeOpenAIServer(_echo_task, latency_s=0.01) as srv:
        prof = ModelProfile(name="srv", model="m", base_url=srv.url, api_key_env=None)

        def one(i: int):
            view = SFAgentView() if i % 2 else None
            return i, run(plan_act_flow(), f"task-{i}", models=prof, view=view, vars={"limit": 2 + i % 3})

        with ThreadPoolExecutor(max_workers=50) as pool:
            results = list(pool.map(one, range(50)))
    assert len(srv.requests) == sum(1 + 2 + i % 3 for i in range(50))
    for i, r in results:
        assert r.stop_reason == "final"
        assert r.vars["n"] == 2 + i % 3
        ids = {int(x) for m in r.history for x in re.findall(r"task-(\d+)", m.content)}
        assert ids == {i}, f"run {i} saw messages of runs {ids - {i}}"
        assert r.view == ("sf_agent" if i % 2 else "stateflow")

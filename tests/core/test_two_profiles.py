"""Acceptance: one flow, two states on two different models (embedded local-small and an
OpenAI-compatible server), with usage traced per state and per model."""

from __future__ import annotations

import pytest

from stateflow import LLM, Flow, ModelProfile, Prompt, State, Transition, run
from stateflow.testing.fake_openai import FakeOpenAIServer


@pytest.mark.local_model
def test_local_model_and_http_server_in_one_flow():
    from stateflow.backends.local import ModelStore, model_spec, runtime_available

    if runtime_available():
        pytest.skip(runtime_available())
    if not ModelStore().status(model_spec("local-small")).present:
        pytest.skip("model local-small is not assembled: run scripts/setup.sh")
    write = State(
        "Write", Prompt("Write a SQL query that counts the rows of table t. Reply with the query only."), LLM()
    )
    check = State("Check", Prompt("Is the query above valid SQL? Answer yes or no."), LLM())
    end = State("End", final=True)
    flow = Flow("two-models", initial=write, transitions=[Transition(write, check), Transition(check, end)])
    with FakeOpenAIServer(lambda model, messages, body: "yes") as srv:
        remote = ModelProfile(
            name="remote", model="checker", base_url=srv.url, api_key_env=None, price_per_1k=(0.5, 1.0)
        )
        r = run(flow, "count rows", models={"default": "local-small", "Check": remote})
    assert r.stop_reason == "final"
    assert "count" in r.history[2].content.lower()  # the local model wrote a COUNT query
    by_model, by_state = r.usage_by_model(), r.usage_by_state()
    assert set(by_model) == {"local-small", "remote"} and set(by_state) == {"Write", "Check"}
    assert by_state["Write"].prompt_tokens > 10 and by_state["Write"].completion_tokens > 0
    assert by_model["remote"].cost > 0 and by_model["local-small"].cost == 0
    assert srv.requests[0]["messages"][-1]["content"].startswith("Is the query above valid SQL?")

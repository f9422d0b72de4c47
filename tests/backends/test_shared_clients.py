"""Runs on the same connection pools share AutoGen's client per profile and endpoint
(``HttpClients.shared``); anything that differs gets its own."""

from __future__ import annotations

import dataclasses
import threading

from stateflow import LLM, Flow, ModelAssignment, ModelProfile, Prompt, State, Transition, run
from stateflow.backends.autogen_clients import LLMBackends
from stateflow.backends.http import HttpClients
from stateflow.testing.fake_openai import FakeOpenAIServer


def _profile(url: str, **kw) -> ModelProfile:
    return ModelProfile(name="p", model="m", base_url=url, api_key_env=None, **kw)


def test_shared_builds_once_per_key_even_when_asked_from_many_threads():
    built: list[str] = []
    with HttpClients() as http:

        def build() -> object:
            built.append("x")
            return object()

        got: list[object] = []
        threads = [threading.Thread(target=lambda: got.append(http.shared("k", build))) for _ in range(16)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert len(built) == 1 and len({id(g) for g in got}) == 1
        assert http.shared("other", build) is not got[0] and len(built) == 2
        http.close()  # closing drops what was built on the pools
        assert http.shared("k", build) is not got[0]


def test_runs_on_the_same_pools_share_the_client_and_other_settings_do_not():
    with FakeOpenAIServer(lambda *a: "ok") as srv, FakeOpenAIServer(lambda *a: "ok") as other, HttpClients() as http:
        p = _profile(srv.url)

        def wrapper(profile: ModelProfile, pools: HttpClients | None = http):
            return LLMBackends(ModelAssignment.of(profile), http=pools).wrapper(profile)

        first = wrapper(p)
        assert wrapper(p) is first  # a second run's backends: the same client
        assert wrapper(_profile(other.url)) is not first  # another endpoint
        assert wrapper(dataclasses.replace(p, timeout=7.0)) is not first  # another setting
        assert wrapper(dataclasses.replace(p, max_retries=0)) is not first
        assert wrapper(p, pools=None) is not first  # no shared pools: nothing shared
        with HttpClients() as own:
            assert wrapper(p, pools=own) is not first  # other pools


def test_runs_that_share_a_client_still_count_their_own_calls():
    ask = State("Ask", Prompt("Say."), LLM())
    end = State("End", final=True)
    flow = Flow("say", initial=ask, transitions=[Transition(ask, end)])
    with FakeOpenAIServer(lambda model, messages, body: "one two three") as srv, HttpClients() as http:
        results = [run(flow, f"task {i}", models=_profile(srv.url), http=http) for i in range(3)]
    for r in results:
        (llm,) = [s for s in r.steps if s.output == "llm"]
        assert llm.usage.completion_tokens == 3 and llm.message.content == "one two three"

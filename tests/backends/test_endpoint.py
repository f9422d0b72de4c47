"""One endpoint adapter for both LLM stacks: the AutoGen agents of a run and the spec completer.

Every test talks real HTTP to a fake OpenAI-compatible server (injected failures, recorded
request bodies and client connections).
"""

from __future__ import annotations

import typing

import pytest

from stateflow import LLM, Flow, LLMError, ModelProfile, Prompt, State, Transition, run
from stateflow.backends.autogen_clients import LLMBackends
from stateflow.backends.endpoint import open_endpoint
from stateflow.backends.http import HttpClients
from stateflow.backends.providers import PROVIDERS, capabilities
from stateflow.errors import ConfigError
from stateflow.profiles import ModelAssignment, Provider
from stateflow.scoring import OpenAIScorer, scorer_for
from stateflow.spec.completer import completer_for
from stateflow.testing.fake_openai import FakeOpenAIServer

MSGS = [{"role": "user", "content": "say something"}]


def _profile(url: str, **kw: typing.Any) -> ModelProfile:
    return ModelProfile(name="srv", model="m", base_url=url, api_key_env=None, **kw)


def _one_call_flow() -> Flow:
    ask = State("Ask", Prompt("p"), LLM())
    return Flow("one", initial=ask, transitions=[Transition(ask, State("End", final=True))])


# -- provider capabilities: declared once ---------------------------------------------------------


def test_every_profile_provider_has_one_capability_record():
    assert set(typing.get_args(Provider)) == set(PROVIDERS)
    for name in PROVIDERS:
        assert capabilities(name).provider == name
    with pytest.raises(KeyError, match="unknown provider 'nope'"):
        capabilities("nope")


@pytest.mark.parametrize("provider", ["openai", "vllm", "ollama", "llamacpp"])
def test_grammar_decision_of_both_stacks_is_the_declared_capability(provider):
    # The AutoGen path (constraint fields) and the completer (supports_grammar) read the same
    # record: a provider that declares no grammar field gets none on either path.
    prof = ModelProfile(name="p", model="m", provider=provider, base_url="http://127.0.0.1:9/v1", api_key_env=None)
    declared = capabilities(provider).grammar
    ep = open_endpoint(prof)
    fields = ep.constraint_fields(grammar='root ::= "x"', regex=None)
    assert (fields is None) == (declared is None)
    if declared is not None:
        assert declared in fields
    assert completer_for(prof).supports_grammar == (declared is not None)
    assert prof.native_tools == capabilities(provider).function_calling


def test_regex_travels_natively_to_vllm_and_as_gbnf_to_llamacpp():
    vllm = open_endpoint(ModelProfile(name="v", model="m", provider="vllm", base_url="http://h:1/v1"))
    assert vllm.constraint_fields(grammar=None, regex="[a-z]+") == {"structured_outputs": {"regex": "[a-z]+"}}
    lc = open_endpoint(ModelProfile(name="l", model="m", provider="llamacpp", base_url="http://h:1/v1"))
    gbnf = lc.constraint_fields(grammar=None, regex="[a-z]+")["grammar"]
    assert "root" in gbnf and "[a-z]" in gbnf


def test_scoring_follows_the_declared_prompt_logprobs():
    with pytest.raises(ConfigError, match="no prompt log-probabilities"):
        scorer_for(ModelProfile(name="o", model="gpt-4o-mini", api_key_env=None, api_key_value="k"))
    compatible = scorer_for(ModelProfile(name="c", model="m", base_url="http://h:1/v1", api_key_env=None))
    assert isinstance(compatible, OpenAIScorer)
    with pytest.raises(ConfigError, match="test double"):
        scorer_for(ModelProfile(name="s", model="s", provider="scripted", api_key_env=None))


def test_prefill_default_is_the_providers():
    vllm = ModelProfile(name="v", model="m", provider="vllm", base_url="http://h:1/v1", api_key_env=None)
    with FakeOpenAIServer(lambda *a: "tail") as srv:
        for prof, continued in ((vllm, True), (_profile("http://h:1/v1"), False)):
            prof = prof.with_overrides(base_url=srv.url)
            completer_for(prof).complete([*MSGS, {"role": "assistant", "content": "start"}], stop=(), max_tokens=5)
            assert srv.requests[-1].get("continue_final_message", False) is continued


# -- stop sequences ---------------------------------------------------------------------------------


def test_stops_merge_profile_and_call_and_keep_the_calls_own_under_a_cap():
    prof = _profile("http://h:1/v1", stop=("P1", "P2", "P3"))
    ep = open_endpoint(prof)
    assert ep.stops(("C1", "P1")) == ["P1", "P2", "P3", "C1"]
    assert ep.capabilities.max_stop == 4
    assert ep.stops(("C1", "C2", "C3")) == ["C1", "C2", "C3", "P1"]  # OpenAI takes at most 4
    vllm = open_endpoint(prof.with_overrides(provider="vllm"))
    assert len(vllm.stops(("C1", "C2", "C3"))) == 6  # no cap declared


def test_both_stacks_send_the_same_merged_stops():
    with FakeOpenAIServer(lambda *a: "ok") as srv:
        prof = _profile(srv.url, stop=("P1",))
        ask = State("Ask", Prompt("p"), LLM(stop=("C1",)))
        run(Flow("s", initial=ask, transitions=[Transition(ask, State("End", final=True))]), "T", models=prof)
        completer_for(prof).complete(MSGS, stop=("C1",), max_tokens=5)
    autogen_body, completer_body = srv.requests
    assert autogen_body["stop"] == completer_body["stop"] == ["P1", "C1"]


# -- retries ----------------------------------------------------------------------------------------


def test_completer_retries_exactly_max_retries_times():
    with FakeOpenAIServer(lambda *a: "fine", failures=[503, 429, 500]) as srv:
        comp = completer_for(_profile(srv.url, max_retries=3, timeout=10)).complete(MSGS, stop=(), max_tokens=5)
    assert comp.text == "fine" and len(srv.requests) == 4  # three injected failures, then success
    with (
        FakeOpenAIServer(lambda *a: "never", failures=[503, 503, 503]) as srv,
        pytest.raises(LLMError, match="completion to profile 'srv' failed") as exc,
    ):
        completer_for(_profile(srv.url, max_retries=1, timeout=10)).complete(MSGS, stop=(), max_tokens=5)
    assert exc.value.profile == "srv" and len(srv.requests) == 2  # one try + one retry, no more


def test_autogen_path_retries_exactly_max_retries_times():
    with (
        FakeOpenAIServer(lambda *a: "never", failures=[503, 503, 503]) as srv,
        pytest.raises(LLMError, match="model call to profile 'srv' failed") as exc,
    ):
        run(_one_call_flow(), "T", models=_profile(srv.url, max_retries=1, timeout=10))
    assert exc.value.state == "Ask" and len(srv.requests) == 2
    with FakeOpenAIServer(lambda *a: "fine", failures=[503, 503]) as srv:
        r = run(_one_call_flow(), "T", models=_profile(srv.url, max_retries=2, timeout=10))
    assert r.history[-1].content == "fine" and len(srv.requests) == 3


def test_refused_connection_is_an_llm_error_naming_the_profile():
    prof = _profile("http://127.0.0.1:9/v1", max_retries=0, timeout=2)
    with pytest.raises(LLMError, match="completion to profile 'srv' failed: APIConnectionError"):
        completer_for(prof).complete(MSGS, stop=(), max_tokens=5)


# -- shared connection pools -------------------------------------------------------------------------


def test_completers_and_runs_share_one_connection_through_the_pool():
    with FakeOpenAIServer(lambda *a: "ok") as srv:
        prof = _profile(srv.url)
        with HttpClients() as pool:
            for _ in range(2):
                completer_for(prof, http=pool).complete(MSGS, stop=(), max_tokens=5)
                run(_one_call_flow(), "T", models=prof, http=pool)
        pooled = list(srv.peers)
        for _ in range(2):
            completer_for(prof).complete(MSGS, stop=(), max_tokens=5)
        unpooled = srv.peers[len(pooled) :]
    assert len(pooled) == 4 and len(set(pooled)) == 1  # four calls, two stacks, one TCP connection
    assert len(set(unpooled)) == 2  # without the pool every completer opens its own


def test_test_doubles_take_no_pool_and_cannot_build_a_completer():
    with HttpClients() as pool:
        ep = open_endpoint(ModelProfile(name="s", model="s", provider="scripted", api_key_env=None), http=pool)
    assert ep.http_client is None and ep.base_url is None
    with pytest.raises(ConfigError, match="test double"):
        completer_for(ModelProfile(name="s", model="s", provider="scripted", api_key_env=None))


# -- usage and cost ----------------------------------------------------------------------------------


def test_completer_records_usage_and_cost_like_the_autogen_path():
    with FakeOpenAIServer(lambda *a: "three word reply") as srv:
        prof = _profile(srv.url, price_per_1k=(1.0, 2.0))
        comp = completer_for(prof).complete(MSGS, stop=(), max_tokens=5)
        r = run(_one_call_flow(), "say something", models=prof)
    assert (comp.prompt_tokens, comp.completion_tokens) == (2, 3)
    assert comp.cost == pytest.approx((2 * 1.0 + 3 * 2.0) / 1000)
    step = r.steps[-1].usage
    assert step.completion_tokens == comp.completion_tokens
    assert step.cost == pytest.approx(prof.cost(step.prompt_tokens, step.completion_tokens)) and step.cost > 0


def test_cached_tokens_are_parsed_from_the_usage_details():
    from stateflow.backends.scripted import make_completion

    ep = open_endpoint(_profile("http://h:1/v1", price_per_1k=(1.0, 0.0)))
    usage = ep.usage(make_completion("x", model="m", prompt_tokens=10, completion_tokens=1, cached_tokens=7), 0.5)
    assert (usage.prompt_tokens, usage.cached_tokens, usage.cost, usage.latency_s) == (10, 7, 0.01, 0.5)


def test_one_endpoint_per_profile_per_run():
    prof = _profile("http://127.0.0.1:9/v1")
    with HttpClients() as pool:
        backends = LLMBackends(ModelAssignment.of(prof), http=pool)
        assert backends.endpoint(prof) is backends.endpoint(prof)
        assert backends.wrapper(prof) is backends.wrapper(prof)
        assert backends.endpoint(prof).http_client is pool.get(prof.base_url, prof.timeout)


def test_a_replay_profile_without_a_replay_cassette_is_a_config_error(tmp_path):
    # It has no endpoint: before, it silently became a call to OpenAI's own API.
    replay = ModelProfile(name="r", model="m", provider="replay", api_key_env=None)
    with pytest.raises(ConfigError, match="no replay cassette"):
        run(_one_call_flow(), "T", models=replay)

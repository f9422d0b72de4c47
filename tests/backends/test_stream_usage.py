"""A streamed call keeps the cached-token count of the server's usage chunk (AutoGen's stream
assembly drops it), over real HTTP on the fake server's prefix-cache mode."""

from __future__ import annotations

from stateflow import LLM, Flow, ModelProfile, Prompt, State, Transition, run
from stateflow.events import StepRecorded
from stateflow.live import stream
from stateflow.testing.fake_openai import FakeOpenAIServer


def _flow() -> Flow:
    # the second prompt extends the first conversation: a prefix cache holds most of it
    first = State("First", Prompt("Describe the table."), LLM())
    second = State("Second", Prompt("Now write the query."), LLM())
    end = State("End", final=True)
    return Flow("two-calls", initial=first, transitions=[Transition(first, second), Transition(second, end)])


def _profile(url: str) -> ModelProfile:
    return ModelProfile(name="lc", model="m", provider="llamacpp", base_url=url, api_key_env=None)


def test_a_streamed_run_reports_the_servers_cached_tokens():
    with FakeOpenAIServer(lambda *a: "a reply of a few words", prefix_cache=True) as srv:
        events = list(stream(_flow(), "Task: count the rows.", models=_profile(srv.url)))
    steps = [e for e in events if isinstance(e, StepRecorded) and e.step.output == "llm"]
    assert len(steps) == 2 and all(s.streamed for s in steps)
    got = [(s.step.usage.prompt_tokens, s.step.usage.cached_tokens) for s in steps]
    assert got == srv.cached_counts  # exactly what the server's usage chunks said
    assert got[0][1] == 0 and got[1][1] > 0  # a new prompt, then one that shared a prefix


def test_streamed_and_whole_replies_are_counted_alike():
    with FakeOpenAIServer(lambda *a: "a reply of a few words", prefix_cache=True) as srv:
        whole = run(_flow(), "Task: count the rows.", models=_profile(srv.url))
    with FakeOpenAIServer(lambda *a: "a reply of a few words", prefix_cache=True) as srv:
        events = list(stream(_flow(), "Task: count the rows.", models=_profile(srv.url)))
    streamed = [e.step for e in events if isinstance(e, StepRecorded) and e.step.output == "llm"]
    as_whole = [s for s in whole.steps if s.output == "llm"]

    def counts(steps):
        return [(s.usage.prompt_tokens, s.usage.completion_tokens, s.usage.cached_tokens) for s in steps]

    assert counts(streamed) == counts(as_whole)
    assert sum(c for _, _, c in counts(streamed)) > 0

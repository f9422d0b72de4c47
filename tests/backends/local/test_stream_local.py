"""Token streaming from the REAL embedded model (local-small), with and without a grammar.

Run under the shared model lock: ``flock /work/model.lock .venv/bin/python -m pytest
tests/backends/local/test_stream_local.py``. Time to first token is measured in
``scripts/bench_live.py``, not here.
"""

from __future__ import annotations

import dataclasses

import pytest

from stateflow import LLM, Flow, Prompt, State, Transition
from stateflow.backends.local import CATALOG, ModelStore, runtime_available
from stateflow.events import RunFinished, StepRecorded, TokenDelta
from stateflow.live import stream
from stateflow.profiles import BUILTIN_PROFILES

pytestmark = pytest.mark.local_model

ANSWER = r'root ::= "Answer: " [a-z ]{1,40} "."'


def _require_real_model() -> None:
    missing = runtime_available()
    if missing:
        pytest.skip(f"llama-cpp-python runtime absent ({missing}); run scripts/setup_local_llm.sh")
    if not ModelStore().status(CATALOG["local-small"]).present:
        pytest.skip("local-small model not in the cache; run scripts/setup_local_llm.sh")


@pytest.mark.parametrize("grammar", [None, ANSWER], ids=["free", "grammar"])
def test_the_embedded_model_streams_tokens(grammar: str | None) -> None:
    _require_real_model()
    profile = dataclasses.replace(BUILTIN_PROFILES["local-small"], max_tokens=24, temperature=0.0)
    ask = State("Ask", Prompt("Name a colour of the sky in a few words."), LLM(grammar=grammar))
    end = State("End", final=True)
    flow = Flow("colour", initial=ask, transitions=[Transition(ask, end)])
    events = list(stream(flow, "Reply briefly.", models=profile))
    result = events[-1]
    assert isinstance(result, RunFinished) and result.result.error is None, result.result.error
    tokens = [e.text for e in events if isinstance(e, TokenDelta)]
    reply = next(e for e in events if isinstance(e, StepRecorded) and e.step.output == "llm")
    assert reply.streamed and tokens  # arrived as deltas before the whole reply
    assert "".join(tokens) == reply.step.message.content
    if grammar is not None:
        assert len(tokens) > 1
        assert reply.step.message.content.startswith("Answer: ") and reply.step.message.content.endswith(".")
    # the server's usage chunk (stream_options.include_usage), read back through AutoGen
    usage = reply.step.usage
    assert usage.prompt_tokens > 0 and 0 < usage.completion_tokens <= 24
    assert 0 <= usage.cached_tokens < usage.prompt_tokens


def test_a_streamed_call_keeps_the_prompt_tokens_the_server_did_not_evaluate() -> None:
    # The second state's prompt extends the first's: the server reuses that KV state and says
    # so in the usage chunk's prompt_tokens_details.cached_tokens, which AutoGen's assembly drops.
    _require_real_model()
    profile = dataclasses.replace(BUILTIN_PROFILES["local-small"], max_tokens=8, temperature=0.0)
    first = State("First", Prompt("Name a colour of the sky in one word."), LLM())
    second = State("Second", Prompt("Now name a colour of grass in one word."), LLM())
    end = State("End", final=True)
    flow = Flow("colours", initial=first, transitions=[Transition(first, second), Transition(second, end)])
    events = list(stream(flow, "Reply briefly.", models=profile))
    result = events[-1]
    assert isinstance(result, RunFinished) and result.result.error is None, result.result.error
    replies = [e for e in events if isinstance(e, StepRecorded) and e.step.output == "llm"]
    assert len(replies) == 2 and all(r.streamed for r in replies)
    later = replies[1].step.usage
    assert later.prompt_tokens > replies[0].step.usage.prompt_tokens
    # at least the first turn's prompt was reused (exact count depends on the template's split)
    assert later.cached_tokens >= replies[0].step.usage.prompt_tokens // 2, later
    assert later.cached_tokens < later.prompt_tokens

"""Typed structured output: LLM(schema=...) (issue 45, part 4).

The model is the fake OpenAI-compatible server over HTTP (what each request carried is
recorded); the embedded-model run is in tests/backends/local/test_compose_local.py.
"""

from __future__ import annotations

import json
from typing import Literal

import pytest
from pydantic import BaseModel, Field

from stateflow import (
    LLM,
    Flow,
    ModelProfile,
    Prompt,
    SQLiteCheckpointer,
    State,
    StructuredOutputError,
    Transition,
    run,
)
from stateflow.backends.autogen_clients import LLMBackends
from stateflow.context import Context
from stateflow.fingerprint import flow_fingerprint
from stateflow.messages import History
from stateflow.profiles import ModelAssignment
from stateflow.structured import parse_reply, parsed
from stateflow.testing.fake_openai import FakeOpenAIServer


class Verdict(BaseModel):
    approved: bool
    reason: str = Field(max_length=40)
    score: int = Field(ge=0, le=10)


def _flow() -> Flow:
    judge = State("Judge", Prompt("Judge the answer."), LLM(schema=Verdict))
    yes, no = State("Accepted", final=True), State("Rejected", final=True)
    return Flow(
        "judge",
        initial=judge,
        transitions=[
            Transition(judge, yes, when=parsed(Verdict, lambda v: v.approved and v.score >= 5, "approved")),
            Transition(judge, no),
        ],
    )


def _profile(url: str, provider: str = "openai") -> ModelProfile:
    return ModelProfile(name="fake", model="fake-model", base_url=url, provider=provider, api_key_env=None)


def _replies(*texts: str):
    queue = list(texts)
    return lambda model, messages, body: queue.pop(0)


def test_a_valid_reply_becomes_the_object_on_the_board_and_routes_the_flow():
    good = json.dumps({"approved": True, "reason": "correct", "score": 8})
    with FakeOpenAIServer(_replies(good)) as srv:
        r = run(_flow(), "T", models=_profile(srv.url), telemetry=False)
        body = srv.requests[0]
    assert r.path == ["Judge", "Accepted"]
    assert r.board.get(Verdict) == Verdict(approved=True, reason="correct", score=8)
    msg = r.history.last()
    assert msg.meta["parsed"] == {"approved": True, "reason": "correct", "score": 8}
    # an OpenAI-compatible server gets the schema as a json_schema response format, in the body as is
    fmt = body["response_format"]
    assert fmt["type"] == "json_schema" and fmt["json_schema"]["name"] == "Verdict"
    assert fmt["json_schema"]["schema"] == Verdict.model_json_schema()


def test_an_invalid_reply_is_re_asked_once_with_the_validation_error():
    bad = json.dumps({"approved": True, "reason": "x", "score": 42})
    good = json.dumps({"approved": False, "reason": "wrong", "score": 2})
    with FakeOpenAIServer(_replies(bad, good)) as srv:
        r = run(_flow(), "T", models=_profile(srv.url), telemetry=False)
        second = srv.requests[1]["messages"]
    assert r.path == ["Judge", "Rejected"]
    assert second[-2] == {"role": "assistant", "content": bad}
    assert "score: Input should be less than or equal to 10" in second[-1]["content"]
    invalid = [s for s in r.steps if s.output == "llm[invalid]"]
    assert len(invalid) == 1 and "score" in invalid[0].detail["error"] and invalid[0].usage is not None
    assert r.usage().calls == 2  # both calls are paid for and counted


def test_two_invalid_replies_fail_the_state_clearly():
    with FakeOpenAIServer(_replies("not json at all", '{"approved": "maybe"}')) as srv:
        r = run(_flow(), "T", models=_profile(srv.url), telemetry=False, raise_errors=False)
        assert len(srv.requests) == 2
    assert r.stop_reason == "error" and r.exit_state == "Judge"
    assert "StructuredOutputError" in (r.error or "") and "not a valid Verdict after 2 attempts" in r.error
    with FakeOpenAIServer(_replies("nope", "still nope")) as srv, pytest.raises(StructuredOutputError) as exc:
        run(_flow(), "T", models=_profile(srv.url), telemetry=False)
    assert exc.value.state == "Judge" and exc.value.schema == "Verdict" and len(exc.value.errors) == 2


def test_llama_cpp_servers_get_the_schema_to_turn_into_a_grammar():
    fields = _fields(_profile("http://127.0.0.1:9/v1", provider="llamacpp"))
    assert fields["extra_body"]["response_format"] == {"type": "json_object", "schema": Verdict.model_json_schema()}
    assert "grammar" not in fields["extra_body"]
    assert "response_format" not in fields  # AutoGen's own handling of this argument is bypassed


def _fields(profile: ModelProfile) -> dict:
    backends = LLMBackends(ModelAssignment.of(profile))
    return backends.request_fields(profile, LLM(schema=Verdict), Context(task="t", history=History()))


def test_schema_is_checked_when_the_flow_is_defined_and_enters_the_fingerprint():
    with pytest.raises(TypeError, match="not a pydantic model class"):
        LLM(schema=dict)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="cannot be combined with grammar"):
        LLM(schema=Verdict, grammar="root ::= x")

    class Other(BaseModel):
        approved: Literal["yes", "no"]

    plain = Flow("f", initial=State("A", LLM()), transitions=[Transition("A", State("B", final=True))])
    typed = Flow("f", initial=State("A", LLM(schema=Verdict)), transitions=[Transition("A", State("B", final=True))])
    other = Flow("f", initial=State("A", LLM(schema=Other)), transitions=[Transition("A", State("B", final=True))])
    assert len({flow_fingerprint(plain), flow_fingerprint(typed), flow_fingerprint(other)}) == 3
    again = Flow("f", initial=State("A", LLM(schema=Verdict)), transitions=[Transition("A", State("B", final=True))])
    assert flow_fingerprint(again) == flow_fingerprint(typed)


def test_a_fenced_reply_is_read_and_hostile_text_is_refused():
    assert parse_reply(Verdict, '```json\n{"approved": true, "reason": "ok", "score": 1}\n```').score == 1
    with pytest.raises(ValueError):
        parse_reply(Verdict, '{"approved": true, "reason": "ok", "score": 1} and then some')


def test_the_typed_object_survives_a_checkpoint(tmp_path):
    good = json.dumps({"approved": True, "reason": "correct", "score": 8})
    store = SQLiteCheckpointer(tmp_path / "runs.db")
    with FakeOpenAIServer(_replies(good)) as srv:
        r = run(_flow(), "T", models=_profile(srv.url), telemetry=False, checkpointer=store, thread_id="t")
    assert r.stop_reason == "final"
    from stateflow.run_state import RunState

    saved = RunState.from_payload(store.latest("t").payload, where="t")
    assert saved.board.get(Verdict) == Verdict(approved=True, reason="correct", score=8)

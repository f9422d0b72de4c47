"""LLM(schema=...) on the embedded llama.cpp server: the grammar the server derives from the
schema we send (``response_format`` ``json_object`` + ``schema``) is the schema's own, and
llama.cpp parses it (issue 45, part 4).

llama-cpp-python falls back to a grammar for *any* JSON when it cannot convert a schema, silently;
that would drop the constraint, so each schema here must convert. The parse runs in a child
process on the 0.5B model's vocabulary only (tests/backends/local/gbnf_parse.py), no inference.
"""

from __future__ import annotations

import json
from types import SimpleNamespace
from typing import Literal

import pytest
from pydantic import BaseModel, Field

from stateflow.backends.local.schema_grammar import SchemaGrammarError, schema_to_gbnf
from stateflow.structured import response_format
from tests.backends.local.gbnf_parse import grammar_accepts, unparsable

llama_chat_format = pytest.importorskip("llama_cpp.llama_chat_format", reason="llama-cpp-python is not installed")
llama_grammar = pytest.importorskip("llama_cpp.llama_grammar")


class Ticket(BaseModel):
    summary: str = Field(max_length=120)
    severity: Literal["low", "medium", "high"]
    component: Literal["billing", "login", "search", "other"]


class Step(BaseModel):
    action: str
    done: bool


class Plan(BaseModel):
    steps: list[Step] = Field(min_length=1, max_length=4)
    confidence: float
    owner: str | None = None


@pytest.mark.parametrize("model", [Ticket, Plan])
def test_the_servers_grammar_comes_from_the_schema_and_parses(model):
    grammar = llama_chat_format._grammar_for_response_format(response_format(model, "json_object_schema"))
    text = grammar._grammar
    assert text != llama_grammar.JSON_GBNF  # not the silent any-JSON fallback
    for field in model.model_fields:
        assert f'\\"{field}\\"' in text  # every property name is spelled out in the grammar
    if model is Ticket:
        assert '\\"high\\"' in text and '\\"billing\\"' in text  # the enums are the only values
    assert unparsable([text]) == {}


# -- issue 57, item 9: numeric bounds are enforced while decoding ---------------------------------


class Count(BaseModel):
    n: int = Field(ge=0, le=1000)


class Reading(BaseModel):
    celsius: float = Field(ge=-50, le=60)
    samples: list[Count] = Field(max_length=3)
    level: int = Field(gt=0, lt=10)


def test_57_9_the_servers_grammar_bounds_an_integer_that_the_librarys_let_run_to_16_digits():
    library = llama_chat_format._grammar_for_response_format(response_format(Count, "json_object_schema"))._grammar
    ours = schema_to_gbnf(Count.model_json_schema())
    replies = ['{"n": 1000}', '{"n": 3000000000000000}', '{"n": -1}', '{"n": 0}', '{"n": 1001}']
    got = grammar_accepts([(g, r) for g in (library, ours) for r in replies])
    assert got[: len(replies)] == [True, True, True, True, True]  # the library: any integer of <= 16 digits
    assert got[len(replies) :] == [True, False, False, True, False]  # ours: exactly 0..1000


def test_57_9_bounds_hold_in_nested_models_floats_and_exclusive_bounds():
    grammar = schema_to_gbnf(Reading.model_json_schema())
    assert unparsable([grammar]) == {}
    ok = '{"celsius": -40.5, "samples": [{"n": 3}], "level": 9}'
    replies = [
        ok,
        ok.replace('"level": 9', '"level": 10'),  # lt=10
        ok.replace('"level": 9', '"level": 0'),  # gt=0
        ok.replace('"n": 3', '"n": 3000'),  # le=1000 inside a $ref'd model in a list
        ok.replace("-40.5", "100.0"),  # le=60: integral part out of range
        ok.replace("-40.5", "1e9"),  # no exponent around a bound
        ok.replace("-40.5", "60.5"),  # inside the integral part's range: validation's job
    ]
    assert grammar_accepts([(grammar, r) for r in replies]) == [True, False, False, False, False, False, True]
    with pytest.raises(ValueError, match="less than or equal to 60"):
        Reading.model_validate_json(replies[-1])  # which pydantic then refuses (and the run re-asks)


def test_57_9_a_schema_the_converter_cannot_handle_is_refused_not_relaxed_to_any_json():
    odd = {"type": "frobnicate"}
    assert llama_chat_format._grammar_for_json_schema(json.dumps(odd))._grammar == llama_grammar.JSON_GBNF
    with pytest.raises(SchemaGrammarError, match="cannot be turned into a grammar"):
        schema_to_gbnf(odd)
    with pytest.raises(SchemaGrammarError, match="no integer is >= 5 and <= 4"):
        schema_to_gbnf({"type": "integer", "minimum": 5, "maximum": 4})


def test_57_9_the_server_turns_a_schema_request_into_the_bounded_grammar():
    from stateflow.backends.local.server_app import schema_as_grammar

    body = SimpleNamespace(response_format=response_format(Count, "json_object_schema"), grammar=None)
    schema_as_grammar(body)
    assert body.response_format is None  # else the library would build its own grammar over ours
    assert body.grammar == schema_to_gbnf(Count.model_json_schema())
    plain = SimpleNamespace(response_format={"type": "json_object"}, grammar=None)
    schema_as_grammar(plain)
    assert plain == SimpleNamespace(response_format={"type": "json_object"}, grammar=None)

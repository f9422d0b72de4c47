"""LLM(schema=...) on the embedded llama.cpp server: the grammar the server derives from the
schema we send (``response_format`` ``json_object`` + ``schema``) is the schema's own, and
llama.cpp parses it (issue 45, part 4).

llama-cpp-python falls back to a grammar for *any* JSON when it cannot convert a schema, silently;
that would drop the constraint, so each schema here must convert. The parse runs in a child
process on the 0.5B model's vocabulary only (tests/backends/local/gbnf_parse.py), no inference.
"""

from __future__ import annotations

from typing import Literal

import pytest
from pydantic import BaseModel, Field

from stateflow.structured import response_format
from tests.backends.local.gbnf_parse import unparsable

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

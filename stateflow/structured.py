"""Typed structured output: ``LLM(schema=SomeModel)`` asks for a reply as a pydantic object.

The model's JSON schema constrains the reply where the server can enforce it, in the request
field that server reads (:class:`~stateflow.backends.providers.ProviderCapabilities.json_schema`):

* OpenAI-compatible servers (OpenAI, vLLM, Ollama): ``response_format`` of type ``json_schema``;
* llama.cpp servers (the embedded ``local`` model, ``llamacpp``): ``response_format`` of type
  ``json_object`` with the ``schema``: the server converts the schema to a GBNF grammar itself
  (the embedded one with :mod:`stateflow.backends.local.schema_grammar`: structure, types,
  enums, string and list lengths, integer bounds exactly, float bounds on the integral part).

The reply is then parsed and validated into the model object (no grammar enforces everything a
schema says, e.g. float fractions, ``multiple_of``, most string formats or custom validators). A
reply that does not validate is re-asked once with the validation error (:func:`reask_text`); a
second failure fails the state with :class:`~stateflow.errors.StructuredOutputError`. The object
is put on the run's blackboard (``ctx.board.get(SomeModel)``), so conditions read it
(:func:`parsed`), and its JSON travels with the reply's message (``message.meta["parsed"]``).

Example:
    >>> from pydantic import BaseModel
    >>> class Answer(BaseModel):
    ...     value: int
    >>> parse_reply(Answer, '```json\\n{"value": 4}\\n```')
    Answer(value=4)
    >>> response_format(Answer, "json_object_schema")["type"]
    'json_object'
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ValidationError

from stateflow.conditions import Condition
from stateflow.context import Context
from stateflow.errors import StructuredOutputError
from stateflow.messages import Usage

__all__ = [
    "Attempt",
    "SchemaStyle",
    "StructuredReply",
    "ask_structured",
    "parse_reply",
    "parsed",
    "reask_text",
    "response_format",
    "validation_summary",
]

M = TypeVar("M", bound=BaseModel)

#: How a server takes a JSON schema: OpenAI's ``json_schema`` response format, or llama.cpp's
#: ``json_object`` response format carrying the schema.
SchemaStyle = Literal["json_schema", "json_object_schema"]

_FENCE = re.compile(r"^\s*```(?:json)?\s*\n(.*?)\n\s*```\s*$", re.DOTALL)


def response_format(model: type[BaseModel], style: SchemaStyle) -> dict[str, Any]:
    """The ``response_format`` request field asking for ``model``'s JSON schema in ``style``."""
    schema = model.model_json_schema()
    if style == "json_object_schema":
        return {"type": "json_object", "schema": schema}
    return {"type": "json_schema", "json_schema": {"name": model.__name__, "schema": schema}}


def parse_reply(model: type[M], text: str) -> M:
    """``text`` validated into a ``model`` (a Markdown code fence around the JSON is allowed:
    servers that cannot enforce the schema often add one).

    Raises:
        pydantic.ValidationError: the text is not JSON, or not a valid ``model``.
    """
    fenced = _FENCE.match(text)
    return model.model_validate_json(fenced.group(1) if fenced else text.strip())


def validation_summary(err: ValidationError, limit: int = 5) -> str:
    """A short, model-readable account of what failed (the first ``limit`` errors)."""
    parts = []
    for e in err.errors(include_url=False)[:limit]:
        where = ".".join(str(x) for x in e.get("loc", ())) or "(the whole reply)"
        parts.append(f"{where}: {e.get('msg', 'invalid')}")
    more = len(err.errors()) - limit
    return "; ".join(parts) + (f"; and {more} more" if more > 0 else "")


def reask_text(model: type[BaseModel], error: str) -> str:
    """The instruction that re-asks the model after a reply that did not validate."""
    schema = json.dumps(model.model_json_schema(), separators=(",", ":"))
    return (
        f"Your reply is not a valid {model.__name__} object: {error}. Reply again with only one JSON "
        f"object that matches this JSON schema, and nothing else: {schema}"
    )


def parsed(model: type[M], test: Callable[[M], bool] | None = None, name: str | None = None) -> Condition:
    """A condition on the last ``model`` object a state's ``LLM(schema=model)`` produced.

    It holds when the run has such an object and ``test(obj)`` holds (no ``test``: when it
    has one at all).

    >>> from pydantic import BaseModel
    >>> class Verdict(BaseModel):
    ...     approved: bool
    >>> parsed(Verdict, lambda v: v.approved, "approved").name
    'approved'
    """

    def holds(ctx: Context) -> bool:
        obj = ctx.board.get(model)
        return obj is not None and (test is None or bool(test(obj)))

    label = name or (f"parsed {model.__name__}" if test is None else f"{model.__name__}: {test.__name__}")
    return Condition(holds, label)


@dataclass(frozen=True)
class Attempt:
    """One reply to a structured request: its text, usage and validation error (if any)."""

    text: str
    usage: Usage
    error: str | None


@dataclass(frozen=True)
class StructuredReply:
    """The outcome of :func:`ask_structured`: the object, and every attempt (the last one valid)."""

    obj: BaseModel
    attempts: tuple[Attempt, ...]


def ask_structured(
    model: type[BaseModel],
    first: tuple[str, Usage],
    messages: list[dict[str, Any]],
    call: Callable[[list[dict[str, Any]]], tuple[str, Usage]],
    *,
    state: str,
) -> StructuredReply:
    """Validate ``first`` (a reply to ``messages``); if it is not a valid ``model``, re-ask once
    through ``call`` with the reply and the validation error appended.

    Raises:
        StructuredOutputError: the second reply does not validate either.
    """
    attempts: list[Attempt] = []
    text, usage = first
    for turn in range(2):
        try:
            obj = parse_reply(model, text)
        except ValidationError as err:
            error = validation_summary(err)
            attempts.append(Attempt(text, usage, error))
            if turn == 1:
                raise StructuredOutputError(
                    state,
                    model.__name__,
                    [a.error or "" for a in attempts],
                    text,
                    attempts=tuple((a.text, a.usage) for a in attempts),
                ) from err
            again = [
                *messages,
                {"role": "assistant", "content": text},
                {"role": "user", "content": reask_text(model, error)},
            ]
            text, usage = call(again)
            continue
        attempts.append(Attempt(text, usage, None))
        return StructuredReply(obj, tuple(attempts))
    raise AssertionError("unreachable")

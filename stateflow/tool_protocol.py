"""Tools an LLM may call: AutoGen tool objects, OpenAI ``tools`` schemas and the text protocol.

A model whose profile supports function calling gets the tools' OpenAI schemas and answers with
``tool_calls``. Any other model gets :func:`text_protocol_prompt` and calls a tool with a line
``Action: name[{"arg": value}]`` (a tool with one parameter also takes ``Action: name[raw text]``);
the prompt shows each tool's call with its real parameter names. :func:`parse_text_action` reads
the last such line and checks its arguments against the tool's signature. Model output is
hostile: a malformed call is answered with a short observation that says what is wrong and how
the call looks (a small model can act on that; a raw pydantic report it mostly cannot), never an
exception.
"""

from __future__ import annotations

import inspect
import json
import re
import typing
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError, create_model

from stateflow.errors import ConfigError

__all__ = [
    "TEXT_PROTOCOL_STOP",
    "TextAction",
    "ToolSet",
    "parse_text_action",
    "text_protocol_prompt",
    "with_text_protocol",
    "with_text_protocol_stop",
]

_ACTION = re.compile(r"^\s*Action:\s*([A-Za-z_][\w.-]*)\s*\[(.*)\]\s*$")


class ToolSet:
    """The tools of one ``LLM`` output function, as AutoGen ``Tool`` objects keyed by name."""

    def __init__(self, tools: Iterable[Any]):
        from autogen.tools import Tool as AutoGenTool

        self.tools: dict[str, Any] = {}
        for t in tools:
            tool = t if isinstance(t, AutoGenTool) else AutoGenTool(func_or_tool=t)
            if tool.name in self.tools and self.tools[tool.name].func is not tool.func:
                raise ConfigError(f"two different tools are named {tool.name!r}; give one another name")
            self.tools[tool.name] = tool

    def schemas(self) -> list[dict[str, Any]]:
        """OpenAI ``tools`` entries."""
        return [t.tool_schema for t in self.tools.values()]

    def functions(self) -> dict[str, Any]:
        """``{name: callable}`` for an AutoGen executor's function map."""
        return {name: t.func for name, t in self.tools.items()}

    def parameters(self, name: str) -> list[str]:
        """The parameter names of tool ``name``, in signature order."""
        return list(self.tools[name].tool_schema["function"]["parameters"].get("properties", {}))

    def call_template(self, name: str) -> str:
        """How a text-protocol call of tool ``name`` looks, with its real parameter names and a
        ``<type>`` placeholder for each value, e.g. ``multiply[{"a": <number>, "b": <number>}]``."""
        params = self.tools[name].tool_schema["function"]["parameters"].get("properties", {})
        body = ", ".join(f"{json.dumps(p)}: <{spec.get('type', 'value')}>" for p, spec in params.items())
        return f"{name}[{{{body}}}]"

    def arguments_template(self, name: str) -> str:
        """Tool ``name``'s arguments as a JSON object with a ``<type>`` placeholder per value, e.g.
        ``{"a": <number>, "b": <number>}`` (what a function-calling model should send)."""
        return self.call_template(name).removeprefix(f"{name}[").removesuffix("]")

    def native_call_problem(self, name: str, arguments: str | None) -> str | None:
        """Why a function call of tool ``name`` with the JSON text ``arguments`` cannot run, as one
        short line a model can act on; ``None`` when it can (or ``name`` is not one of these tools:
        AutoGen's own "not found" answer says that well enough)."""
        if name not in self.tools:
            return None
        try:
            value = json.loads(arguments or "{}")
        except json.JSONDecodeError:
            value = None
        if not isinstance(value, dict):
            return f"the arguments must be a JSON object: {self.arguments_template(name)}"
        problem = self.check_arguments(name, value)
        return None if problem is None else f"{problem}. Send the arguments as: {self.arguments_template(name)}"

    def check_arguments(self, name: str, arguments: dict[str, Any]) -> str | None:
        """Why ``arguments`` do not fit tool ``name``'s signature (``None`` when they do, or when
        the signature cannot be checked here; the tool's own validation still runs)."""
        model = _arguments_model(self.tools[name].func)
        if model is None:
            return None
        try:
            model.model_validate(arguments)
        except ValidationError as err:
            return "; ".join(_short_problem(e) for e in err.errors()[:3])
        return None


def _arguments_model(func: Callable[..., Any]) -> type[BaseModel] | None:
    """A pydantic model of ``func``'s keyword arguments (unknown keys forbidden), or ``None`` when
    its signature has no plain named parameters to check."""
    try:
        sig = inspect.signature(func)
        hints = typing.get_type_hints(func, include_extras=True)
    except (TypeError, ValueError, NameError):
        return None
    fields: dict[str, Any] = {}
    for p in sig.parameters.values():
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            return None
        default = ... if p.default is p.empty else p.default
        fields[p.name] = (hints.get(p.name, Any), default)
    try:
        return create_model(f"{getattr(func, '__name__', 'tool')}_arguments", __config__=_FORBID, **fields)
    except Exception:  # an annotation pydantic cannot build a validator for: leave it to the tool
        return None


_FORBID = ConfigDict(extra="forbid")


def _short_problem(error: Any) -> str:
    """One pydantic error as a short phrase a model can act on (no URLs, no error codes)."""
    where = ".".join(str(x) for x in error["loc"]) or "arguments"
    kind = error["type"]
    if kind == "missing":
        return f'"{where}" is missing'
    if kind == "extra_forbidden":
        return f'"{where}" is not a parameter'
    got = json.dumps(error.get("input"), default=str)[:40]
    message = str(error["msg"]).split(",")[0].removeprefix("Input should be ")
    return f'"{where}" must be {message} (got {got})'


#: Where a text-protocol reply is cut: a model that writes the observation itself invents it
#: (measured with the embedded 1.5B model: "Observation: The price of a kettle is 15 euros.").
TEXT_PROTOCOL_STOP = "\nObservation:"


def text_protocol_prompt(tools: ToolSet) -> str:
    """The instruction that lets a model without function calling use ``tools``: each tool's
    description and its call with the real parameter names, and the Thought/Action format."""
    lines = ["You can call these tools:"]
    for name, t in tools.tools.items():
        lines.append(f"- {name}: {t.description}")
        lines.append(f"  Action: {tools.call_template(name)}")
    lines += [
        "Reply in this format, one step at a time:",
        "Thought: what you need next",
        "Action: one tool call, written as above with each <...> replaced by a JSON value",
        "Then stop: the result comes back as `Observation: ...`. When you know the answer, reply "
        "`Answer: ...` without an Action line.",
    ]
    return "\n".join(lines)


def with_text_protocol(messages: list[dict[str, Any]], tools: ToolSet) -> list[dict[str, Any]]:
    """``messages`` with :func:`text_protocol_prompt` at the end of the system message (a new
    one first if there is none). Why there and not as a last user turn: the embedded 1.5B model
    answered a trailing protocol turn with an invented ``Observation: 180`` and no call, and
    followed the same text as a system message (calls ``price_of[{"item": "kettle"}]`` first)."""
    protocol = text_protocol_prompt(tools)
    if messages and messages[0].get("role") == "system":
        first = messages[0]
        return [{**first, "content": f"{first.get('content') or ''}\n\n{protocol}".lstrip()}, *messages[1:]]
    return [{"role": "system", "content": protocol}, *messages]


def with_text_protocol_stop(fields: dict[str, Any]) -> dict[str, Any]:
    """Request ``fields`` that also stop at :data:`TEXT_PROTOCOL_STOP`."""
    stops = list(dict.fromkeys([TEXT_PROTOCOL_STOP, *fields.get("stop", ())]))
    return {**fields, "stop": stops}


@dataclass(frozen=True)
class TextAction:
    """A tool call read from a text reply: the tool, its JSON arguments, or why it is invalid."""

    name: str
    arguments: str
    error: str | None = None


def parse_text_action(reply: str, tools: ToolSet) -> TextAction | None:
    """The tool call in the reply's last ``Action:`` line, or ``None`` if it calls no known tool.

    An ``Action:`` naming something else (e.g. the flow's own ``execute[...]``) is not a tool call.
    """
    match = None
    for line in reply.splitlines():
        m = _ACTION.match(line)
        if m:
            match = m
    if match is None or match.group(1) not in tools.tools:
        return None
    name, raw = match.group(1), match.group(2).strip()
    params = tools.parameters(name)
    try:
        value = json.loads(raw) if raw else {}
    except json.JSONDecodeError:
        value = None
    if not isinstance(value, dict):
        if len(params) != 1:
            return TextAction(name, raw, f"write the arguments as a JSON object: Action: {tools.call_template(name)}")
        value = {params[0]: raw}
    problem = tools.check_arguments(name, value)
    if problem is not None:
        return TextAction(name, json.dumps(value), f"{problem}. Call it as: Action: {tools.call_template(name)}")
    return TextAction(name, json.dumps(value))

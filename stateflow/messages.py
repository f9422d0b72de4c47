"""The context history: typed messages appended by output functions.

The history is the StateFlow machine's input: transition rules read it, LLM calls complete it,
tools read it (usually its last LLM message) and append feedback.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from types import MappingProxyType
from typing import Any, overload

__all__ = ["History", "Kind", "Message", "Usage"]


class Kind(StrEnum):
    """What produced a message (the paper's three output kinds)."""

    PROMPT = "prompt"  # a fixed instruction, or the task itself
    LLM = "llm"  # a model completion
    TOOL = "tool"  # feedback from a tool or the environment
    HUMAN = "human"  # a person's answer (the Human output function)


@dataclass(frozen=True)
class Usage:
    """Accounting for one LLM call, or for ``calls`` calls made by one step (a typed reply asked
    twice, a parallel branch re-asked): every call a server answered is counted once.

    ``cached_tokens`` are prompt tokens the server did not evaluate again (OpenAI's
    ``prompt_tokens_details.cached_tokens``; the embedded server reports it too).
    """

    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0
    cost: float = 0.0
    latency_s: float = 0.0
    model: str = ""
    profile: str = ""
    calls: int = 1

    @property
    def evaluated_prompt_tokens(self) -> int:
        """Prompt tokens the server really evaluated (sent minus cached)."""
        return self.prompt_tokens - self.cached_tokens


@dataclass(frozen=True)
class Message:
    """One entry of the context history.

    Attributes:
        role: chat role as an LLM sees it ("user", "assistant" or "system").
        name: who emitted it (agent or tool name).
        state: the StateFlow state whose output function produced it.
        kind: prompt, llm or tool.
        content: the text.
        usage: filled for LLM messages.
        meta: structured facts a tool reports next to its text (e.g. ``ok``, ``done``, ``reward``,
            ``action``); transition rules read them instead of re-parsing the text.
    """

    role: str
    name: str
    state: str
    kind: Kind
    content: str
    usage: Usage | None = None
    meta: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serialisable form (used by traces, reports and result files)."""
        out: dict[str, Any] = {
            "role": self.role,
            "name": self.name,
            "state": self.state,
            "kind": self.kind.value,
            "content": self.content,
        }
        if self.usage is not None:
            out["usage"] = {
                "prompt_tokens": self.usage.prompt_tokens,
                "completion_tokens": self.usage.completion_tokens,
                "cached_tokens": self.usage.cached_tokens,
                "cost": self.usage.cost,
                "latency_s": round(self.usage.latency_s, 6),
                "model": self.usage.model,
                "profile": self.usage.profile,
            }
        if self.meta:
            out["meta"] = {k: _jsonable(v) for k, v in self.meta.items()}
        return out


def _jsonable(value: Any) -> Any:
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    return str(value)


class History:
    """An append-only list of messages with the look-ups transition rules need."""

    __slots__ = ("_messages",)

    def __init__(self, messages: Iterable[Message] | None = None):
        self._messages: list[Message] = list(messages or [])

    def append(self, message: Message) -> None:
        self._messages.append(message)

    def __iter__(self) -> Iterator[Message]:
        return iter(self._messages)

    def __len__(self) -> int:
        return len(self._messages)

    @overload
    def __getitem__(self, index: int) -> Message: ...

    @overload
    def __getitem__(self, index: slice) -> list[Message]: ...

    def __getitem__(self, index: int | slice) -> Message | list[Message]:
        return self._messages[index]

    @property
    def messages(self) -> tuple[Message, ...]:
        return tuple(self._messages)

    def last(self, kind: Kind | str | None = None) -> Message | None:
        """The most recent message, optionally the most recent of a given kind."""
        if kind is None:
            return self._messages[-1] if self._messages else None
        k = Kind(kind)
        for m in reversed(self._messages):
            if m.kind is k:
                return m
        return None

    def of_kind(self, kind: Kind | str) -> list[Message]:
        k = Kind(kind)
        return [m for m in self._messages if m.kind is k]

    def to_list(self) -> list[dict[str, Any]]:
        return [m.to_dict() for m in self._messages]

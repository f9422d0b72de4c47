"""A scripted LLM for tests and benchmarks (opt-in only: never used unless a profile says so).

It plugs into AutoGen as a custom ``ModelClient``, so runs exercise AutoGen's real request path
(``OpenAIWrapper.create``, usage accounting) with replies decided by the script. Every request is
recorded, which lets tests assert exactly what each agent's LLM received.

>>> from stateflow.backends.scripted import ScriptedLLM
>>> llm = ScriptedLLM(["Thought: look\\nAction: execute[SHOW TABLES]"])
>>> llm.reply_to([{"role": "user", "content": "hi"}], {})
'Thought: look\\nAction: execute[SHOW TABLES]'
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from openai.types.chat import ChatCompletion

from stateflow.backends.client_base import ChatCompletionClient
from stateflow.errors import StateFlowError

__all__ = ["ScriptExhausted", "ScriptedClient", "ScriptedLLM", "ScriptedRequest", "make_completion", "word_count"]


class ScriptExhausted(StateFlowError):
    """A scripted LLM was asked for more replies than its script holds."""


@dataclass(frozen=True)
class ScriptedRequest:
    """One request as the scripted model received it (after AutoGen built it)."""

    messages: list[dict[str, Any]]
    params: dict[str, Any] = field(default_factory=dict)


def word_count(text: str) -> int:
    """The scripted backend's token count: whitespace-separated words (deterministic)."""
    return len(text.split())


class ScriptedLLM:
    """Replies from a list (consumed in order) or a function of the request.

    Args:
        replies: a sequence of reply texts, or ``fn(messages, params) -> str``.
        latency_s: sleep this long per call (to simulate a slow model in benchmarks).
        cycle: with a sequence, start over when it is exhausted instead of raising.
    """

    def __init__(
        self,
        replies: Sequence[str] | Callable[[list[dict[str, Any]], dict[str, Any]], str],
        *,
        latency_s: float = 0.0,
        cycle: bool = False,
    ):
        self._replies = replies
        self._latency = latency_s
        self._cycle = cycle
        self._next = 0
        self._lock = threading.Lock()
        self.requests: list[ScriptedRequest] = []

    def reply_to(self, messages: list[dict[str, Any]], params: dict[str, Any]) -> str:
        """Record the request and return the scripted reply."""
        with self._lock:
            self.requests.append(ScriptedRequest([dict(m) for m in messages], dict(params)))
            if callable(self._replies):
                fn = self._replies
                index = None
            else:
                if self._next >= len(self._replies):
                    if not self._cycle or not self._replies:
                        raise ScriptExhausted(
                            f"scripted LLM has no reply #{self._next + 1} (script holds {len(self._replies)})"
                        )
                    self._next = 0
                index = self._next
                self._next += 1
        if self._latency:
            time.sleep(self._latency)
        if index is None:
            return fn(messages, params)  # type: ignore[operator]
        return self._replies[index]  # type: ignore[index]


def make_completion(
    text: str, *, model: str, prompt_tokens: int, completion_tokens: int, cached_tokens: int = 0
) -> ChatCompletion:
    """An OpenAI ``ChatCompletion`` object carrying ``text`` and usage."""
    return ChatCompletion.model_validate(
        {
            "id": f"scripted-{time.monotonic_ns()}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": model,
            "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": text}}],
            "usage": {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens,
                "total_tokens": prompt_tokens + completion_tokens,
                "prompt_tokens_details": {"cached_tokens": cached_tokens},
            },
        }
    )


class ScriptedClient(ChatCompletionClient):
    """AutoGen ``ModelClient`` backed by a :class:`ScriptedLLM`.

    Register it on an ``OpenAIWrapper`` whose config entry has
    ``"model_client_cls": "ScriptedClient"``: ``wrapper.register_model_client(ScriptedClient, script=llm)``.
    """

    def __init__(self, config: dict[str, Any], *, script: ScriptedLLM, price_per_1k: tuple[float, float] = (0, 0)):
        super().__init__(price_per_1k=price_per_1k)
        self._model = config.get("model", "scripted")
        self._script = script

    def create(self, params: dict[str, Any]) -> ChatCompletion:
        messages = list(params.get("messages", []))
        extra = {k: v for k, v in params.items() if k != "messages"}
        text = self._script.reply_to(messages, extra)
        prompt = sum(word_count(str(m.get("content") or "")) for m in messages)
        return make_completion(text, model=self._model, prompt_tokens=prompt, completion_tokens=word_count(text))

"""What every custom AutoGen ``ModelClient`` of ours shares: reading text, usage and cost
from an OpenAI ``ChatCompletion`` (the scripted and the cassette clients return those)."""

from __future__ import annotations

from typing import Any, ClassVar

from openai.types.chat import ChatCompletion

__all__ = ["ChatCompletionClient"]


class ChatCompletionClient:
    """Base of custom clients whose ``create`` returns a ``ChatCompletion``.

    Args:
        price_per_1k: dollars per 1,000 (prompt, completion) tokens.
    """

    RESPONSE_USAGE_KEYS: ClassVar[list[str]] = ["prompt_tokens", "completion_tokens", "total_tokens", "cost", "model"]

    def __init__(self, *, price_per_1k: tuple[float, float] = (0, 0)):
        self._price = price_per_1k

    def message_retrieval(self, response: ChatCompletion) -> list[str]:
        return [c.message.content or "" for c in response.choices]

    def cost(self, response: ChatCompletion) -> float:
        u = response.usage
        if u is None:
            return 0.0
        return (u.prompt_tokens * self._price[0] + u.completion_tokens * self._price[1]) / 1000.0

    @staticmethod
    def get_usage(response: ChatCompletion) -> dict[str, Any]:
        u = response.usage
        return {
            "prompt_tokens": u.prompt_tokens if u else 0,
            "completion_tokens": u.completion_tokens if u else 0,
            "total_tokens": u.total_tokens if u else 0,
            "cost": getattr(response, "cost", 0.0),
            "model": response.model,
        }

"""AutoGen's OpenAI client, with streamed replies that keep their cached-token count.

AutoGen assembles a streamed reply into one ``ChatCompletion`` and copies only
``prompt_tokens`` and ``completion_tokens`` from the stream's usage chunk (OpenAI's last chunk
with ``choices: []``, sent for ``stream_options.include_usage``): ``cached_tokens`` is lost, so a
streamed run would report every prompt token as evaluated. :class:`UsageKeepingClient` reads the
chunks as AutoGen does, keeps the usage chunk's ``prompt_tokens_details`` and puts it back on the
assembled reply.

The client is registered with AutoGen's public custom-client hook (``model_client_cls`` plus
``OpenAIWrapper.register_model_client``) and is otherwise AutoGen's own ``OpenAIClient``.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

from autogen.oai.client import OpenAIClient

__all__ = ["UsageKeepingClient"]


class _KeptUsage(threading.local):
    """The usage chunk of the call running on this thread (one client serves many threads)."""

    usage: Any = None


class _TeeingCompletions:
    """``chat.completions`` of an OpenAI client whose streams note their usage chunk."""

    def __init__(self, inner: Any, kept: _KeptUsage):
        self._inner = inner
        self._kept = kept

    def create(self, *args: Any, **kwargs: Any) -> Any:
        result = self._inner.create(*args, **kwargs)
        return self._tee(result) if kwargs.get("stream") else result

    def _tee(self, chunks: Any) -> Iterator[Any]:
        try:
            for chunk in chunks:
                if not getattr(chunk, "choices", None) and getattr(chunk, "usage", None) is not None:
                    self._kept.usage = chunk.usage
                yield chunk
        finally:
            # An abandoned stream (a cancelled run) closes its HTTP response now, not at the
            # next cycle collection, so the server stops generating.
            close = getattr(chunks, "close", None)
            if close is not None:
                close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


class _TeeingChat:
    def __init__(self, inner: Any, kept: _KeptUsage):
        self._inner = inner
        self.completions = _TeeingCompletions(inner.completions, kept)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


class _TeeingOpenAI:
    """An ``openai.OpenAI`` client seen through: only ``chat.completions.create`` is wrapped."""

    def __init__(self, inner: Any, kept: _KeptUsage):
        self._inner = inner
        self.chat = _TeeingChat(inner.chat, kept)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


class UsageKeepingClient(OpenAIClient):
    """AutoGen's ``OpenAIClient`` whose streamed replies keep ``prompt_tokens_details``.

    Thread-safe as the OpenAI client is: the usage of a call is kept per thread, and a call runs
    on one thread from request to assembled reply.

    Args:
        config: the ``config_list`` entry (AutoGen passes it; the connection comes from ``openai_client``).
        openai_client: the ``openai.OpenAI`` client to send the requests with.
    """

    def __init__(self, config: dict[str, Any], *, openai_client: Any):
        self._kept = _KeptUsage()
        super().__init__(_TeeingOpenAI(openai_client, self._kept))  # type: ignore[arg-type]
        self.config = config

    def create(self, params: dict[str, Any]) -> Any:
        """AutoGen's ``create``; a streamed reply gets the usage chunk's token details back."""
        # AutoGen hands a custom client its config's marker too; it is not a request field
        params = {k: v for k, v in params.items() if k != "model_client_cls"}
        self._kept.usage = None
        response = super().create(params)
        kept, self._kept.usage = self._kept.usage, None
        details = getattr(kept, "prompt_tokens_details", None)
        if details is not None and getattr(response, "usage", None) is not None:
            response.usage.prompt_tokens_details = details
        return response

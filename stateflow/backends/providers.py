"""What each model provider can do, declared once.

Every decision that depends on the provider (whether a grammar can be sent and in which request
field, whether a trailing assistant message can be continued, whether texts can be scored by
their log-probabilities, whether OpenAI function calling is on by default, how many stop
sequences a request may carry) reads the :class:`ProviderCapabilities` record of that provider
here, never a provider name written elsewhere.

>>> capabilities("vllm").grammar
'structured_outputs'
>>> capabilities("openai").grammar is None
True
"""

from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType
from typing import Final, Literal

__all__ = ["PROVIDERS", "ConstraintField", "Prefill", "PromptLogprobs", "ProviderCapabilities", "capabilities"]

#: How a decoding constraint travels: llama.cpp's ``grammar`` field (a regex is converted to
#: GBNF first), vLLM's ``structured_outputs`` (grammar or regex natively), or not at all.
ConstraintField = Literal["grammar", "structured_outputs"]
#: How a trailing assistant message is continued: the server continues it
#: (``continue_final_message``) or the client sends it finished and drops a repeated prefix.
Prefill = Literal["continue", "merge"]
#: How texts are scored by likelihood: in-process on the same GGUF, through an endpoint that
#: echoes prompt log-probabilities, or not at all.
PromptLogprobs = Literal["in_process", "echo", "none"]


@dataclass(frozen=True)
class ProviderCapabilities:
    """What one provider's servers accept.

    Attributes:
        provider: the provider name used in profiles.
        grammar: the request field a GBNF grammar/regex goes in; ``None``: constraints cannot
            be sent (they are then monitor-only).
        native_regex: the server takes a regex as is (else it is converted to GBNF).
        prefill: how a trailing assistant message is continued.
        prompt_logprobs: how texts can be scored (the PASS summariser's likelihood choice).
        function_calling: whether OpenAI ``tools`` are on by default (a profile may override).
        max_stop: most stop sequences one request may carry (``None``: no limit known).
        json_schema: how the server takes a JSON schema for the reply (``LLM(schema=...)``):
            OpenAI's ``json_schema`` response format, llama.cpp's ``json_object`` response format
            carrying the schema (converted to a grammar by the server), or ``None`` (the reply
            is only validated).
        managed: the endpoint is a server this process starts (its URL is known only then).
        test_double: the provider is a test double that never touches the network.
    """

    provider: str
    grammar: ConstraintField | None = None
    native_regex: bool = False
    prefill: Prefill = "merge"
    prompt_logprobs: PromptLogprobs = "echo"
    function_calling: bool = False
    max_stop: int | None = None
    json_schema: Literal["json_schema", "json_object_schema"] | None = "json_schema"
    managed: bool = False
    test_double: bool = False


_TABLE: Final = MappingProxyType(
    {
        c.provider: c
        for c in (
            # Any OpenAI-compatible server; OpenAI's own API takes at most 4 stop sequences and
            # returns no prompt log-probabilities (see capabilities(..., own_api=True)).
            ProviderCapabilities("openai", function_calling=True, max_stop=4),
            ProviderCapabilities("vllm", grammar="structured_outputs", native_regex=True, prefill="continue"),
            ProviderCapabilities("ollama", function_calling=True),
            ProviderCapabilities("llamacpp", grammar="grammar", json_schema="json_object_schema"),
            ProviderCapabilities(
                "local", grammar="grammar", prompt_logprobs="in_process", json_schema="json_object_schema", managed=True
            ),
            ProviderCapabilities("scripted", prompt_logprobs="none", test_double=True),
            # a replay cassette matches requests as recorded: the schema field is part of them
            ProviderCapabilities("replay", prompt_logprobs="none", test_double=True),
        )
    }
)

#: Every provider a profile may name, in documentation order.
PROVIDERS: Final[tuple[str, ...]] = tuple(_TABLE)

_OPENAI_OWN_API: Final = ProviderCapabilities("openai", function_calling=True, max_stop=4, prompt_logprobs="none")


def capabilities(provider: str, *, own_api: bool = False) -> ProviderCapabilities:
    """The capabilities of ``provider``.

    Args:
        provider: a provider name (see :data:`PROVIDERS`).
        own_api: for ``openai``: the endpoint is OpenAI's own API (a profile without
            ``base_url``), not merely an OpenAI-compatible server.

    Raises:
        KeyError: ``provider`` is unknown (profiles validate their provider when built, so this
            only happens for names that never went through a profile).
    """
    if provider == "openai" and own_api:
        return _OPENAI_OWN_API
    try:
        return _TABLE[provider]
    except KeyError:
        raise KeyError(f"unknown provider {provider!r}; known: {', '.join(PROVIDERS)}") from None

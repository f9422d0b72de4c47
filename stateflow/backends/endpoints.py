"""From a :class:`~stateflow.profiles.ModelProfile` to an AutoGen config entry.

AutoGen's ``OpenAIWrapper`` does the actual HTTP, retries and usage accounting; this module only
translates a profile into the config entry it expects, and maps output constraints (GBNF grammar
or regex) onto the request field each server family understands.
"""

from __future__ import annotations

from typing import Any, ClassVar

from stateflow.profiles import ModelProfile

__all__ = ["ConstraintSupport", "config_entry", "constraint_fields", "sampling_fields"]


class ConstraintSupport:
    """How a provider takes a decoding constraint (``None``: it does not, monitor-only)."""

    GRAMMAR_FIELD: ClassVar[dict[str, str]] = {"local": "grammar", "llamacpp": "grammar"}
    VLLM = "vllm"


def config_entry(profile: ModelProfile, *, base_url: str | None = None) -> dict[str, Any]:
    """The AutoGen ``config_list`` entry for ``profile``: how to connect, and prices.

    Sampling fields are deliberately absent: AutoGen merges a call's arguments *under* the
    config entry (``{**call, **entry}``), so anything set here could not be changed per call.
    They go with each request instead (:func:`sampling_fields`).

    Args:
        profile: the model profile.
        base_url: overrides ``profile.base_url`` (the managed local server's URL is only known
            once it runs).
    """
    entry: dict[str, Any] = {
        "model": profile.model,
        "api_key": profile.api_key(),
        "timeout": profile.timeout,
        "max_retries": profile.max_retries,
        # AutoGen prices are per 1k tokens (prompt, completion); unknown models cost 0 otherwise.
        "price": [profile.price_per_1k[0], profile.price_per_1k[1]],
    }
    url = base_url or profile.base_url
    if url:
        entry["base_url"] = url
    return entry


def sampling_fields(profile: ModelProfile) -> dict[str, Any]:
    """The request fields every call of ``profile`` sends (temperature, limits, extras)."""
    fields: dict[str, Any] = {"temperature": profile.temperature}
    if profile.max_tokens is not None:
        fields["max_tokens"] = profile.max_tokens
    if profile.stop:
        fields["stop"] = list(profile.stop)
    if profile.extra_body:
        fields["extra_body"] = dict(profile.extra_body)
    return fields


def constraint_fields(profile: ModelProfile, *, grammar: str | None, regex: str | None) -> dict[str, Any] | None:
    """Request fields that enforce ``grammar``/``regex`` on this provider, or None if unsupported.

    * llama.cpp (embedded ``local`` or external ``llamacpp``): ``{"grammar": GBNF}``; a regex
      is converted to GBNF first.
    * vLLM: ``{"structured_outputs": {"grammar": ...}}`` or ``{"structured_outputs": {"regex": ...}}``.
    * OpenAI, Ollama and the test doubles: not sent (returns None); the caller warns once that
      the constraint is only checked by a monitor, if any.
    """
    if grammar is None and regex is None:
        return {}
    if profile.provider in ConstraintSupport.GRAMMAR_FIELD:
        if grammar is None:
            from stateflow.backends.local import regex_to_gbnf

            grammar = regex_to_gbnf(regex or "")
        return {ConstraintSupport.GRAMMAR_FIELD[profile.provider]: grammar}
    if profile.provider == ConstraintSupport.VLLM:
        return {"structured_outputs": {"grammar": grammar} if grammar is not None else {"regex": regex}}
    return None

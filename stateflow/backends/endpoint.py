"""From a :class:`~stateflow.profiles.ModelProfile` to a ready endpoint, for every LLM stack.

Both ways StateFlow calls a model go through one :class:`Endpoint`: the AutoGen agents of a run
(:mod:`stateflow.backends.autogen_client` builds their ``OpenAIWrapper`` from
:meth:`Endpoint.config_entry`) and the spec decoding monitor's completer
(:class:`~stateflow.spec.completer.OpenAICompleter` calls :meth:`Endpoint.openai_client`). The
endpoint owns everything that used to be decided twice:

* where to connect: base URL (the managed local server is started here), API key, model;
* the connection: a shared ``httpx`` pool (:class:`~stateflow.backends.http.HttpClients`), the
  profile's timeout and ``max_retries`` (the ``openai`` client retries timeouts, 408/409/429 and
  5xx with exponential back-off);
* the request: sampling fields, stop sequences (profile and call merged, capped at the
  provider's limit), decoding constraints in the provider's field;
* the answer: usage (prompt, completion, cached tokens) and its cost under the profile's prices;
* failures: one :class:`~stateflow.errors.LLMError` naming the profile, with the managed local
  server's crash report (exit signal, log tail) when that is why the call failed.

What a provider accepts is read from :mod:`stateflow.backends.providers`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from stateflow.backends.providers import ProviderCapabilities, capabilities
from stateflow.errors import LLMError, StateFlowError
from stateflow.messages import Usage
from stateflow.profiles import ModelProfile

if TYPE_CHECKING:
    import httpx
    from openai import OpenAI

    from stateflow.backends.http import HttpClients

__all__ = ["Endpoint", "open_endpoint"]


@dataclass(frozen=True)
class Endpoint:
    """A profile made ready to call (build it with :func:`open_endpoint`).

    Attributes:
        profile: the model profile.
        base_url: the resolved endpoint root (``None``: OpenAI's own API, or a test double).
        capabilities: what the profile's provider accepts.
        http_client: the shared connection pool for ``base_url``, if the caller gave one.
    """

    profile: ModelProfile
    base_url: str | None
    capabilities: ProviderCapabilities
    http_client: httpx.Client | None = None

    # -- connecting ---------------------------------------------------------------------------

    def config_entry(self) -> dict[str, Any]:
        """The AutoGen ``config_list`` entry: how to connect, retries and prices.

        Sampling fields are deliberately absent: AutoGen merges a call's arguments *under* the
        config entry (``{**call, **entry}``), so anything set here could not change per call.
        They go with each request instead (:meth:`sampling_fields`).
        """
        p = self.profile
        entry: dict[str, Any] = {
            "model": p.model,
            "api_key": p.api_key(),
            "timeout": p.timeout,
            "max_retries": p.max_retries,
            # AutoGen prices are per 1k tokens (prompt, completion); unknown models cost 0 otherwise.
            "price": [p.price_per_1k[0], p.price_per_1k[1]],
        }
        if self.base_url:
            entry["base_url"] = self.base_url
        if self.http_client is not None:
            entry["http_client"] = self.http_client
        return entry

    def openai_client(self) -> OpenAI:
        """An ``openai.OpenAI`` client on this endpoint (shared pool, timeout, retries)."""
        from openai import OpenAI

        p = self.profile
        return OpenAI(
            base_url=self.base_url,
            api_key=p.api_key(),
            timeout=p.timeout,
            max_retries=p.max_retries,
            http_client=self.http_client,
        )

    # -- requests -----------------------------------------------------------------------------

    def sampling_fields(self) -> dict[str, Any]:
        """The request fields every call of this profile sends (temperature, limits, extras)."""
        p = self.profile
        fields: dict[str, Any] = {"temperature": p.temperature}
        if p.max_tokens is not None:
            fields["max_tokens"] = p.max_tokens
        if p.stop:
            fields["stop"] = self.stops(())
        if p.seed is not None:
            fields["seed"] = p.seed
        if p.extra_body:
            fields["extra_body"] = dict(p.extra_body)
        return fields

    def stops(self, call: Sequence[str]) -> list[str]:
        """The profile's stop sequences merged with a call's own (duplicates dropped).

        When the provider caps the count (OpenAI: 4), the call's own sequences are kept first:
        they are what the caller needs (e.g. the monitor's state texts); the monitor still splits
        on every state text itself.
        """
        merged = list(dict.fromkeys([*self.profile.stop, *call]))
        cap = self.capabilities.max_stop
        if cap is None or len(merged) <= cap:
            return merged
        own = list(dict.fromkeys(call))[:cap]
        return own + [s for s in self.profile.stop if s not in own][: cap - len(own)]

    @property
    def supports_constraints(self) -> bool:
        """Whether grammars/regexes reach the server (else they are monitor-only)."""
        return self.capabilities.grammar is not None

    def constraint_fields(self, *, grammar: str | None, regex: str | None) -> dict[str, Any] | None:
        """Request fields that enforce ``grammar``/``regex`` here; ``{}`` for no constraint,
        ``None`` when the provider takes none (the caller warns that it is monitor-only).

        * llama.cpp (embedded ``local`` or external ``llamacpp``): ``{"grammar": GBNF}``; a regex
          is converted to GBNF first.
        * vLLM: ``{"structured_outputs": {"grammar": ...}}`` or ``{"structured_outputs": {"regex": ...}}``.
        """
        if grammar is None and regex is None:
            return {}
        where = self.capabilities.grammar
        if where is None:
            return None
        if where == "structured_outputs":
            return {where: {"grammar": grammar} if grammar is not None else {"regex": regex}}
        if grammar is None:
            from stateflow.backends.local import regex_to_gbnf

            grammar = regex_to_gbnf(regex or "")
        return {where: grammar}

    # -- answers ------------------------------------------------------------------------------

    def usage(self, response: Any, latency_s: float) -> Usage:
        """The accounting of one ``ChatCompletion``: tokens (cached included) and cost."""
        u = getattr(response, "usage", None)
        prompt = int(getattr(u, "prompt_tokens", 0) or 0)
        completion = int(getattr(u, "completion_tokens", 0) or 0)
        details = getattr(u, "prompt_tokens_details", None)
        cached = int(getattr(details, "cached_tokens", 0) or 0) if details is not None else 0
        p = self.profile
        return Usage(
            prompt_tokens=prompt,
            completion_tokens=completion,
            cached_tokens=cached,
            cost=p.cost(prompt, completion),
            latency_s=latency_s,
            model=str(getattr(response, "model", p.model) or p.model),
            profile=p.name,
        )

    def error(self, err: BaseException, what: str = "model call") -> LLMError:
        """The :class:`LLMError` for a failed call (after the client's retries).

        For the managed local server, a crash is the likely cause of a refused connection: its
        exit signal and log tail are added to the message (the next call restarts it).
        """
        p = self.profile
        message = f"{what} to profile {p.name!r} failed: {type(err).__name__}: {err}"
        if self.capabilities.managed:
            from stateflow.backends.local import check_server

            try:
                check_server(p)
            except StateFlowError as crash:
                message = f"{message}; {crash}"
        return LLMError(message, profile=p.name)


def open_endpoint(profile: ModelProfile, *, http: HttpClients | None = None) -> Endpoint:
    """The ready endpoint for ``profile``.

    Args:
        profile: the model profile.
        http: shared connection pools; the endpoint takes the pool of its base URL (test
            doubles never connect and take none).

    Raises:
        ConfigError: the API key is missing (OpenAI's own API), or the local model is unusable.
        LocalModelError: the managed local server cannot start.
    """
    caps = capabilities(profile.provider, own_api=profile.base_url is None)
    if caps.test_double:
        return Endpoint(profile, None, caps)
    base_url = profile.base_url
    if caps.managed:
        from stateflow.backends.local import resolve_endpoint

        base_url = resolve_endpoint(profile)
    profile.api_key()  # a missing key is a configuration error now, not a failed request later
    client = http.get(base_url, profile.timeout) if http is not None else None
    return Endpoint(profile, base_url, caps, client)

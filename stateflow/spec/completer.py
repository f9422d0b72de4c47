"""The minimal text-completion protocol the decoding monitor drives, and two implementations.

Contract of :meth:`Completer.complete`: given chat ``messages``, return the model's next text,
ending at the first of the ``stop`` sequences (excluded) or after ``max_tokens`` tokens. When the
last message has role ``assistant``, the result *continues* that message (prefill).

* :class:`OpenAICompleter` talks to any OpenAI-compatible server through the endpoint adapter
  shared with the AutoGen runtime (:mod:`stateflow.backends.endpoint`; the embedded ``local``
  model included).
* :class:`ScriptedCompleter` replays scripted model outputs and applies ``stop`` and
  ``max_tokens`` itself (one whitespace-separated word = one token). It is a test double:
  nothing selects it unless a caller constructs it.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol, runtime_checkable

from stateflow.backends.endpoint import Endpoint, open_endpoint
from stateflow.backends.providers import capabilities
from stateflow.errors import ConfigError, StateFlowError
from stateflow.profiles import ModelProfile

if TYPE_CHECKING:
    from stateflow.backends.http import HttpClients

__all__ = ["Completer", "Completion", "CompletionRequest", "OpenAICompleter", "ScriptedCompleter", "completer_for"]


@dataclass(frozen=True)
class Completion:
    """One completion.

    Attributes:
        text: the generated text (stop sequence excluded).
        prompt_tokens, completion_tokens: accounting as reported by the server.
        finish_reason: ``"stop"`` (a stop sequence or the end of the model's turn) or
            ``"length"`` (``max_tokens`` reached).
        stop_sequence: which stop sequence ended the text, when the server says (vLLM does,
            OpenAI and llama.cpp do not); ``None`` when unknown or when the model just ended.
        cached_tokens: prompt tokens the server did not evaluate again (its prompt cache).
        cost: dollars under the profile's prices (``0.0`` for scripted completions).
    """

    text: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    finish_reason: str = "stop"
    stop_sequence: str | None = None
    cached_tokens: int = 0
    cost: float = 0.0


@runtime_checkable
class Completer(Protocol):
    """What the monitor needs from a model."""

    def complete(
        self, messages: list[dict[str, Any]], *, stop: Sequence[str], max_tokens: int, grammar: str | None = None
    ) -> Completion:
        """Complete ``messages`` (continuing a trailing assistant message); see the module doc."""
        ...


@dataclass(frozen=True)
class CompletionRequest:
    """A request as a :class:`ScriptedCompleter` received it."""

    messages: list[dict[str, Any]]
    stop: tuple[str, ...]
    max_tokens: int
    grammar: str | None


_WORD = re.compile(r"\S+")


class ScriptedCompleter:
    """Scripted model outputs (test double).

    Args:
        outputs: texts returned in order, one per call, or ``fn(request) -> str``.
        supports_grammar: whether the monitor may send grammars (they are recorded, not applied).
        honour_stop: apply stop sequences (``False`` mimics servers that drop some, e.g. OpenAI
            keeps only four).

    The scripted text is what the "model" wants to write; ``stop`` and ``max_tokens`` are then
    applied as a server would (``stop_sequence`` is reported, as vLLM does).
    """

    def __init__(
        self,
        outputs: Sequence[str] | Callable[[CompletionRequest], str],
        *,
        supports_grammar: bool = False,
        honour_stop: bool = True,
    ):
        self.honour_stop = honour_stop
        self._outputs = outputs
        self._next = 0
        self._lock = threading.Lock()
        self.supports_grammar = supports_grammar
        self.requests: list[CompletionRequest] = []

    def complete(
        self, messages: list[dict[str, Any]], *, stop: Sequence[str], max_tokens: int, grammar: str | None = None
    ) -> Completion:
        req = CompletionRequest([dict(m) for m in messages], tuple(stop), max_tokens, grammar)
        with self._lock:
            self.requests.append(req)
            if callable(self._outputs):
                text = self._outputs(req)
            else:
                if self._next >= len(self._outputs):
                    raise StateFlowError(
                        f"scripted completer has no output #{self._next + 1} (script holds {len(self._outputs)})"
                    )
                text = self._outputs[self._next]
                self._next += 1
        hit: str | None = None
        cut = len(text)
        for s in stop if self.honour_stop else ():
            i = text.find(s)
            if 0 <= i < cut:
                cut, hit = i, s
        words = list(_WORD.finditer(text[:cut]))
        reason = "stop"
        if len(words) > max_tokens:
            cut, hit, reason = words[max_tokens - 1].end(), None, "length"
            words = words[:max_tokens]
        prompt = sum(len(_WORD.findall(str(m.get("content") or ""))) for m in messages)
        return Completion(text[:cut], prompt, len(words), reason, hit)


@dataclass
class OpenAICompleter:
    """A :class:`Completer` over one :class:`~stateflow.backends.endpoint.Endpoint` (any
    OpenAI-compatible server, the embedded ``local`` model included): the profile's retries,
    the shared HTTP pool the endpoint was opened with, stop merging, usage and cost all come
    from the endpoint, as for the AutoGen agents of a run.

    Args:
        endpoint: the ready endpoint (:func:`~stateflow.backends.endpoint.open_endpoint`, or
            :func:`completer_for` which opens it).
        prefill: how a trailing assistant message is continued. ``"continue"`` asks the server
            to continue it (``continue_final_message``: vLLM, SGLang); ``"merge"`` (works
            everywhere) sends it as a finished message and, when the reply starts by repeating
            the message's unfinished last line, drops the repeat. Default: the provider's
            declared capability (:mod:`stateflow.backends.providers`).

    Grammars are sent only to servers that take them (llama.cpp, vLLM); elsewhere the monitor's
    checks are the only enforcement.
    """

    endpoint: Endpoint
    prefill: Literal["continue", "merge"] | None = None
    _client: Any = field(default=None, init=False, repr=False)

    @property
    def profile(self) -> ModelProfile:
        """The endpoint's model profile."""
        return self.endpoint.profile

    @property
    def supports_grammar(self) -> bool:
        """Whether grammars reach the server."""
        return self.endpoint.supports_constraints

    def _get_client(self) -> Any:
        if self._client is None:
            self._client = self.endpoint.openai_client()
        return self._client

    def complete(
        self, messages: list[dict[str, Any]], *, stop: Sequence[str], max_tokens: int, grammar: str | None = None
    ) -> Completion:
        ep = self.endpoint
        prefill = self.prefill or ep.capabilities.prefill
        msgs = [dict(m) for m in messages]
        body: dict[str, Any] = dict(self.profile.extra_body)
        partial = ""
        if msgs and msgs[-1].get("role") == "assistant":
            if prefill == "continue":
                body.update({"continue_final_message": True, "add_generation_prompt": False})
            else:
                partial = str(msgs[-1].get("content") or "").rsplit("\n", 1)[-1]
        if grammar is not None:
            body.update(ep.constraint_fields(grammar=grammar, regex=None) or {})
        stops = ep.stops(stop)
        t0 = time.perf_counter()
        try:
            resp = self._get_client().chat.completions.create(
                model=self.profile.model,
                messages=msgs,
                max_tokens=max_tokens,
                temperature=self.profile.temperature,
                stop=stops or None,
                extra_body=body or None,
            )
        except Exception as err:
            raise ep.error(err, "completion") from err
        usage = ep.usage(resp, time.perf_counter() - t0)
        choice = resp.choices[0]
        text = choice.message.content or ""
        if partial.strip() and text.startswith(partial.strip()):
            text = text[len(partial.strip()) :]
        stop_reason = getattr(choice, "stop_reason", None)
        return Completion(
            text=text,
            prompt_tokens=usage.prompt_tokens,
            completion_tokens=usage.completion_tokens,
            finish_reason="length" if choice.finish_reason == "length" else "stop",
            stop_sequence=stop_reason if isinstance(stop_reason, str) else None,
            cached_tokens=usage.cached_tokens,
            cost=usage.cost,
        )


def completer_for(
    profile: ModelProfile,
    *,
    prefill: Literal["continue", "merge"] | None = None,
    http: HttpClients | None = None,
) -> OpenAICompleter:
    """An :class:`OpenAICompleter` for ``profile``; for ``local`` profiles the embedded server is
    started (or reused) and its URL used.

    Args:
        profile: the model profile.
        prefill: overrides the provider's way of continuing a trailing assistant message.
        http: shared connection pools (a run's ``ctx.http``); default: a client of its own.

    Raises:
        ConfigError: the profile is a test double (``scripted``/``replay``); construct a
            :class:`ScriptedCompleter` explicitly instead.
    """
    if capabilities(profile.provider).test_double:
        raise ConfigError(
            f"profile {profile.name!r} is a {profile.provider} test double; pass a ScriptedCompleter explicitly"
        )
    return OpenAICompleter(open_endpoint(profile, http=http), prefill=prefill)

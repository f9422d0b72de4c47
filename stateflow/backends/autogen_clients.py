"""The AutoGen side of a run's model calls: one ``OpenAIWrapper`` per profile, built from its
:class:`~stateflow.backends.endpoint.Endpoint`, plus the run's opt-in test doubles (scripted
replies, cassettes).

AutoGen's wrapper does the HTTP (through the endpoint's shared pool, with the profile's
retries); the endpoint supplies the request fields, parses usage and cost, and wraps failures.
"""

from __future__ import annotations

import gc
import json
import threading
import time
import warnings
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import httpx
from autogen import Agent, OpenAIWrapper

from stateflow.backends.call_log import CallLog, RecordedCall, messages_key
from stateflow.backends.cassette import Cassette, RecordingClient, ReplayClient
from stateflow.backends.endpoint import Endpoint, open_endpoint
from stateflow.backends.http import HttpClients
from stateflow.backends.lean_openai import LeanChatClient
from stateflow.backends.scripted import ScriptedClient, ScriptedLLM
from stateflow.backends.stream_usage import UsageKeepingClient
from stateflow.errors import ConfigError, LLMError, RunCancelled, StateFlowError
from stateflow.messages import Usage
from stateflow.profiles import ModelAssignment, ModelProfile

if TYPE_CHECKING:
    from stateflow.context import Context
    from stateflow.emitter import Emitter
    from stateflow.outputs import LLM
    from stateflow.state_agent import StateAgent

__all__ = ["ConstraintWarning", "LLMBackends"]

# Serializes the collections that close cancelled streams (see ``_streamed``). CPython's
# ``gc.collect()`` returns at once, collecting nothing, while another thread's collection runs;
# two streams cancelled together (parallel branches, many served runs leaving at once) would
# then leave one stream open until some later collection. One collector per process, so one lock.
_COLLECTING = threading.Lock()


class ConstraintWarning(UserWarning):
    """A decoding constraint cannot be sent to a provider; it is monitor-only there."""


class LLMBackends:
    """One AutoGen ``OpenAIWrapper`` per profile for a run, plus the run's opt-in test doubles.

    Args:
        assignment: which profile serves which state.
        scripts: ``{profile name: ScriptedLLM}`` for profiles with ``provider="scripted"``.
        cassette: record/replay every call of this run.
        http: shared HTTP connection pools (reused across runs).
        calls: keeps every call of the run, and answers its first calls from a recording
            (:mod:`stateflow.backends.call_log`).
    """

    def __init__(
        self,
        assignment: ModelAssignment,
        scripts: Mapping[str, ScriptedLLM] | None = None,
        cassette: Cassette | None = None,
        http: HttpClients | None = None,
        calls: CallLog | None = None,
    ):
        self.http = http
        self.calls = calls
        # The state whose profile was resolved last on this thread: every model call follows the
        # resolution of its state's profile on the same thread (output functions and rule judges
        # alike), so this names the asking state. Per thread: parallel branches (a subflow branch
        # beside an LLM branch) resolve profiles of different states at once.
        self._asking = threading.local()
        self.assignment = assignment
        self.scripts = dict(scripts or {})
        self.cassette = cassette
        self._endpoints: dict[str, Endpoint] = {}
        self._wrappers: dict[str, OpenAIWrapper] = {}
        self._warned: set[str] = set()
        #: set by a streamed run: model calls then stream (SSE) and report their token deltas
        self.emitter: Emitter | None = None

    def profile(self, state: str, explicit: str | None = None) -> ModelProfile:
        """The profile serving ``state`` (or the ``explicit`` profile name)."""
        self._asking.state = state
        return self.assignment.profile_for(state, explicit)

    def endpoint(self, profile: ModelProfile) -> Endpoint:
        """The (cached) ready endpoint of ``profile``; starts the local server if needed."""
        ep = self._endpoints.get(profile.name)
        if ep is None:
            # A cassette's clients build their own connections (recording) or none (replay).
            ep = open_endpoint(profile, http=self.http if self.cassette is None else None)
            self._endpoints[profile.name] = ep
        return ep

    def wrapper(self, profile: ModelProfile) -> OpenAIWrapper:
        """The (cached) AutoGen client for ``profile``."""
        w = self._wrappers.get(profile.name)
        if w is not None:
            return w
        entry = self.endpoint(profile).config_entry()
        if profile.provider == "scripted":
            script = self.scripts.get(profile.name)
            if script is None:
                raise ConfigError(
                    f"profile {profile.name!r} is scripted but no script was given; "
                    "pass scripts={name: ScriptedLLM(...)}"
                )
            w = OpenAIWrapper(config_list=[{**entry, "model_client_cls": "ScriptedClient"}], cache_seed=None)
            w.register_model_client(ScriptedClient, script=script, price_per_1k=profile.price_per_1k)
        elif profile.provider == "replay" and (self.cassette is None or self.cassette.mode != "replay"):
            # A replay profile has no endpoint: without a replay cassette it would silently
            # become a call to OpenAI's API.
            raise ConfigError(
                f"profile {profile.name!r} is a replay test double but the run has no replay cassette; "
                "pass cassette=Cassette(path, 'replay')"
            )
        elif self.cassette is not None:
            cls = RecordingClient if self.cassette.mode == "record" else ReplayClient
            w = OpenAIWrapper(config_list=[{**entry, "model_client_cls": cls.__name__}], cache_seed=None)
            w.register_model_client(cls, cassette=self.cassette, price_per_1k=profile.price_per_1k)
        else:
            w = self._openai_wrapper(profile, entry)
        self._wrappers[profile.name] = w
        return w

    def _openai_wrapper(self, profile: ModelProfile, entry: dict[str, Any]) -> OpenAIWrapper:
        """AutoGen's client for a real endpoint, shared by every run on the same pools.

        Why shared: building one costs ~4 ms of CPU, half of a short run's own CPU. Sharing is
        safe: ``openai.OpenAI`` and ``httpx.Client`` are thread-safe, and what ``OpenAIWrapper``
        keeps between calls is bookkeeping (usage totals, a bounded buffer of response ids) that
        StateFlow does not read; each reply's accounting comes from the reply itself.
        """
        ep = self.endpoint(profile)

        def build() -> OpenAIWrapper:
            # AutoGen's OpenAI client, except that a streamed reply keeps its cached-token count
            # (AutoGen's stream assembly drops it)
            if profile.uses_lean_client():
                # plain JSON on the shared pool (half the CPU per call); streams go through
                # AutoGen's client, which LeanChatClient is handed explicitly
                http_client = entry.get("http_client") or httpx.Client(timeout=profile.timeout)
                stream = UsageKeepingClient(entry, openai_client=ep.openai_client())
                w = OpenAIWrapper(config_list=[{**entry, "model_client_cls": LeanChatClient.__name__}], cache_seed=None)
                w.register_model_client(LeanChatClient, http_client=http_client, stream_client=stream)
                return w
            w = OpenAIWrapper(config_list=[{**entry, "model_client_cls": UsageKeepingClient.__name__}], cache_seed=None)
            w.register_model_client(UsageKeepingClient, openai_client=ep.openai_client())
            return w

        if self.http is None:
            return build()
        # everything the client is built from: the connection settings, the key and the pool
        settings = json.dumps({k: v for k, v in entry.items() if k != "http_client"}, sort_keys=True, default=str)
        # which client it wraps is part of the key: two profiles may differ in nothing else
        key = ("autogen-openai-wrapper", settings, id(entry.get("http_client")), profile.uses_lean_client())
        return self.http.shared(key, build)

    def request_fields(self, profile: ModelProfile, out: LLM, ctx: Context) -> dict[str, Any]:
        """Per-call request fields: the profile's sampling settings, the output function's stop
        sequences and its decoding constraint, if any."""
        ep = self.endpoint(profile)
        fields = ep.sampling_fields()
        if out.stop:
            fields["stop"] = ep.stops(out.stop)
        grammar = out.grammar(ctx) if callable(out.grammar) else out.grammar
        constraint = ep.constraint_fields(grammar=grammar, regex=out.regex)
        if constraint is None:
            if profile.name not in self._warned:
                self._warned.add(profile.name)
                warnings.warn(
                    f"profile {profile.name!r} ({profile.provider}) cannot take a grammar/regex; "
                    "the constraint is monitor-only there",
                    ConstraintWarning,
                    stacklevel=3,
                )
        elif constraint:
            body = dict(profile.extra_body)
            body.update(constraint)
            fields["extra_body"] = body
        style = ep.capabilities.json_schema
        if out.schema is not None and style is not None:
            from stateflow.structured import response_format

            # In the body, not as AutoGen's response_format argument: AutoGen rewrites that one
            # (strict mode, its own name) and formats the reply; the server must get it as is.
            fields["extra_body"] = {
                **fields.get("extra_body", {}),
                "response_format": response_format(out.schema, style),
            }
        return fields

    def call(
        self,
        agent: StateAgent,
        profile: ModelProfile,
        messages: list[dict[str, Any]] | None,
        sender: Agent | None,
        fields: dict[str, Any],
    ) -> tuple[str, Usage]:
        """One model call through AutoGen; returns the text and its accounting."""
        from stateflow.state_agent import reply_text

        reply, usage = self.call_raw(agent, profile, messages, sender, fields)
        return reply_text(reply), usage

    def call_raw(
        self,
        agent: StateAgent,
        profile: ModelProfile,
        messages: list[dict[str, Any]] | None,
        sender: Agent | None,
        fields: dict[str, Any],
    ) -> tuple[str | dict[str, Any], Usage]:
        """One model call through AutoGen; returns the reply (text, or a message dict carrying
        ``tool_calls``) and its accounting.

        Raises:
            LLMError: the call failed after the profile's retries, or returned no reply.
        """
        if self.calls is not None:
            return self._logged(self.calls, agent, profile, messages, sender, fields)
        return self._asked(agent, profile, messages, sender, fields)

    def _logged(
        self,
        log: CallLog,
        agent: StateAgent,
        profile: ModelProfile,
        messages: list[dict[str, Any]] | None,
        sender: Agent | None,
        fields: dict[str, Any],
    ) -> tuple[str | dict[str, Any], Usage]:
        """A call kept in ``log``, answered from its recording while one remains."""
        shown = messages if messages is not None else agent.chat_messages.get(sender, [])  # type: ignore[arg-type]
        key = messages_key(agent.system_message, shown)
        asking = getattr(self._asking, "state", "")
        rec = log.take(asking, key, agent.name) if log.replaying else None
        if rec is not None:
            u = rec.usage
            usage = Usage(
                prompt_tokens=int(u.get("prompt_tokens", 0)),
                completion_tokens=int(u.get("completion_tokens", 0)),
                cached_tokens=int(u.get("cached_tokens", 0)),
                cost=float(u.get("cost", 0.0)),
                latency_s=0.0,  # not asked again: no time spent
                model=str(u.get("model", "")),
                profile=rec.profile,
            )
            return rec.reply, usage
        reply, usage = self._asked(agent, profile, messages, sender, fields)
        log.add(RecordedCall(asking, profile.name, reply, _usage_fields(usage), key, agent.name))
        return reply, usage

    def _asked(
        self,
        agent: StateAgent,
        profile: ModelProfile,
        messages: list[dict[str, Any]] | None,
        sender: Agent | None,
        fields: dict[str, Any],
    ) -> tuple[str | dict[str, Any], Usage]:
        wrapper = self.wrapper(profile)
        ep = self.endpoint(profile)
        t0 = time.perf_counter()
        try:
            if self.emitter is not None and not ep.capabilities.test_double:
                ok, reply = self._streamed(agent, wrapper, messages, sender, fields)
            else:
                ok, reply = agent.generate_oai_reply(messages=messages, sender=sender, config=wrapper, **fields)
        except StateFlowError:
            raise
        except Exception as err:
            raise ep.error(err) from err
        latency = time.perf_counter() - t0
        if not ok or reply is None:
            raise LLMError(f"profile {profile.name!r} returned no reply", profile=profile.name)
        return reply, ep.usage(agent.last_response, latency)

    def _streamed(
        self,
        agent: StateAgent,
        wrapper: OpenAIWrapper,
        messages: list[dict[str, Any]] | None,
        sender: Agent | None,
        fields: dict[str, Any],
    ) -> tuple[bool, str | dict[str, Any] | None]:
        """One call with ``stream=True``: AutoGen reads the server-sent chunks, sends each text
        piece to the default ``IOStream`` (here a :class:`~stateflow.emitter.TokenTap`) and
        returns the assembled completion with its usage (``stream_options.include_usage``)."""
        from autogen.io.base import IOStream

        from stateflow.emitter import TokenTap

        assert self.emitter is not None
        self.emitter.streaming()
        tap = TokenTap(self.emitter, agent.name, IOStream.get_default())
        with IOStream.set_default(tap):
            try:
                return agent.generate_oai_reply(messages=messages, sender=sender, config=wrapper, stream=True, **fields)
            except RunCancelled:
                # A cancelled reply stops mid-stream. openai's ``Stream`` closes its HTTP response
                # when it is finalized, but it sits in a reference cycle with its own generators,
                # which only the cycle collector frees: collect now, so the connection closes and
                # the server stops generating (measured: otherwise it streamed to the end).
                with _COLLECTING:
                    gc.collect()
                raise


def _usage_fields(u: Usage) -> dict[str, Any]:
    return {
        "prompt_tokens": u.prompt_tokens,
        "completion_tokens": u.completion_tokens,
        "cached_tokens": u.cached_tokens,
        "cost": u.cost,
        "latency_s": round(u.latency_s, 4),
        "model": u.model,
    }

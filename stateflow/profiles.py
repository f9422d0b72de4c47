"""Named model profiles and their assignment to states.

A *profile* says how to reach one LLM (OpenAI-compatible endpoint or the embedded local model)
and how to sample from it. An *assignment* maps state names to profile names, with ``default``
(or ``*``) for every state not named. Profiles come from Python, from a TOML file and from the
CLI (``--model default=gpt-4o-mini --model Solve=local``); all three end up here. A name that
is no known profile may name a model directly (``openai:gpt-4o-mini``, ``ollama:qwen2.5-coder``,
``vllm:Qwen/Qwen2.5-Coder-7B-Instruct@http://host:8000/v1``, a GGUF path): see
:mod:`stateflow.model_names`, which also reads AutoGen's ``OAI_CONFIG_LIST``.

Every profile is validated when built (pydantic: types, ranges, URLs); an error names the field
and the offending value, and :func:`load_config` adds the file and the table.

TOML format::

    [profiles.my-vllm]
    model = "Qwen/Qwen2.5-Coder-7B-Instruct"
    provider = "vllm"
    base_url = "http://127.0.0.1:8000/v1"
    api_key_env = "VLLM_API_KEY"
    temperature = 0.0
    max_tokens = 512
    price_per_1k = [0.0, 0.0]

    [models]
    default = "my-vllm"
    Solve = "gpt-4o-mini"
"""

from __future__ import annotations

import dataclasses
import difflib
import os
import tomllib
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from stateflow.backends.providers import PROVIDERS, capabilities
from stateflow.errors import ConfigError

__all__ = [
    "BUILTIN_PROFILES",
    "DEFAULT_KEY",
    "ModelAssignment",
    "ModelProfile",
    "Provider",
    "load_config",
    "parse_model_options",
    "read_config_text",
]

Provider = Literal["openai", "vllm", "ollama", "llamacpp", "local", "scripted", "replay"]
_PROVIDERS: tuple[str, ...] = PROVIDERS
# Test doubles: they answer only from replies handed to ``run(scripts=...)`` or a cassette, which
# no command line can supply, so a command refuses them (see ModelAssignment.refuse_test_doubles).
_TEST_DOUBLES = ("scripted", "replay")

DEFAULT_KEY = "default"


class _ProfileSchema(BaseModel):
    """The validation rules of :class:`ModelProfile` (types, ranges, URLs), strict: no coercion."""

    model_config = ConfigDict(strict=True, extra="forbid", arbitrary_types_allowed=True)

    name: str = Field(min_length=1)
    model: str = Field(min_length=1)
    provider: Provider
    base_url: str | None
    api_key_env: str | None
    api_key_value: str | None
    temperature: float = Field(ge=0.0, le=2.0)
    max_tokens: int | None = Field(ge=1)
    stop: tuple[str, ...]
    price_per_1k: tuple[float, float]
    extra_body: Mapping[str, Any]
    timeout: float = Field(gt=0.0)
    max_retries: int = Field(ge=0, le=100)
    local_model: str | None
    function_calling: bool | None
    n_threads: int | None = Field(ge=1, le=1024)
    replicas: int | None = Field(ge=1, le=1024)
    seed: int | None = Field(ge=0)
    client: Literal["auto", "openai", "lean"]

    @field_validator("base_url")
    @classmethod
    def _http_url(cls, value: str | None) -> str | None:
        if value is None:
            return value
        from urllib.parse import urlsplit

        parts = urlsplit(value)
        if parts.scheme not in ("http", "https") or not parts.hostname or any(c.isspace() for c in value):
            raise ValueError("must be an http(s) URL with a host, e.g. http://127.0.0.1:8000/v1")
        try:
            _ = parts.port
        except ValueError as err:
            raise ValueError(f"bad port ({err})") from None
        return value

    @field_validator("price_per_1k")
    @classmethod
    def _non_negative(cls, value: tuple[float, float]) -> tuple[float, float]:
        if min(value) < 0:
            raise ValueError("prices must be >= 0")
        return value


def _validation_message(name: str, err: ValidationError) -> str:
    parts = []
    for e in err.errors():
        key = ".".join(str(x) for x in e["loc"]) or "?"
        parts.append(f"{key} = {e.get('input')!r}: {e['msg']}")
    return f"profile {name!r}: " + "; ".join(parts)


@dataclass(frozen=True)
class ModelProfile:
    """How to reach and sample one model.

    Attributes:
        name: the profile's name, used in assignments (``local``, ``gpt-4o-mini``...).
        model: the model name sent in requests (for ``local`` profiles: the server's alias).
        provider: ``openai`` (any OpenAI-compatible server), ``vllm``, ``ollama``, ``llamacpp``
            (an external llama.cpp server), ``local`` (the embedded, managed llama.cpp server),
            or the explicit test doubles ``scripted`` and ``replay``.
        base_url: endpoint root including ``/v1``; ``None`` means OpenAI's, or for ``local``
            the managed server's (resolved when a run starts).
        api_key_env: environment variable that holds the API key (never the key itself).
        temperature, max_tokens, stop: sampling settings sent with every request.
        seed: the sampler's seed sent with every request (``None``: the server's own); repeats
            of an episode at a temperature above 0 (``stateflow run --repeats``) use one each.
            A call that sets its own seed (a vote's candidates, a repeat guard's re-asks) keeps it.
        price_per_1k: dollars per 1,000 (prompt, completion) tokens; used for cost accounting.
        extra_body: further request fields sent verbatim (e.g. ``{"top_k": 20}``). Note that
            llama-cpp-python's server, the embedded model's too, applies ``repeat_penalty`` 1.1
            to a request that does not set one, greedy or not; ``{"repeat_penalty": 1.0}``
            turns it off (measured on SQL with the 1.5B model: no effect, docs/results.md).
        timeout: seconds to wait for one response.
        max_retries: retries of a failed request (timeouts, 429, 5xx, refused connections),
            with exponential back-off, before the call fails with ``LLMError``.
        local_model: for ``provider="local"``: which embedded model (``local``/``local-small``)
            or a path to any GGUF file.
        api_key_value: a literal key, only for profiles read from AutoGen's ``OAI_CONFIG_LIST``
            (which stores keys inline); never printed. Prefer ``api_key_env``.
        function_calling: whether the server takes OpenAI ``tools``; ``None`` means the
            provider's default (OpenAI and Ollama yes, others no). Without it, tool-using LLM
            calls fall back to the Thought/Action text protocol.
        n_threads: for ``provider="local"``: CPU threads of the embedded server (prompt
            evaluation and decoding); ``None`` means every core this process may run on. Lower
            it when other programs need cores: two servers with 2 threads each on 2 cores made
            calls 5-10x slower. One server serves a model per process, so every profile of
            that model must ask for the same count.
        replicas: for ``provider="local"``: serve the model from this many servers, each pinned
            to its own cores with one thread per core, the episodes routed to them by their
            context (:mod:`stateflow.backends.local.replicas`); ``None``: the runner's default
            for its workers (:func:`stateflow.backends.local.defaults.local_replicas`), else 1.
            Each replica holds the model and its own prompt cache in RAM.
        client: which HTTP client calls an OpenAI-compatible server: ``"lean"``
            (:class:`~stateflow.backends.lean_openai.LeanChatClient`: plain JSON on the shared
            pool, about half the CPU per call; streamed calls still use AutoGen's client),
            ``"openai"`` (AutoGen's, through the ``openai`` library), or ``"auto"`` (the
            default): ``"openai"`` for OpenAI's own API, ``"lean"`` for every other server. Why
            OpenAI's own API keeps the ``openai`` library: it also sends the organisation and
            project headers (``OPENAI_ORG_ID``, ``OPENAI_PROJECT_ID``) and its CPU per call is
            small next to that API's latency. See :meth:`uses_lean_client`.
    """

    name: str
    model: str
    provider: Provider = "openai"
    base_url: str | None = None
    api_key_env: str | None = "OPENAI_API_KEY"
    temperature: float = 0.0
    max_tokens: int | None = 512
    stop: tuple[str, ...] = ()
    price_per_1k: tuple[float, float] = (0.0, 0.0)
    extra_body: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))
    timeout: float = 120.0
    max_retries: int = 4
    local_model: str | None = None
    api_key_value: str | None = field(default=None, repr=False)
    function_calling: bool | None = None
    n_threads: int | None = None
    seed: int | None = None
    replicas: int | None = None
    client: Literal["auto", "openai", "lean"] = "auto"

    def __post_init__(self) -> None:
        if self.provider not in _PROVIDERS:
            raise ConfigError(
                f"profile {self.name!r}: unknown provider {self.provider!r}; valid providers: {', '.join(_PROVIDERS)}"
            )
        try:
            _ProfileSchema(**{f.name: getattr(self, f.name) for f in dataclasses.fields(self)})
        except ValidationError as err:
            raise ConfigError(_validation_message(self.name, err)) from None
        if self.provider == "local" and not self.local_model:
            raise ConfigError(f"profile {self.name!r}: provider 'local' needs local_model")
        if self.n_threads is not None and self.provider != "local":
            raise ConfigError(
                f"profile {self.name!r}: n_threads = {self.n_threads} applies to the embedded model only "
                f"(provider 'local'), not to provider {self.provider!r}; remove it"
            )

        if self.replicas is not None and self.provider != "local":
            raise ConfigError(
                f"profile {self.name!r}: replicas = {self.replicas} applies to the embedded model only "
                f"(provider 'local'), not to provider {self.provider!r}; remove it"
            )

    @property
    def native_tools(self) -> bool:
        """Whether tool-using calls go through OpenAI function calling (else the text protocol)."""
        if self.function_calling is not None:
            return self.function_calling
        # vLLM needs --enable-auto-tool-choice and llama.cpp a tool-aware template, so their
        # declared default is the Thought/Action text protocol (see backends.providers).
        return capabilities(self.provider).function_calling

    def uses_lean_client(self) -> bool:
        """Whether calls go through the lean client (``client``, with ``"auto"`` resolved).

        Example:
            >>> ModelProfile("p", "m", provider="vllm", base_url="http://127.0.0.1:8000/v1").uses_lean_client()
            True
            >>> ModelProfile("p", "gpt-4o-mini").uses_lean_client()
            False
        """
        if self.client != "auto":
            return self.client == "lean"
        from urllib.parse import urlsplit

        own_api = self.provider == "openai" and (
            self.base_url is None or urlsplit(self.base_url).hostname == "api.openai.com"
        )
        return not own_api

    def api_key(self) -> str:
        """The API key read from ``api_key_env`` (a placeholder for servers that need none)."""
        if self.api_key_value:
            return self.api_key_value
        if self.api_key_env and os.environ.get(self.api_key_env):
            return os.environ[self.api_key_env]
        if self.provider == "openai" and self.base_url is None:
            raise ConfigError(
                f"profile {self.name!r} talks to OpenAI but ${self.api_key_env or 'OPENAI_API_KEY'} "
                "is not set; export it or pick another profile (e.g. --model default=local)"
            )
        return "not-needed"

    def cost(self, prompt_tokens: int, completion_tokens: int) -> float:
        """Dollar cost of one call under this profile's prices."""
        p, c = self.price_per_1k
        return (prompt_tokens * p + completion_tokens * c) / 1000.0

    def with_overrides(self, **changes: Any) -> ModelProfile:
        """A copy with some fields replaced (unknown field names are an error)."""
        known = {f.name for f in dataclasses.fields(self)}
        unknown = sorted(set(changes) - known)
        if unknown:
            raise ConfigError(f"profile {self.name!r}: unknown field(s) {unknown}; valid: {sorted(known)}")
        return dataclasses.replace(self, **changes)


def _builtin() -> dict[str, ModelProfile]:
    # Prices in $ per 1k tokens (prompt, completion), as published by OpenAI.
    openai = [
        ("gpt-4o-mini", (0.00015, 0.0006)),
        ("gpt-4o", (0.0025, 0.01)),
        ("gpt-4.1-mini", (0.0004, 0.0016)),
        ("gpt-3.5-turbo", (0.0005, 0.0015)),
        ("gpt-4", (0.03, 0.06)),
    ]
    profiles = {n: ModelProfile(name=n, model=n, price_per_1k=p) for n, p in openai}
    profiles["local"] = ModelProfile(
        name="local",
        model="qwen2.5-coder-1.5b-instruct",
        provider="local",
        local_model="local",
        api_key_env=None,
        max_tokens=384,
    )
    profiles["local-small"] = ModelProfile(
        name="local-small",
        model="qwen2.5-coder-0.5b-instruct",
        provider="local",
        local_model="local-small",
        api_key_env=None,
        max_tokens=384,
    )
    return profiles


BUILTIN_PROFILES: Mapping[str, ModelProfile] = MappingProxyType(_builtin())


@dataclass(frozen=True)
class ModelAssignment:
    """Which profile serves which state.

    ``by_state`` maps a state name (or ``default``) to a profile name; ``profiles`` holds every
    known profile (built-ins plus user-defined ones).
    """

    by_state: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({DEFAULT_KEY: "local"}))
    profiles: Mapping[str, ModelProfile] = field(default_factory=lambda: BUILTIN_PROFILES)

    @classmethod
    def of(
        cls,
        spec: str | ModelProfile | Mapping[str, str | ModelProfile] | ModelAssignment | None = None,
        profiles: Iterable[ModelProfile] = (),
    ) -> ModelAssignment:
        """Build an assignment from a profile (name or object) for every state, or a mapping.

        ``"*"`` is accepted as a synonym of ``default``. Profile objects given as values are
        registered under their own name.
        """
        if isinstance(spec, ModelAssignment):
            return spec
        known = dict(BUILTIN_PROFILES)
        for p in profiles:
            known[p.name] = p
        by_state: dict[str, str] = {}
        if spec is None:
            by_state[DEFAULT_KEY] = "local"
        elif isinstance(spec, str):
            by_state[DEFAULT_KEY] = spec
        elif isinstance(spec, ModelProfile):
            known[spec.name] = spec
            by_state[DEFAULT_KEY] = spec.name
        else:
            for state, value in spec.items():
                key = DEFAULT_KEY if state == "*" else state
                if isinstance(value, ModelProfile):
                    known[value.name] = value
                    value = value.name
                by_state[key] = value
        for state, name in by_state.items():
            if name not in known:
                from stateflow.model_names import profile_from_name

                named = profile_from_name(name)
                if named is None:
                    raise ConfigError(
                        f"model for {state!r}: unknown profile {name!r}; known profiles: {', '.join(sorted(known))}; "
                        "or name a model: openai:MODEL, ollama:MODEL, vllm:MODEL@URL, llamacpp:MODEL@URL, PATH.gguf"
                    )
                known[name] = named
        return cls(by_state=MappingProxyType(by_state), profiles=MappingProxyType(known))

    def profile_for(self, state: str, explicit: str | None = None) -> ModelProfile:
        """The profile serving ``state``: an explicit per-state name wins, then the assignment."""
        name = explicit or self.by_state.get(state) or self.by_state.get(DEFAULT_KEY)
        if name is None:
            raise ConfigError(f"no model assigned to state {state!r} and no default; use --model default=NAME")
        try:
            return self.profiles[name]
        except KeyError:
            raise ConfigError(
                f"state {state!r} uses unknown profile {name!r}; known: {', '.join(sorted(self.profiles))}"
            ) from None

    def check_states(self, states: Collection[str], where: str) -> None:
        """Refuse per-state keys that name none of ``states`` (a typo would silently fall back
        to the default model).

        Args:
            states: the state names the assignment is used for (one flow's, or the union of the
                flows of a benchmark run's methods).
            where: what those states belong to, for the message (e.g. ``"flow 'sql'"``).

        Raises:
            ConfigError: naming each unknown key, its closest state name and every state.
        """
        unknown = [k for k in self.by_state if k != DEFAULT_KEY and k not in states]
        if not unknown:
            return
        problems = []
        for key in unknown:
            close = difflib.get_close_matches(key, list(states), n=1, cutoff=0.5)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            problems.append(f"{key!r}{hint}")
        raise ConfigError(
            f"model assignment names no state of {where}: {', '.join(problems)}; "
            f"its states: {', '.join(states)}; use 'default' (or '*') for every state not named"
        )

    def restricted_to(self, states: Collection[str]) -> ModelAssignment:
        """The same assignment without the per-state keys that name none of ``states`` (one
        benchmark run gives one assignment to several methods' flows; each flow uses its part)."""
        kept = {k: v for k, v in self.by_state.items() if k == DEFAULT_KEY or k in states}
        if len(kept) == len(self.by_state):
            return self
        return dataclasses.replace(self, by_state=MappingProxyType(kept))

    def refuse_test_doubles(self) -> None:
        """Refuse assigned profiles whose provider is a test double (``scripted``, ``replay``):
        they answer only from replies a Python caller passes to :func:`stateflow.run`, so from a
        command line every call would fail. Commands call this before they start.

        Raises:
            ConfigError: naming each such profile and the state it serves.
        """
        doubles = [
            f"{state}={name} (provider {self.profiles[name].provider!r})"
            for state, name in sorted(self.by_state.items())
            if self.profiles[name].provider in _TEST_DOUBLES
        ]
        if doubles:
            raise ConfigError(
                f"model profile(s) {', '.join(doubles)}: {' and '.join(_TEST_DOUBLES)} are test doubles "
                "that answer only from replies passed to stateflow.run(scripts=...) in Python; from the "
                'command line choose a real model (e.g. --model default=local, or provider = "openai" in the TOML)'
            )

    def merged(self, other: Mapping[str, str]) -> ModelAssignment:
        """A new assignment where ``other``'s entries override this one's."""
        by_state = dict(self.by_state)
        by_state.update({DEFAULT_KEY if k == "*" else k: v for k, v in other.items()})
        return ModelAssignment.of(by_state, profiles=self.profiles.values())


def parse_model_options(options: Iterable[str]) -> dict[str, str]:
    """Parse CLI ``--model`` values: ``NAME`` (= default) or ``STATE=NAME``."""
    out: dict[str, str] = {}
    for opt in options:
        state, sep, name = opt.partition("=")
        if not sep:
            state, name = DEFAULT_KEY, opt
        state, name = state.strip(), name.strip()
        if not state or not name:
            raise ConfigError(f"--model {opt!r}: expected NAME or STATE=NAME (e.g. --model Solve=local)")
        out[DEFAULT_KEY if state == "*" else state] = name
    return out


def read_config_text(path: Path) -> str:
    """The text of a config file, or one :class:`ConfigError` naming the file and the problem
    (missing, a directory, unreadable, not UTF-8) instead of a raw ``OSError``/``UnicodeDecodeError``.

    Raises:
        ConfigError: the file cannot be read as UTF-8 text.
    """
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"{path}: config file not found") from None
    except IsADirectoryError:
        raise ConfigError(f"{path}: is a directory, not a config file (give the file inside it)") from None
    except UnicodeDecodeError as err:
        raise ConfigError(
            f"{path}: not UTF-8 text (byte {err.object[err.start]:#04x} at offset {err.start}); save it as UTF-8"
        ) from None
    except OSError as err:
        raise ConfigError(f"{path}: cannot read the config file ({err.strerror or err})") from None


_TOML_FIELDS = {f.name for f in dataclasses.fields(ModelProfile)} - {"name", "api_key_value"}


def load_config(path: str | os.PathLike[str]) -> ModelAssignment:
    """Read profiles and a state assignment from a TOML file, or profiles from an AutoGen
    ``OAI_CONFIG_LIST`` (a JSON list; each entry becomes a profile named after its model, the
    first one the default).

    Raises:
        ConfigError: unreadable TOML, unknown keys or bad values, naming the file and the key.
    """
    p = Path(path)
    if p.suffix == ".json" or p.name.startswith("OAI_CONFIG_LIST"):
        from stateflow.model_names import profiles_from_oai_config_list

        listed = profiles_from_oai_config_list(p)
        return ModelAssignment.of(listed[0].name, profiles=listed)
    try:
        data = tomllib.loads(read_config_text(p))
    except tomllib.TOMLDecodeError as err:
        raise ConfigError(f"{p}: invalid TOML: {err}") from err
    unknown_top = sorted(set(data) - {"profiles", "models"})
    if unknown_top:
        raise ConfigError(f"{p}: unknown top-level table(s) {unknown_top}; valid: [profiles.NAME], [models]")
    profiles: list[ModelProfile] = []
    for name, body in (data.get("profiles") or {}).items():
        where = f"{p}: [profiles.{name}]"
        if not isinstance(body, dict):
            raise ConfigError(f"{where}: must be a table")
        unknown = sorted(set(body) - _TOML_FIELDS)
        if unknown:
            raise ConfigError(f"{where}: unknown key(s) {unknown}; valid keys: {sorted(_TOML_FIELDS)}")
        base = BUILTIN_PROFILES.get(name)
        fields = dict(body)
        if isinstance(fields.get("stop"), list):
            fields["stop"] = tuple(fields["stop"])
        if "price_per_1k" in fields:
            price = fields["price_per_1k"]
            if not (isinstance(price, list) and len(price) == 2):
                raise ConfigError(f"{where}: price_per_1k = {price!r}: must be [prompt, completion]")
            fields["price_per_1k"] = tuple(price)
        if isinstance(fields.get("extra_body"), dict):
            fields["extra_body"] = MappingProxyType(dict(fields["extra_body"]))
        try:
            if base is not None:
                profiles.append(base.with_overrides(**fields))
            else:
                if "model" not in fields:
                    raise ConfigError(f"{where}: 'model' is required")
                profiles.append(ModelProfile(name=name, **fields))
        except ConfigError as err:
            if str(p) in str(err):
                raise
            raise ConfigError(f"{where}: {err}") from err
        except TypeError as err:
            raise ConfigError(f"{where}: {err}") from err
    models = data.get("models") or {}
    if not isinstance(models, dict) or not all(isinstance(v, str) for v in models.values()):
        raise ConfigError(f"{p}: [models] must map state names to profile names (strings)")
    try:
        return ModelAssignment.of(models or None, profiles=profiles)
    except ConfigError as err:
        raise ConfigError(f"{p}: {err}") from err

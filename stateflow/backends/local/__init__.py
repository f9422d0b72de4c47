"""The embedded local LLM: Qwen2.5-Coder GGUF models behind a managed llama.cpp server.

Public API:

* :func:`resolve_endpoint` ``(profile) -> "http://127.0.0.1:PORT/v1"``: a running server for a
  ``provider="local"`` profile, started lazily and shared process-wide (see :mod:`.pool`).
* :func:`start_servers` ``(profiles)``: start the servers of the ``local`` profiles now (a runner
  does this before its first episode, so no episode pays for loading a model).
* :func:`regex_to_gbnf` ``(pattern) -> GBNF``: a regex (documented subset) as a llama.cpp grammar,
  sent as ``extra_body={"grammar": ...}``.
* :func:`check_server` ``(profile)``: after a failed request, raises :class:`ServerCrashedError`
  (exit signal + log tail) if the profile's server died; the next ``resolve_endpoint`` restarts it.
  The evaluation runner asks it after every errored episode, so the record names the crash.
* :class:`LocalServerPool`, :func:`default_pool`, :class:`ManagedServer`, :class:`ServerConfig`.
* :class:`ModelStore`, :data:`CATALOG`, :func:`model_spec`: the verified model cache.

Every chat/completion response of the managed server carries OpenAI's
``usage.prompt_tokens_details.cached_tokens``: prompt tokens whose evaluation was skipped.

Importing this package does not import llama-cpp-python; only the server child process does.
"""

from stateflow.backends.local.catalog import CATALOG, ModelSpec, model_spec
from stateflow.backends.local.errors import (
    LocalModelError,
    ModelIntegrityError,
    ModelNotFoundError,
    RuntimeMissingError,
    ServerCrashedError,
    ServerStartError,
)
from stateflow.backends.local.grammar import UnsupportedRegexError, regex_to_gbnf
from stateflow.backends.local.pool import (
    LocalServerPool,
    check_server,
    default_pool,
    resolve_endpoint,
    start_servers,
)
from stateflow.backends.local.server import ManagedServer, ServerConfig, cpu_cores, runtime_available
from stateflow.backends.local.store import ModelLocation, ModelStatus, ModelStore, cache_root

__all__ = [
    "CATALOG",
    "LocalModelError",
    "LocalServerPool",
    "ManagedServer",
    "ModelIntegrityError",
    "ModelLocation",
    "ModelNotFoundError",
    "ModelSpec",
    "ModelStatus",
    "ModelStore",
    "RuntimeMissingError",
    "ServerConfig",
    "ServerCrashedError",
    "ServerStartError",
    "UnsupportedRegexError",
    "cache_root",
    "check_server",
    "cpu_cores",
    "default_pool",
    "model_spec",
    "regex_to_gbnf",
    "resolve_endpoint",
    "runtime_available",
    "start_servers",
]

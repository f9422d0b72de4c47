"""Models by name: ``provider:model[@url]`` strings, GGUF paths and AutoGen's ``OAI_CONFIG_LIST``.

Anywhere a profile name is accepted (``run(models=...)``, ``--model STATE=NAME``, a TOML
``[models]`` table), a name that is no known profile is read as a model reference:

==============================================  ==============================================
``openai:gpt-4o-mini``                          OpenAI (``$OPENAI_API_KEY``; known prices)
``openai:MODEL@https://host/v1``                any OpenAI-compatible server
``vllm:Qwen/Qwen2.5-Coder-7B-Instruct@URL``      a vLLM server (default ``http://127.0.0.1:8000/v1``)
``ollama:qwen2.5-coder``                        Ollama (default ``http://127.0.0.1:11434/v1``)
``llamacpp:MODEL@URL``                          an external llama.cpp server (default port 8080)
``/models/x.gguf`` or ``local:/models/x.gguf``  the embedded llama.cpp server with that GGUF
==============================================  ==============================================

>>> profile_from_name("ollama:qwen2.5-coder").base_url
'http://127.0.0.1:11434/v1'
>>> profile_from_name("vllm:Qwen/Qwen2.5-7B@http://gpu:8000/v1").model
'Qwen/Qwen2.5-7B'
>>> profile_from_name("no-such-profile") is None
True
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from stateflow.errors import ConfigError
from stateflow.profiles import BUILTIN_PROFILES, ModelProfile, read_config_text

__all__ = ["DEFAULT_URLS", "profile_from_name", "profiles_from_oai_config_list"]

#: Where each provider's server listens when a name gives no ``@URL``.
DEFAULT_URLS: dict[str, str | None] = {
    "openai": None,
    "vllm": "http://127.0.0.1:8000/v1",
    "ollama": "http://127.0.0.1:11434/v1",
    "llamacpp": "http://127.0.0.1:8080/v1",
}
_KEY_ENV: dict[str, str | None] = {"openai": "OPENAI_API_KEY", "vllm": "VLLM_API_KEY", "ollama": None, "llamacpp": None}


def _split_url(rest: str) -> tuple[str, str | None]:
    # Model names may contain '@' (rare) but never '@http': split at the last one that starts a URL.
    for marker in ("@https://", "@http://"):
        at = rest.rfind(marker)
        if at >= 0:
            return rest[:at], rest[at + 1 :]
    return rest, None


def profile_from_name(name: str) -> ModelProfile | None:
    """The profile a model reference names, or ``None`` if ``name`` is no model reference.

    Raises:
        ConfigError: the reference is malformed (empty model, bad URL, a GGUF path that does not
            end in ``.gguf``), naming the reference.
    """
    text = name.strip()
    provider, sep, rest = text.partition(":")
    if (sep and provider == "local") or (not sep and text.endswith(".gguf")):
        path = rest if sep else text
        if not path.endswith(".gguf"):
            raise ConfigError(f"model {name!r}: local:PATH needs a .gguf file path")
        return ModelProfile(
            name=name,
            model=Path(path).stem,
            provider="local",
            local_model=str(Path(path).expanduser()),
            api_key_env=None,
            max_tokens=384,
        )
    if not sep or provider not in DEFAULT_URLS:
        return None
    model, url = _split_url(rest)
    if not model:
        raise ConfigError(f"model {name!r}: no model name after {provider + ':'!r}")
    builtin = BUILTIN_PROFILES.get(model)
    price = builtin.price_per_1k if builtin is not None and provider == "openai" and url is None else (0.0, 0.0)
    try:
        return ModelProfile(
            name=name,
            model=model,
            provider=provider,  # type: ignore[arg-type]
            base_url=url or DEFAULT_URLS[provider],
            api_key_env=_KEY_ENV[provider],
            price_per_1k=price,
        )
    except ConfigError as err:
        raise ConfigError(f"model {name!r}: {err}") from None


def _read_config_list(source: str | os.PathLike[str]) -> tuple[str, Any]:
    text = str(source)
    path = Path(text).expanduser()
    if path.exists():  # a directory too: read_config_text names the problem
        where = str(path)
        raw = read_config_text(path)
    elif os.environ.get(text):
        # AutoGen's convention: the variable holds the JSON itself or a file name.
        value = os.environ[text]
        if Path(value).expanduser().is_file():
            where, raw = value, read_config_text(Path(value).expanduser())
        else:
            where, raw = f"${text}", value
    else:
        raise ConfigError(f"{text}: no such file, and no environment variable of that name holds a config list")
    try:
        return where, json.loads(raw)
    except json.JSONDecodeError as err:
        raise ConfigError(f"{where}: invalid JSON: {err}") from None


_OAI_KEYS = frozenset({"model", "api_key", "base_url", "api_type", "price", "tags", "api_version"})


def profiles_from_oai_config_list(source: str | os.PathLike[str] = "OAI_CONFIG_LIST") -> list[ModelProfile]:
    """Profiles from an AutoGen ``OAI_CONFIG_LIST`` (a file, or a variable holding JSON or a path).

    Each entry becomes a profile named after its ``model`` (``model#2``... for repeats) with its
    ``base_url``, inline ``api_key`` and ``price``. Only OpenAI-compatible entries are supported.

    Raises:
        ConfigError: unreadable JSON, not a list, an entry without ``model``, an unsupported
            ``api_type`` or a bad value; the message names the source, the entry and the key.
    """
    where, data = _read_config_list(source)
    if not isinstance(data, list) or not data:
        raise ConfigError(f"{where}: an OAI_CONFIG_LIST must be a non-empty JSON list of entries")
    out: list[ModelProfile] = []
    seen: set[str] = set()
    for i, entry in enumerate(data):
        at = f"{where}: entry {i}"
        if not isinstance(entry, dict):
            raise ConfigError(f"{at}: must be an object, got {type(entry).__name__}")
        unknown = sorted(set(entry) - _OAI_KEYS)
        if unknown:
            raise ConfigError(f"{at}: unsupported key(s) {unknown}; supported: {sorted(_OAI_KEYS)}")
        model = entry.get("model")
        if not isinstance(model, str) or not model:
            raise ConfigError(f"{at}: 'model' = {model!r}: a non-empty string is required")
        api_type = entry.get("api_type", "openai")
        if api_type != "openai":
            raise ConfigError(f"{at}: api_type = {api_type!r}: only OpenAI-compatible entries are supported")
        name = model if model not in seen else f"{model}#{i}"
        seen.add(name)
        price = entry.get("price")
        builtin = BUILTIN_PROFILES.get(model)
        if price is None:
            price = builtin.price_per_1k if builtin is not None and not entry.get("base_url") else (0.0, 0.0)
        elif isinstance(price, list):
            price = tuple(price)
        try:
            out.append(
                ModelProfile(
                    name=name,
                    model=model,
                    base_url=entry.get("base_url"),
                    api_key_env="OPENAI_API_KEY" if "api_key" not in entry else None,
                    api_key_value=entry.get("api_key"),
                    price_per_1k=price,
                )
            )
        except ConfigError as err:
            raise ConfigError(f"{at}: {err}") from None
    return out

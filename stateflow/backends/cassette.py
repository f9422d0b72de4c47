"""Record and replay real LLM traffic (opt-in only).

``Cassette(path, mode="record")`` sends every request to the real endpoint through AutoGen's own
OpenAI client and appends the request/response pair to a JSONL file. ``mode="replay"`` answers
from that file, offline and exactly; a request that is not in the cassette is an error, never a
guess. The key is a hash of everything that shapes a completion: model, messages (role, name,
content), temperature, max_tokens, stop and extra request fields.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
from pathlib import Path
from typing import Any, Literal

from openai.types.chat import ChatCompletion

from stateflow.backends.client_base import ChatCompletionClient
from stateflow.errors import StateFlowError

__all__ = ["Cassette", "CassetteMiss", "RecordingClient", "ReplayClient", "request_key"]

_KEY_FIELDS = ("model", "temperature", "max_tokens", "stop", "extra_body", "top_p", "seed")


_CLIENT_ONLY_KEYS = frozenset({"model_client_cls", "api_key", "base_url", "timeout", "max_retries", "price"})


class CassetteMiss(StateFlowError):
    """Replay was asked for a request the cassette does not hold."""


def request_key(params: dict[str, Any]) -> str:
    """A stable hash of the parts of a request that determine the completion."""
    messages = [
        {k: m.get(k) for k in ("role", "name", "content") if m.get(k) is not None} for m in params.get("messages", [])
    ]
    shaped = {k: params.get(k) for k in _KEY_FIELDS if params.get(k) is not None}
    shaped["messages"] = messages
    blob = json.dumps(shaped, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(blob.encode("utf-8", errors="backslashreplace")).hexdigest()


class Cassette:
    """A JSONL file of ``{"key", "request", "response"}`` records.

    Args:
        path: the cassette file.
        mode: ``record`` (real calls, appended) or ``replay`` (offline; misses raise).
    """

    def __init__(self, path: str | os.PathLike[str], mode: Literal["record", "replay"]):
        if mode not in ("record", "replay"):
            raise ValueError(f"cassette mode must be 'record' or 'replay', got {mode!r}")
        self.path = Path(path)
        self.mode = mode
        self._lock = threading.Lock()
        self._entries: dict[str, dict[str, Any]] = {}
        if mode == "replay":
            if not self.path.exists():
                raise CassetteMiss(f"{self.path}: cassette not found (record it first with mode='record')")
            for lineno, line in enumerate(self.path.read_text(encoding="utf-8").splitlines(), 1):
                if not line.strip():
                    continue
                try:
                    rec = json.loads(line)
                    self._entries[rec["key"]] = rec["response"]
                except (json.JSONDecodeError, KeyError) as err:
                    raise StateFlowError(f"{self.path}:{lineno}: corrupt cassette record ({err})") from err

    def __len__(self) -> int:
        return len(self._entries)

    def lookup(self, params: dict[str, Any]) -> ChatCompletion:
        key = request_key(params)
        try:
            return ChatCompletion.model_validate(self._entries[key])
        except KeyError:
            last = (params.get("messages") or [{}])[-1].get("content", "")
            raise CassetteMiss(
                f"{self.path}: no recorded response for model {params.get('model')!r} "
                f"(key {key[:12]}, last message {str(last)[:80]!r}); re-record the cassette"
            ) from None

    def store(self, params: dict[str, Any], response: ChatCompletion) -> None:
        key = request_key(params)
        record = {
            "key": key,
            "request": {k: params[k] for k in ("model", "messages", *_KEY_FIELDS) if k in params},
            "response": response.model_dump(mode="json"),
        }
        line = json.dumps(record, ensure_ascii=False, default=str) + "\n"
        with self._lock:
            self._entries[key] = record["response"]
            self.path.parent.mkdir(parents=True, exist_ok=True)
            # A reply can hold half a UTF-16 surrogate pair; inside a JSON string the backslash
            # form is that same character's escape, so the line reads back unchanged.
            with self.path.open("a", encoding="utf-8", errors="backslashreplace") as fh:
                fh.write(line)


class _CassetteClientBase(ChatCompletionClient):
    def __init__(self, config: dict[str, Any], *, cassette: Cassette, price_per_1k: tuple[float, float] = (0, 0)):
        super().__init__(price_per_1k=price_per_1k)
        self._config = config
        self._cassette = cassette


class RecordingClient(_CassetteClientBase):
    """AutoGen ``ModelClient``: real call through AutoGen's OpenAI client, then record."""

    def __init__(self, config: dict[str, Any], *, cassette: Cassette, price_per_1k: tuple[float, float] = (0, 0)):
        super().__init__(config, cassette=cassette, price_per_1k=price_per_1k)
        from autogen.oai.client import OpenAIClient
        from openai import OpenAI

        self._inner = OpenAIClient(
            OpenAI(
                api_key=config.get("api_key"),
                base_url=config.get("base_url"),
                timeout=config.get("timeout"),
                max_retries=config.get("max_retries", 2),
            )
        )

    def create(self, params: dict[str, Any]) -> ChatCompletion:
        # AutoGen hands custom clients the whole config entry; only request fields go out.
        request = {k: v for k, v in params.items() if k not in _CLIENT_ONLY_KEYS}
        response = self._inner.create(request)
        self._cassette.store(params, response)
        return response


class ReplayClient(_CassetteClientBase):
    """AutoGen ``ModelClient``: answers from the cassette; a miss raises :class:`CassetteMiss`."""

    def create(self, params: dict[str, Any]) -> ChatCompletion:
        return self._cassette.lookup(params)

"""A lean OpenAI-compatible chat client for AutoGen: plain JSON over the shared ``httpx`` pool.

Why: with 50 runs awaited together, 69 % of a run's own CPU was the ``openai`` library's
``chat.completions.create`` (request-body transform, request building, pydantic parsing of the
reply). This client posts the request body as JSON with the shared ``httpx.Client``, checks the
shape of the (untrusted) reply itself and builds the ``ChatCompletion`` AutoGen expects with
``model_construct`` (no second validation of a shape already checked).

It is registered through AutoGen's custom-client hook (``model_client_cls`` plus
``OpenAIWrapper.register_model_client``) and is opt-in (see ``docs/live.md``). A streamed request
is not handled here: it goes through ``stream_client`` (AutoGen's own client), given explicitly.

Failures behave as the ``openai`` client's, so that code catching them (AutoGen's wrapper turns
an ``APITimeoutError`` into its ``TimeoutError``; StateFlow names the profile and the error type)
sees no difference: the same retries (transport errors, 408/409/429, 5xx, a server's
``x-should-retry``), the same waits (a server's ``Retry-After`` up to two minutes, else
exponential back-off) and the same exception types (``openai.RateLimitError``,
``openai.AuthenticationError``, ..., ``openai.APIConnectionError``, ``openai.APITimeoutError``).
"""

from __future__ import annotations

import email.utils
import json
import math
import random
import time
from datetime import UTC, datetime
from typing import Any

import httpx
import openai
from openai.types.chat import ChatCompletion, ChatCompletionMessage
from openai.types.chat.chat_completion import Choice
from openai.types.chat.chat_completion_message_tool_call import ChatCompletionMessageToolCall, Function
from openai.types.completion_usage import CompletionUsage

from stateflow.backends.client_base import ChatCompletionClient
from stateflow.errors import LLMError

__all__ = ["MAX_RETRY_AFTER_S", "LeanChatClient", "MalformedReplyError", "parse_chat_completion", "retry_after_s"]

# The statuses the openai client retries (timeouts, 408/409/429 and 5xx), matched here.
_RETRY_STATUSES = frozenset({408, 409, 429})
# The longest wait a server may ask for with Retry-After; a longer one is not waited for and the
# error is raised at once (the openai client's limit: two minutes).
MAX_RETRY_AFTER_S = 120.0
# The exception the openai client raises for each status (5xx: InternalServerError; any other
# status: APIStatusError), so that callers catch the same types on either client.
_STATUS_ERRORS: dict[int, type[openai.APIStatusError]] = {
    400: openai.BadRequestError,
    401: openai.AuthenticationError,
    403: openai.PermissionDeniedError,
    404: openai.NotFoundError,
    409: openai.ConflictError,
    422: openai.UnprocessableEntityError,
    429: openai.RateLimitError,
}
# How much of an error reply's text goes into the message (the server is not ours).
_ERROR_TEXT_CHARS = 300
# AutoGen config keys that are connection settings, not request fields.
_NOT_REQUEST = frozenset({"model_client_cls", "api_key", "base_url", "timeout", "max_retries", "price", "http_client"})


class MalformedReplyError(LLMError):
    """The endpoint's reply is not a chat completion (bad JSON or a missing/ill-typed field)."""


def _need(cond: bool, url: str, what: str) -> None:
    if not cond:
        raise MalformedReplyError(f"malformed chat completion from {url}: {what}")


def parse_chat_completion(body: Any, url: str) -> ChatCompletion:
    """Check an untrusted reply's shape, then build the ``ChatCompletion`` without revalidating.

    Args:
        body: the decoded JSON reply.
        url: the endpoint, named in the error.

    Raises:
        MalformedReplyError: naming the endpoint and the field that is wrong.
    """
    _need(isinstance(body, dict), url, "the reply is not a JSON object")
    choices = body.get("choices")
    _need(isinstance(choices, list) and len(choices) > 0, url, "'choices' is missing or empty")
    built: list[Choice] = []
    for i, ch in enumerate(choices):
        _need(isinstance(ch, dict), url, f"choices[{i}] is not an object")
        msg = ch.get("message")
        _need(isinstance(msg, dict), url, f"choices[{i}].message is missing")
        content = msg.get("content")
        _need(content is None or isinstance(content, str), url, f"choices[{i}].message.content is not a string")
        calls = None
        raw_calls = msg.get("tool_calls")
        if raw_calls:
            _need(isinstance(raw_calls, list), url, f"choices[{i}].message.tool_calls is not a list")
            calls = []
            for j, tc in enumerate(raw_calls):
                fn = tc.get("function") if isinstance(tc, dict) else None
                _need(
                    isinstance(fn, dict) and isinstance(fn.get("name"), str) and isinstance(fn.get("arguments"), str),
                    url,
                    f"choices[{i}].message.tool_calls[{j}] lacks function.name/arguments",
                )
                calls.append(
                    ChatCompletionMessageToolCall.model_construct(
                        id=str(tc.get("id", "")),
                        type="function",
                        function=Function.model_construct(name=fn["name"], arguments=fn["arguments"]),
                    )
                )
        message = ChatCompletionMessage.model_construct(
            role="assistant", content=content, tool_calls=calls, function_call=None, refusal=None
        )
        built.append(
            Choice.model_construct(
                index=ch.get("index", i),
                message=message,
                finish_reason=ch.get("finish_reason") or "stop",
                logprobs=None,
            )
        )
    usage = None
    u = body.get("usage")
    if u is not None:
        _need(isinstance(u, dict), url, "'usage' is not an object")
        nums = [u.get(k, 0) for k in ("prompt_tokens", "completion_tokens")]
        _need(all(isinstance(n, int) for n in nums), url, "'usage' token counts are not integers")
        usage = CompletionUsage.model_construct(
            prompt_tokens=nums[0],
            completion_tokens=nums[1],
            total_tokens=u.get("total_tokens", nums[0] + nums[1]),
            prompt_tokens_details=u.get("prompt_tokens_details"),
        )
    return ChatCompletion.model_construct(
        id=str(body.get("id", "")),
        object="chat.completion",
        created=body.get("created", 0),
        model=str(body.get("model", "")),
        choices=built,
        usage=usage,
    )


def retry_after_s(headers: httpx.Headers) -> float | None:
    """The wait in seconds a reply asks for, or ``None`` when it asks for none.

    Read from ``retry-after-ms`` (milliseconds, sent by OpenAI), else ``retry-after`` as seconds
    (a decimal is accepted) or as an HTTP date. An unreadable or non-finite value counts as none.
    """
    for name, scale in (("retry-after-ms", 0.001), ("retry-after", 1.0)):
        raw = headers.get(name)
        if raw is None:
            continue
        try:
            wait = float(raw) * scale
        except ValueError:
            wait = _seconds_until(raw) if name == "retry-after" else None
        if wait is not None and math.isfinite(wait):
            return wait
    return None


def _seconds_until(http_date: str) -> float | None:
    try:
        when = email.utils.parsedate_to_datetime(http_date)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:  # an HTTP date is GMT by definition
        when = when.replace(tzinfo=UTC)
    return (when - datetime.now(UTC)).total_seconds()


def _backoff_s(attempt: int) -> float:
    """The openai client's back-off: 0.5 s doubling per retry, capped at 8 s, minus up to 25 % jitter."""
    return min(0.5 * 2 ** (attempt - 1), 8.0) * (1 - 0.25 * random.random())


def _retry_wait_s(resp: httpx.Response, attempt: int) -> float | None:
    """How long to wait before retrying a failed status reply, or ``None``: do not retry."""
    asked = retry_after_s(resp.headers)
    if asked is not None and asked > MAX_RETRY_AFTER_S:
        return None
    hint = resp.headers.get("x-should-retry")
    if hint == "false":
        return None
    if hint != "true" and not (resp.status_code in _RETRY_STATUSES or resp.status_code >= 500):
        return None
    return asked if asked is not None and asked > 0 else _backoff_s(attempt)


def _status_error(resp: httpx.Response, url: str) -> openai.APIStatusError:
    """The openai client's exception for an error status, its message naming the endpoint."""
    text = resp.text.strip()
    try:
        body: Any = json.loads(text)
    except ValueError:
        body = text or None
    code = resp.status_code
    shown = text[:_ERROR_TEXT_CHARS] + ("..." if len(text) > _ERROR_TEXT_CHARS else "")
    message = f"Error code: {code} - {shown} ({url})" if shown else f"Error code: {code} ({url})"
    cls = _STATUS_ERRORS.get(code) or (openai.InternalServerError if code >= 500 else openai.APIStatusError)
    return cls(message, response=resp, body=body.get("error", body) if isinstance(body, dict) else body)


def _transport_error(err: httpx.TransportError, url: str, attempts: int) -> openai.APIConnectionError:
    """The openai client's exception for a failed connection or a timeout."""
    try:
        request = err.request
    except RuntimeError:  # httpx raises when the error carries no request
        request = httpx.Request("POST", url)
    if isinstance(err, httpx.TimeoutException):
        return openai.APITimeoutError(request=request)
    return openai.APIConnectionError(
        message=f"{url}: {type(err).__name__} after {attempts} attempts: {err}", request=request
    )


class LeanChatClient(ChatCompletionClient):
    """AutoGen ``ModelClient`` posting chat requests as plain JSON (non-streamed).

    Args:
        config: the ``config_list`` entry (model, api_key, base_url, timeout, max_retries, price).
        http_client: the shared ``httpx.Client`` (thread-safe).
        stream_client: the client that serves streamed requests (AutoGen's OpenAI client).
    """

    def __init__(self, config: dict[str, Any], *, http_client: httpx.Client, stream_client: Any = None):
        self.config = config
        self._http = http_client
        self._stream = stream_client
        self._url = (config.get("base_url") or "https://api.openai.com/v1").rstrip("/") + "/chat/completions"
        key = config.get("api_key")
        self._headers = {"Authorization": f"Bearer {key}"} if key else {}
        self._timeout = float(config.get("timeout") or 60.0)
        self._retries = int(config.get("max_retries", 2))
        price = config.get("price") or [0.0, 0.0]
        super().__init__(price_per_1k=(float(price[0]), float(price[1])))

    def create(self, params: dict[str, Any]) -> ChatCompletion:
        """Send one chat request, retried as the openai client retries it.

        Raises:
            openai.APIStatusError: an error status after the retries (its subclass for the
                status, e.g. ``openai.RateLimitError``), or at once when not retryable.
            openai.APITimeoutError: the last attempt timed out.
            openai.APIConnectionError: the last attempt could not connect or lost the connection.
            MalformedReplyError: the reply is not a chat completion.
        """
        if params.get("stream"):
            if self._stream is None:
                raise LLMError(f"{self._url}: a streamed request needs a stream_client")
            return self._stream.create(params)
        body = {k: v for k, v in params.items() if k not in _NOT_REQUEST}
        # the openai client sends extra_body's fields at the body's top level (how a grammar,
        # a repeat penalty or top_k reach the server); nested, a server would ignore them
        body.update(body.pop("extra_body", None) or {})
        body.setdefault("model", self.config.get("model"))
        attempt = 0
        while True:
            try:
                resp = self._http.post(self._url, json=body, headers=self._headers, timeout=self._timeout)
            except httpx.TransportError as err:
                # as the openai client: any transport failure (timeout, refused or reset
                # connection) is retried; found as resets with 50 runs opening connections at once
                if attempt >= self._retries:
                    raise _transport_error(err, self._url, attempt + 1) from err
                wait = _backoff_s(attempt + 1)
            else:
                if resp.status_code < 300:
                    break
                wait = _retry_wait_s(resp, attempt + 1) if attempt < self._retries else None
                if wait is None:
                    raise _status_error(resp, self._url)
            attempt += 1
            time.sleep(wait)
        try:
            data = resp.json()
        except ValueError as err:
            raise MalformedReplyError(f"malformed chat completion from {self._url}: not JSON") from err
        return parse_chat_completion(data, self._url)

    def message_retrieval(self, response: ChatCompletion) -> list[Any]:
        """The reply's messages: plain text, or the message object when it carries tool calls."""
        return [c.message if c.message.tool_calls else c.message.content for c in response.choices]

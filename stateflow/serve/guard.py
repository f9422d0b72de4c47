"""What every route of ``stateflow serve`` shares: who may call it (:class:`ServeAccess`), how much
it takes (:class:`ServeLimits`, :class:`RunSlots`), the checks made before any route sees a request
(:class:`ServeGuard`), a refusal with its HTTP status and reason, and one lock per thread so
requests for it are served one at a time.

Why the checks: a page open in the user's browser can reach a server on ``127.0.0.1``. A
cross-site ``POST`` with ``Content-Type: text/plain`` (a ``fetch`` or a plain HTML form) needs no
CORS preflight, so the browser sends it and only hides the reply; and a page on a domain the
attacker re-points at ``127.0.0.1`` (DNS rebinding) is even same-origin. So, like Jupyter, the
server checks for itself, before anything runs:

1. ``Host`` names an allowed host (the loopback names by default): no rebinding (421);
2. a request with an ``Origin`` that is neither the server's own nor a configured one is refused
   (403) when it could change anything (every method but ``GET``/``HEAD``); a request without
   ``Origin`` comes from a non-browser client (browsers always send it on such requests);
3. the bearer token, when one is set (401): ``stateflow serve`` requires one off the loopback;
4. a body is ``application/json`` (415): the content types a page may send without a preflight
   (``text/plain``, form encodings) are refused, so a browser must ask first, and is told no;
5. a body is at most :attr:`ServeLimits.max_body_bytes` (413), on every route alike.
"""

from __future__ import annotations

import asyncio
import hmac
import ipaddress
import json
import math
import urllib.parse
from collections.abc import AsyncIterator, Awaitable, Callable, MutableMapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

from stateflow.errors import ConfigError

__all__ = [
    "LOOPBACK_HOSTS",
    "TOKEN_ENV",
    "Refused",
    "RunSlots",
    "ServeAccess",
    "ServeGuard",
    "ServeLimits",
    "ThreadLocks",
    "is_loopback",
    "read_body",
    "replay",
    "send_refusal",
    "within",
]

#: The ``Host`` names a server answers by default: the loopback's (any port).
LOOPBACK_HOSTS = ("localhost", "127.0.0.1", "[::1]")
#: The environment variable ``stateflow serve`` reads its bearer token from (``--token`` wins).
TOKEN_ENV = "STATEFLOW_SERVE_TOKEN"
_SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
_SINGLE = frozenset({"host", "origin", "authorization", "content-type", "content-length"})
_MIN_TOKEN = 16

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


class Refused(Exception):
    """A request that cannot be served: its HTTP status and the reason (and headers to send)."""

    def __init__(self, status: int, reason: str, headers: dict[str, str] | None = None):
        super().__init__(reason)
        self.status, self.reason, self.headers = status, reason, dict(headers or {})


def is_loopback(host: str) -> bool:
    """Whether binding ``host`` keeps a server on this machine (``localhost``, ``127.0.0.0/8``, ``::1``)."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _host_name(value: str) -> str | None:
    """The host part of a ``Host`` header (``name[:port]``, ``[v6][:port]``), lower-cased; ``None``
    when malformed."""
    value = value.strip().lower()
    if value.startswith("["):
        end = value.find("]")
        if end < 0:
            return None
        name, rest = value[: end + 1], value[end + 1 :]
    else:
        name, sep, port = value.partition(":")
        rest = sep + port
    if rest and not (rest.startswith(":") and rest[1:].isdigit()):
        return None
    return name or None


def _allowed_host(entry: str) -> str:
    """A configured host name, normalised (``::1`` becomes ``[::1]``); raises on a port or a URL."""
    name = entry.strip().lower()
    if name == "*":
        return name
    try:
        if ipaddress.ip_address(name.strip("[]")).version == 6:
            return f"[{name.strip('[]')}]"
    except ValueError:
        pass
    if not name or any(c in name for c in "/:@ []") or not all(c.isalnum() or c in ".-_" for c in name):
        raise ConfigError(
            f"allowed host {entry!r}: give a host name or address as clients type it, without scheme "
            "or port (e.g. myserver.lan or 192.168.1.5), or '*' for any"
        )
    return name


def _origin(value: str) -> str | None:
    """``scheme://host[:port]`` normalised (lower case, default port dropped); ``None`` when
    ``value`` is not such an origin (``null``, a path, another scheme)."""
    try:
        parts = urllib.parse.urlsplit(value.strip())
        port = parts.port
    except ValueError:
        return None
    if parts.scheme not in ("http", "https") or not parts.hostname or parts.path not in ("", "/"):
        return None
    if parts.query or parts.fragment or parts.username or parts.password:
        return None
    host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    default = 80 if parts.scheme == "http" else 443
    return f"{parts.scheme}://{host}" + ("" if port in (None, default) else f":{port}")


@dataclass(frozen=True)
class ServeAccess:
    """Who may call a served flow (see the module docstring for why each check exists).

    Attributes:
        hosts: ``Host`` names answered, with any port (default: the loopback's). ``"*"``
            answers any name: only behind a proxy that checks ``Host`` itself.
        origins: browser origins (``https://app.example:8443``) allowed besides the server's
            own; they also get CORS answers, so a front end there can call the server.
        token: a bearer token every request must carry (``Authorization: Bearer TOKEN``);
            never shown (not in ``repr``, not in any message). ``stateflow serve`` requires one
            when it binds anything but the loopback.

    Raises:
        ConfigError: a host with a scheme or port, an origin that is not ``scheme://host[:port]``,
            a token shorter than 16 characters or with characters a header cannot carry.
    """

    hosts: tuple[str, ...] = LOOPBACK_HOSTS
    origins: tuple[str, ...] = ()
    token: str | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "hosts", tuple(dict.fromkeys(_allowed_host(h) for h in self.hosts)))
        origins = []
        for entry in self.origins:
            norm = _origin(entry)
            if norm is None:
                raise ConfigError(
                    f"allowed origin {entry!r}: give scheme://host[:port] as a browser sends it "
                    "(e.g. http://localhost:3000), without a path"
                )
            origins.append(norm)
        object.__setattr__(self, "origins", tuple(dict.fromkeys(origins)))
        token = self.token
        if token is not None and (len(token) < _MIN_TOKEN or not all(33 <= ord(c) <= 126 for c in token)):
            raise ConfigError(
                f"the serve token (--token or ${TOKEN_ENV}) must be at least {_MIN_TOKEN} visible ASCII "
                "characters without spaces; make one with: python -c 'import secrets; "
                "print(secrets.token_urlsafe(32))'"
            )

    def with_host(self, host: str) -> ServeAccess:
        """These settings answering ``host`` too (a bound address clients use)."""
        return ServeAccess((*self.hosts, host), self.origins, self.token)

    def host_allowed(self, header: str | None) -> bool:
        """Whether a request's ``Host`` header names an allowed host."""
        if header is None:
            return False
        name = _host_name(header)
        return name is not None and ("*" in self.hosts or name in self.hosts)

    def token_ok(self, authorization: str | None) -> bool:
        """Whether an ``Authorization`` header carries the token (always, when none is set)."""
        if self.token is None:
            return True
        scheme, _, given = (authorization or "").partition(" ")
        return scheme.lower() == "bearer" and hmac.compare_digest(given.strip().encode(), self.token.encode())


@dataclass(frozen=True)
class ServeLimits:
    """How much a served flow takes; every refusal has its status and says which limit and flag.

    Attributes:
        max_body_bytes: a request body, on every route (413).
        max_messages: messages of an AG-UI request, parts of an A2A message (413).
        max_message_chars: characters of one message (its text; the JSON of other content),
            of an A2A message's parts together and of an interrupt's answer (413).
        max_runs: runs in flight on the server at once, both protocols together; one more is
            refused with 503 and ``Retry-After`` (A2A: when it comes to run, a task ``rejected``).
        run_timeout_s: wall-clock seconds a run may take; then the server cancels it at its
            next event (a model call that sends nothing is bounded by its profile's timeout)
            and it ends with a run error / failed task, its thread kept at its last checkpoint.
        retry_after_s: the ``Retry-After`` sent with a 503.
        max_finished_tasks: finished A2A tasks (completed, failed, canceled, rejected) the
            server keeps for ``tasks/get``; beyond it the oldest are dropped (a task waiting for
            its answer is kept). The conversation's thread stays in the checkpointer.
    """

    max_body_bytes: int = 1 << 20
    max_messages: int = 64
    max_message_chars: int = 100_000
    max_runs: int = 64
    run_timeout_s: float = 600.0
    retry_after_s: int = 5
    max_finished_tasks: int = 1000

    def __post_init__(self) -> None:
        names = ("max_body_bytes", "max_messages", "max_message_chars", "max_runs", "retry_after_s")
        for name in (*names, "max_finished_tasks"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(f"ServeLimits.{name} must be a whole number >= 1, got {value!r}")
        t = self.run_timeout_s
        if isinstance(t, bool) or not isinstance(t, int | float) or not math.isfinite(t) or t <= 0:
            raise ConfigError(f"ServeLimits.run_timeout_s must be a number of seconds > 0, got {t!r}")


class RunSlots:
    """How many runs are in flight on a server, against :attr:`ServeLimits.max_runs`.

    Used from the server's event loop only: a check and a take with no ``await`` between them
    cannot race.
    """

    def __init__(self, limit: int):
        self.limit = limit
        self.used = 0

    def full(self) -> bool:
        return self.used >= self.limit

    def take(self) -> bool:
        """Take a slot if one is free (``False``: the server is at its limit)."""
        if self.full():
            return False
        self.used += 1
        return True

    def give(self) -> None:
        """Give a taken slot back."""
        if self.used <= 0:
            raise RuntimeError("RunSlots.give without a slot taken")
        self.used -= 1

    def busy(self, retry_after_s: int) -> Refused:
        """The 503 for a request beyond the limit."""
        return Refused(
            503,
            f"the server runs {self.limit} runs at once already (its --max-runs); retry in {retry_after_s} s",
            {"retry-after": str(retry_after_s)},
        )


class ThreadLocks:
    """One asyncio lock per thread id while requests for it are in flight (then dropped)."""

    def __init__(self) -> None:
        self._locks: dict[str, tuple[asyncio.Lock, int]] = {}

    @asynccontextmanager
    async def hold(self, thread_id: str) -> AsyncIterator[None]:
        """Hold ``thread_id``'s lock (waiting for the requests before this one)."""
        lock, users = self._locks.get(thread_id, (asyncio.Lock(), 0))
        self._locks[thread_id] = (lock, users + 1)
        try:
            async with lock:
                yield
        finally:
            lock, users = self._locks[thread_id]
            if users == 1:
                del self._locks[thread_id]
            else:
                self._locks[thread_id] = (lock, users - 1)


async def within(events: AsyncIterator[Any], seconds: float) -> AsyncIterator[Any]:
    """``events`` until ``seconds`` have passed, then :class:`TimeoutError`.

    The time-out surrounds each wait for the next event only, never the consumer's own work
    between events (a time-out around a ``yield`` would cancel whatever the consumer awaits
    then, e.g. a response being sent). A time-out while waiting cancels the wait: for
    :func:`stateflow.live.astream_call`, that cancels the run and joins its thread.
    """
    deadline = asyncio.get_running_loop().time() + seconds
    while True:
        try:
            async with asyncio.timeout_at(deadline):
                event = await anext(events)
        except StopAsyncIteration:
            return
        yield event


async def send_refusal(send: Send, refused: Refused) -> None:
    """Answer with ``refused``'s status and ``{"error": reason}``."""
    body = json.dumps({"error": refused.reason}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    headers += [(k.encode("latin-1"), v.encode("latin-1")) for k, v in refused.headers.items()]
    await send({"type": "http.response.start", "status": refused.status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


class _Gone(Exception):
    """The client disconnected while its body was read."""


async def read_body(receive: Receive, limit: int) -> bytes:
    """A request's whole body, refused (413) as soon as it passes ``limit`` bytes."""
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise _Gone
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            raise Refused(413, f"request body larger than {limit} bytes (the server's --max-body)")
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks)


def replay(body: bytes, receive: Receive) -> Receive:
    """A ``receive`` that hands ``body`` over once, then passes ``receive``'s messages on (the
    disconnect a streaming response listens for)."""
    pending = [{"type": "http.request", "body": body, "more_body": False}]

    async def again() -> Message:
        return pending.pop() if pending else await receive()

    return again


class ServeGuard:
    """ASGI middleware making the checks of the module docstring before any route runs.

    Args:
        app: the application guarded.
        access: hosts, origins and token.
        limits: the body size limit (the routes check the rest).
    """

    def __init__(self, app: ASGIApp, *, access: ServeAccess, limits: ServeLimits):
        self.app, self.access, self.limits = app, access, limits

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":  # lifespan (no websocket route exists)
            await self.app(scope, receive, send)
            return
        headers: dict[str, str] = {}
        twice = None
        for k, v in scope["headers"]:
            name = k.decode("latin-1").lower()
            if name in headers and name in _SINGLE:
                twice = name
            headers[name] = v.decode("latin-1")
        try:
            if twice is not None:  # which one would a route read? Neither: refused
                raise Refused(400, f"the request has more than one {twice!r} header")
            cors = self._check(scope, headers)
            if scope["method"] == "OPTIONS" and cors is not None:
                await self._preflight(send, cors)
                return
            if scope["method"] not in _SAFE_METHODS:
                self._check_content_type(headers)
                declared = headers.get("content-length", "")
                if declared.isdigit() and int(declared) > self.limits.max_body_bytes:
                    raise Refused(413, f"request body larger than {self.limits.max_body_bytes} bytes (--max-body)")
                receive = replay(await read_body(receive, self.limits.max_body_bytes), receive)
        except Refused as refused:
            await send_refusal(send, refused)
            return
        except _Gone:
            return
        if cors is not None:
            send = _with_cors(send, cors)
        await self.app(scope, receive, send)

    def _check(self, scope: Scope, headers: dict[str, str]) -> str | None:
        """Host, Origin and token; returns the allowed cross origin that needs CORS headers."""
        host = headers.get("host")
        if not self.access.host_allowed(host):
            allowed = ", ".join(self.access.hosts)
            raise Refused(
                421,
                f"Host {str(host)[:100]!r} is not served here (allowed: {allowed}, any port); "
                "a name clients use must be allowed with --allow-host",
            )
        cors = None
        origin = headers.get("origin")
        if origin is not None:
            norm = _origin(origin)
            own = _origin(f"{scope.get('scheme', 'http')}://{host}")
            if norm is not None and norm != own and norm in self.access.origins:
                cors = norm
            elif norm != own and scope["method"] not in ("GET", "HEAD"):  # a page of another site
                raise Refused(
                    403,
                    f"Origin {origin[:100]!r} may not call this server (a page of another site); "
                    "allow a front end's origin with --allow-origin",
                )
        if scope["method"] == "OPTIONS" and cors is not None:
            return cors  # a CORS preflight carries no credentials: answered for allowed origins only
        if not self.access.token_ok(headers.get("authorization")):
            raise Refused(
                401,
                "this server needs its token: send 'Authorization: Bearer TOKEN' "
                f"(the server's --token / ${TOKEN_ENV})",
                {"www-authenticate": "Bearer"},
            )
        return cors

    @staticmethod
    def _check_content_type(headers: dict[str, str]) -> None:
        given = headers.get("content-type", "")
        if given.split(";", 1)[0].strip().lower() != "application/json":
            raise Refused(415, f"Content-Type {given[:100]!r}: this server takes application/json bodies only")

    async def _preflight(self, send: Send, origin: str) -> None:
        headers = [
            (b"access-control-allow-origin", origin.encode("latin-1")),
            (b"access-control-allow-methods", b"GET, POST"),
            (b"access-control-allow-headers", b"authorization, content-type, accept"),
            (b"access-control-max-age", b"600"),
            (b"vary", b"origin"),
            (b"content-length", b"0"),
        ]
        await send({"type": "http.response.start", "status": 204, "headers": headers})
        await send({"type": "http.response.body", "body": b""})


def _with_cors(send: Send, origin: str) -> Send:
    async def sending(message: Message) -> None:
        if message["type"] == "http.response.start":
            extra = [(b"access-control-allow-origin", origin.encode("latin-1")), (b"vary", b"origin")]
            message = {**message, "headers": [*message.get("headers", []), *extra]}
        await send(message)

    return sending

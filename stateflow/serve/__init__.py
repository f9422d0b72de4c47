"""A flow as a service: AG-UI (server-sent events) and A2A over HTTP, with durable threads.

Needs the ``serve`` extra (``pip install 'stateflow[serve]'``: AG2's ``ag-ui`` and ``a2a``
extras, Starlette and uvicorn). See :mod:`stateflow.serve.app` for the routes and
``docs/live.md`` for a walk-through.

Example (a real server on the loopback)::

    from stateflow.serve import FlowService, serve
    serve(FlowService(flow, SQLiteCheckpointer("threads.db"), models="local"), port=8321)

A served flow is safe to run on a laptop by default: only loopback ``Host`` names, no request
from another site's page, JSON bodies only, bounded bodies, messages, runs and run time
(:class:`ServeAccess`, :class:`ServeLimits`; ``docs/live.md``, "Safe by default").
"""

from __future__ import annotations

import socket
from collections.abc import Callable

from stateflow.errors import ConfigError, listen_error
from stateflow.serve.app import FlowService, build_app
from stateflow.serve.guard import TOKEN_ENV, ServeAccess, ServeLimits, is_loopback

__all__ = ["TOKEN_ENV", "FlowService", "ServeAccess", "ServeLimits", "bind", "build_app", "serve"]


def bind(host: str, port: int, access: ServeAccess) -> socket.socket:
    """A listening socket on ``host``:``port``, after checking that ``access`` may be served there.

    Raises:
        ConfigError: a non-loopback ``host`` without a token; the port is taken; the address
            cannot be bound (each one line, saying what to do).
    """
    if not is_loopback(host) and access.token is None:
        raise ConfigError(
            f"--host {host} serves other machines: give a token (--token or ${TOKEN_ENV}), which every "
            "request must then send as 'Authorization: Bearer TOKEN', or bind 127.0.0.1"
        )
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn: a listener in TIME_WAIT
        sock.bind((host.strip("[]"), port))
        sock.listen(2048)
    except (OSError, OverflowError) as err:  # gaierror is an OSError
        sock.close()
        raise listen_error(host, port, err) from None
    return sock


def serve(
    service: FlowService,
    *,
    host: str = "127.0.0.1",
    port: int = 8321,
    access: ServeAccess | None = None,
    limits: ServeLimits | None = None,
    log_level: str = "warning",
    on_ready: Callable[[str], None] | None = None,
) -> None:
    """Serve ``service`` with uvicorn until interrupted (Ctrl-C).

    The port is bound first: a taken port raises before anything is announced.

    Args:
        service: the flow, its models and its checkpointer.
        host: the interface to bind: the loopback unless told otherwise (anything else needs
            ``access.token``; a specific address bound is added to the allowed ``Host`` names).
        port: the TCP port.
        access: allowed hosts, origins and the token (default: the loopback, no token).
        limits: body size, messages, runs at once, run time-out (default: :class:`ServeLimits`).
        log_level: uvicorn's log level.
        on_ready: called with the server's URL once the port is bound, before serving.

    Raises:
        ConfigError: see :func:`bind`.
    """
    import uvicorn

    access = access or ServeAccess()
    sock = bind(host, port, access)
    try:
        if not is_loopback(host) and host not in ("0.0.0.0", "::", "[::]"):
            access = access.with_host(host)  # the address clients use to reach this interface
        shown = f"[{host.strip('[]')}]" if ":" in host else host
        url = f"http://{shown}:{port}"
        app = build_app(service, base_url=url, access=access, limits=limits)
        if on_ready is not None:
            on_ready(url)
        uvicorn.Server(uvicorn.Config(app, log_level=log_level)).run(sockets=[sock])
    finally:
        sock.close()

"""A flow as a service: AG-UI (server-sent events) and A2A over HTTP, with durable threads.

Needs the ``serve`` extra (``pip install 'stateflow[serve]'``: AG2's ``ag-ui`` and ``a2a``
extras, Starlette and uvicorn). See :mod:`stateflow.serve.app` for the routes and
``docs/live.md`` for a walk-through.

Example (a real server on the loopback)::

    from stateflow.serve import FlowService, serve
    serve(FlowService(flow, SQLiteCheckpointer("threads.db"), models="local"), port=8321)
"""

from __future__ import annotations

from stateflow.serve.app import FlowService, build_app

__all__ = ["FlowService", "build_app", "serve"]


def serve(service: FlowService, *, host: str = "127.0.0.1", port: int = 8321, log_level: str = "warning") -> None:
    """Serve ``service`` with uvicorn until interrupted (Ctrl-C).

    Args:
        service: the flow, its models and its checkpointer.
        host: the interface to bind: the loopback unless told otherwise (``0.0.0.0`` exposes
            the flow, and the models it calls, to the network: put authentication in front).
        port: the TCP port.
        log_level: uvicorn's log level.
    """
    import uvicorn

    shown = f"[{host}]" if ":" in host else host
    app = build_app(service, base_url=f"http://{shown}:{port}")
    uvicorn.run(app, host=host, port=port, log_level=log_level)

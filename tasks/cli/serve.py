"""``stateflow serve FLOW``: a flow over HTTP (AG-UI, A2A, durable threads; :mod:`stateflow.serve`).

Binds the loopback unless ``--host`` says otherwise. Threads are kept where ``stateflow run
--thread`` keeps them (``--checkpoints``, else ``$STATEFLOW_CHECKPOINTS``, else the user data
directory), so a thread paused over HTTP can also be answered with ``stateflow resume``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape
from stateflow.tasks.cli.threads import CheckpointsOption

from stateflow.errors import ConfigError

__all__ = ["register"]


def register(app: typer.Typer) -> None:
    @app.command("serve")
    def serve_cmd(
        flow: Annotated[str, typer.Argument(help="registered flow name or module:attribute")],
        host: Annotated[str, typer.Option(help="interface to bind (0.0.0.0 exposes the flow to the network)")] = (
            "127.0.0.1"
        ),
        port: Annotated[int, typer.Option(min=1, max=65535, help="TCP port")] = 8321,
        model: Annotated[
            list[str] | None, typer.Option("--model", "-m", help="NAME or STATE=NAME (repeatable)")
        ] = None,
        config: Annotated[Path | None, typer.Option(help="TOML file with [profiles.*] and [models]")] = None,
        checkpoints: CheckpointsOption = None,
        max_transitions: Annotated[int | None, typer.Option(min=1, help="bound per run")] = None,
        timeout: Annotated[float | None, typer.Option(min=0.1, help="seconds per run")] = None,
    ) -> None:
        """Serve FLOW over HTTP: AG-UI at /agui (server-sent events), A2A at /a2a/, threads at /threads/ID."""
        try:
            import uvicorn  # noqa: F401  (the extra's presence, checked before anything starts)

            from stateflow.serve import FlowService, serve
        except ImportError as err:  # the extra is missing
            raise ConfigError(
                f"stateflow serve needs the serve extra ({err}): pip install 'stateflow[serve]'"
            ) from None
        from stateflow.tasks.cli import registered_flows
        from stateflow.tasks.cli.run import _announce, _assignment

        from stateflow.checkpoint.location import open_checkpointer
        from stateflow.cli.flows import resolve_flow

        console = Console(stderr=True)
        the_flow = resolve_flow(flow, registered_flows())
        assignment, _ = _assignment(model or [], config)
        _announce(console, assignment)
        store = open_checkpointer(checkpoints)
        service = FlowService(
            the_flow,
            store,
            models=assignment,
            flow_ref=flow,
            max_transitions=max_transitions,
            timeout_s=timeout,
        )
        shown = f"http://{host}:{port}"
        console.print(f"serving flow [bold]{escape(the_flow.name)}[/] at {escape(shown)}: /agui (AG-UI), /a2a/ (A2A)")
        try:
            serve(service, host=host, port=port)
        finally:
            store.close()

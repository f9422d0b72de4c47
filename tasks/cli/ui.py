"""`stateflow ui`: look at runs in a browser (see :mod:`stateflow.tasks.ui`).

::

    stateflow ui runs/levers                       # http://127.0.0.1:8765/
    stateflow ui runs/a runs/b docs/data/paper/intercode-sql/local.jsonl --port 9000
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape

__all__ = ["register"]


def register(app: typer.Typer) -> None:
    """Add ``ui`` to ``app``."""

    @app.command("ui")
    def ui_cmd(
        paths: Annotated[
            list[str], typer.Argument(help="results directories (a run may still be writing them) or .jsonl files")
        ],
        host: Annotated[
            str, typer.Option("--host", help="address to listen on (loopback by default: the pages show prompts)")
        ] = "127.0.0.1",
        port: Annotated[int, typer.Option("--port", min=0, max=65535, help="port (0: any free one)")] = 8765,
        verbose: Annotated[bool, typer.Option("--verbose", help="log every request")] = False,
        config: Annotated[
            Path | None,
            typer.Option(help="TOML file with the runs' [profiles.*]: what an episode page's replays may use"),
        ] = None,
    ) -> None:
        """Serve a local web app over runs: overview, tasks, episodes, side by side, live."""
        from stateflow.tasks.ui.app import UiApp
        from stateflow.tasks.ui.index import RunIndex
        from stateflow.tasks.ui.server import UiServer, is_loopback

        console = Console(stderr=True)
        from stateflow.errors import listen_error
        from stateflow.paths import cache_dir

        index = RunIndex(paths, summaries=cache_dir() / "ui")
        index.refresh_summaries()
        from stateflow.tasks.harness.registry import default_registry
        from stateflow.tasks.ui.whatif_jobs import WhatIfJobs

        from stateflow.profiles import ModelAssignment, load_config

        profiles = load_config(config) if config else ModelAssignment.of(None)
        app = UiApp(
            index,
            template_cache=cache_dir() / "ui" / "templates",
            whatif=WhatIfJobs(default_registry(), profiles),
        )
        try:
            server = UiServer(app, host, port, verbose=verbose)
        except OSError as err:
            raise listen_error(host, port, err) from None
        if not is_loopback(host):
            console.print(
                f"[yellow]warning:[/] listening on {escape(host)}: anyone who can reach it sees every prompt and reply"
            )
        n = sum(s.records for s in index.summaries)
        console.print(f"{n} episode(s) from {len(index.sources)} source(s); open {server.url}  (Ctrl-C stops)")
        try:
            server.serve_forever()
        except KeyboardInterrupt:
            pass
        finally:
            server.server_close()

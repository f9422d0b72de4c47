"""``stateflow resume``, ``stateflow threads`` and ``stateflow history``: saved runs at the command line.

``stateflow run FLOW --task TEXT --thread ID`` saves a run as a thread (a checkpoint at every
transition; see :mod:`stateflow.threads`). A flow that asks a deferred question
(``Human(defer=True)``) then stops with the question, and the process exits;
``stateflow resume ID --answer TEXT`` continues it later, from any process on the machine (or
any machine, with a PostgreSQL store). ``resume`` without ``--answer`` continues a thread that
crashed or failed from its last checkpoint.

Where threads are kept: ``--checkpoints`` (a SQLite file or a ``postgresql://`` DSN), else
``$STATEFLOW_CHECKPOINTS``, else a SQLite file in the user data directory.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text

from stateflow import RunResult, View
from stateflow.errors import ConfigError, ThreadNotFound

__all__ = ["CheckpointsOption", "print_run", "register", "view_named"]

CheckpointsOption = Annotated[
    str | None,
    typer.Option(
        "--checkpoints",
        help="where threads are kept: a SQLite file or postgresql://... (default: $STATEFLOW_CHECKPOINTS, "
        "else threads.db in the user data directory)",
    ),
]


def view_named(name: str) -> View:
    """The view a thread was saved in, by its name."""
    from stateflow.sf_agent import SFAgentView

    from stateflow import StateFlowView

    views = {"stateflow": StateFlowView, "sf_agent": SFAgentView}
    if name not in views:
        raise ConfigError(f"unknown view {name!r}: {', '.join(views)}")
    return views[name]()


def print_run(console: Console, result: RunResult) -> None:
    """The history (as plain text: model output is never markup), then the outcome as JSON; a
    paused run ends with its question and the command that answers it."""
    for m in result.history:
        console.print(Text.assemble((f"{m.state}/{m.kind.value}", "dim"), f" {m.name}: {m.content}"), highlight=False)
    summary = {k: result.to_dict()[k] for k in ("exit_state", "stop_reason", "path", "usage_by_state")}
    if result.thread_id is not None:
        summary = {"thread": result.thread_id, "status": result.status, **summary}
    typer.echo(json.dumps(summary, indent=2))
    if result.pending is not None:
        console.print(Text.assemble(("paused: ", "bold yellow"), result.pending.question), highlight=False)
        console.print(Text(f'answer it with: stateflow resume {result.thread_id} --answer "..."'), highlight=False)


def _age(seconds: float) -> str:
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            return f"{seconds / size:.0f} {unit} ago"
    return f"{seconds:.0f} s ago"


def register(app: typer.Typer) -> None:
    """Add ``resume``, ``threads`` and ``history`` to ``app``."""

    @app.command("resume")
    def resume_cmd(
        thread: Annotated[str, typer.Argument(help="the thread id (see stateflow threads)")],
        answer: Annotated[str | None, typer.Option(help="the answer to the question the thread is paused on")] = None,
        flow: Annotated[
            str | None, typer.Option(help="the flow (name or module:attr); default: the one the thread was run with")
        ] = None,
        model: Annotated[
            list[str] | None,
            typer.Option("--model", "-m", help="NAME or STATE=NAME (default: the thread's own models)"),
        ] = None,
        config: Annotated[Path | None, typer.Option(help="TOML file with [profiles.*] and [models]")] = None,
        checkpoints: CheckpointsOption = None,
    ) -> None:
        """Continue a saved thread: answer its question, or go on after a crash or failure."""
        from stateflow.tasks.cli import registered_flows
        from stateflow.tasks.cli.run import _assignment

        from stateflow.checkpoint.location import open_checkpointer
        from stateflow.cli.flows import resolve_flow
        from stateflow.runtime import resume

        store = open_checkpointer(checkpoints)
        try:
            latest = store.latest(thread)
            if latest is None:
                raise ThreadNotFound(thread, repr(store))
            ref = flow or latest.payload.get("flow_ref")
            if not isinstance(ref, str) or not ref:
                raise ConfigError(
                    f"thread {thread!r} was not started from the command line: give the flow with --flow module:attr"
                )
            models = _assignment(model or [], config)[0] if model or config else None
            result = resume(
                thread,
                answer,
                checkpointer=store,
                flow=resolve_flow(ref, registered_flows()),
                models=models,
                view=view_named(str(latest.payload.get("view", "stateflow"))),
            )
        finally:
            store.close()
        print_run(Console(stderr=True), result)

    @app.command("threads")
    def threads_cmd(
        status: Annotated[
            str | None, typer.Option(help="only threads with this status: running, paused, finished, failed")
        ] = None,
        checkpoints: CheckpointsOption = None,
    ) -> None:
        """List saved threads with their status, state and age (newest first)."""
        from stateflow.checkpoint.location import open_checkpointer

        valid = ("running", "paused", "finished", "failed")
        if status is not None and status not in valid:
            raise ConfigError(f"--status {status!r}: choose from {', '.join(valid)}")
        store = open_checkpointer(checkpoints)
        try:
            rows = [t for t in store.threads() if status is None or t.status.value == status]
        finally:
            store.close()
        table = Table("thread", "flow", "status", "state", "step", "updated", "forked from", title=repr(store))
        now = time.time()
        for t in rows:
            parent = f"{t.parent[0]}@{t.parent[1]}" if t.parent else ""
            table.add_row(
                Text(t.thread_id),
                Text(t.flow_name),
                t.status.value,
                Text(t.state),
                str(t.step),
                _age(now - t.updated_at),
                Text(parent),
            )
        Console(width=max(Console().width, 110)).print(table)
        if not rows:
            typer.echo("no threads" + (f" with status {status}" if status else ""))

    @app.command("history")
    def history_cmd(
        thread: Annotated[str, typer.Argument(help="the thread id")],
        checkpoints: CheckpointsOption = None,
    ) -> None:
        """A thread's checkpoints: step, status, state, transitions, tokens, seconds, last message."""
        from stateflow.checkpoint.location import open_checkpointer
        from stateflow.threads import history

        store = open_checkpointer(checkpoints)
        try:
            for line in history(thread, checkpointer=store):
                typer.echo(str(line))
        finally:
            store.close()

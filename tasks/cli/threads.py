"""``stateflow resume``, ``fork``, ``threads`` and ``history``: saved runs at the command line.

``stateflow run FLOW --task TEXT --thread ID`` saves a run as a thread (a checkpoint at every
transition; see :mod:`stateflow.threads`). A flow that asks a deferred question
(``Human(defer=True)``) then stops with the question, and the process exits;
``stateflow resume ID --answer TEXT`` continues it later, from any process on the machine (or
any machine, with a PostgreSQL store). ``resume`` without ``--answer`` continues a thread that
crashed or failed from its last checkpoint; ``stateflow fork ID --at STEP`` starts a new thread
from any step (``stateflow history ID`` lists them), with other models or another flow if given.

Where threads are kept: ``--checkpoints`` (a SQLite file or a ``postgresql://`` DSN), else
``$STATEFLOW_CHECKPOINTS``, else a SQLite file in the user data directory.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text

from stateflow import RunResult, View
from stateflow.errors import ConfigError, ThreadNotContinuable

if TYPE_CHECKING:
    from stateflow.checkpoint.protocol import Checkpointer
    from stateflow.flow import Flow
    from stateflow.profiles import ModelAssignment

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


FlowOption = Annotated[
    str | None,
    typer.Option(help="the flow (name, module:attr or file.py:attr); default: the one the thread was run with"),
]
ModelOption = Annotated[
    list[str] | None,
    typer.Option("--model", "-m", help="NAME or STATE=NAME (default: the thread's own models)"),
]
ConfigOption = Annotated[Path | None, typer.Option(help="TOML file with [profiles.*] and [models]")]


@contextmanager
def _store(checkpoints: str | None) -> Iterator[Checkpointer]:
    from stateflow.checkpoint.location import open_checkpointer

    store = open_checkpointer(checkpoints, create=False)
    try:
        yield store
    finally:
        store.close()


def _loaded_flow(thread: str, payload: dict[str, Any], given: str | None) -> Flow:
    """``--flow``, else the flow the thread was started with (a command-line run saves how to load it)."""
    from stateflow.tasks.cli import registered_flows

    from stateflow.cli.flows import resolve_flow

    ref = given or payload.get("flow_ref")
    if not isinstance(ref, str) or not ref:
        raise ConfigError(
            f"thread {thread!r} was started from Python, which saves no way to load its flow: "
            "give it with --flow module:attr (or path/to/file.py:attr)"
        )
    return resolve_flow(ref, registered_flows())


def _models(model: list[str] | None, config: Path | None) -> ModelAssignment | None:
    from stateflow.tasks.cli.run import _assignment

    return _assignment(model or [], config)[0] if model or config else None


def _advice(err: ThreadNotContinuable) -> str:
    """What to type next, for a thread that cannot continue the way the command asked."""
    t = err.thread_id
    if err.status == "finished":
        return (
            f"thread {t!r} has finished (in state {err.state!r}); to branch off, pick a step with "
            f"`stateflow history {t}` and run `stateflow fork {t} --at STEP`"
        )
    if err.status == "paused":
        question = (err.question or "")[-120:]
        return (
            f"thread {t!r} is paused in state {err.state!r}, waiting for an answer to {question!r}: "
            f'stateflow resume {t} --answer "..."'
        )
    return (
        f"thread {t!r} is {err.status}, not waiting for an answer (an answer already given was saved): "
        f"continue it with `stateflow resume {t}` without --answer"
    )


def _age(seconds: float) -> str:
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            return f"{seconds / size:.0f} {unit} ago"
    return f"{seconds:.0f} s ago"


def register(app: typer.Typer) -> None:
    """Add ``resume``, ``fork``, ``threads`` and ``history`` to ``app``."""

    @app.command("resume")
    def resume_cmd(
        thread: Annotated[str, typer.Argument(help="the thread id (see stateflow threads)")],
        answer: Annotated[str | None, typer.Option(help="the answer to the question the thread is paused on")] = None,
        flow: FlowOption = None,
        model: ModelOption = None,
        config: ConfigOption = None,
        checkpoints: CheckpointsOption = None,
    ) -> None:
        """Continue a saved thread: answer its question, or go on after a crash or failure."""
        from stateflow.runtime import resume
        from stateflow.threads import latest_to_continue

        with _store(checkpoints) as store:
            try:  # where the thread stands first: that is what the user needs to hear
                latest = latest_to_continue(store, thread, answering=answer is not None)
            except ThreadNotContinuable as err:
                raise ConfigError(_advice(err)) from None
            loaded = _loaded_flow(thread, latest.payload, flow)
            result = resume(
                thread,
                answer,
                checkpointer=store,
                flow=loaded,
                models=_models(model, config),
                view=view_named(str(latest.payload.get("view", "stateflow"))),
            )
        print_run(Console(stderr=True), result)

    @app.command("fork")
    def fork_cmd(
        thread: Annotated[str, typer.Argument(help="the thread to branch off (see stateflow threads)")],
        at: Annotated[int, typer.Option("--at", min=0, help="the step to start from (see stateflow history ID)")],
        answer: Annotated[str | None, typer.Option(help="the answer, when that step is a paused question")] = None,
        new_thread: Annotated[
            str | None, typer.Option("--new-thread", help="the new thread's id (default: ID.<random>)")
        ] = None,
        flow: FlowOption = None,
        model: ModelOption = None,
        config: ConfigOption = None,
        checkpoints: CheckpointsOption = None,
    ) -> None:
        """Start a new thread from any step of a saved one (nothing before that step is asked again),
        with other models (--model) or another flow (--flow) if given; the source thread is kept."""
        from stateflow.runtime import fork

        with _store(checkpoints) as store:
            source = store.get(thread, at)
            loaded = _loaded_flow(thread, source.payload, flow)
            result = fork(
                thread,
                at,
                checkpointer=store,
                flow=loaded,
                models=_models(model, config),
                view=view_named(str(source.payload.get("view", "stateflow"))),
                answer=answer,
                new_thread_id=new_thread,
            )
        print_run(Console(stderr=True), result)

    @app.command("threads")
    def threads_cmd(
        status: Annotated[
            str | None, typer.Option(help="only threads with this status: running, paused, finished, failed")
        ] = None,
        checkpoints: CheckpointsOption = None,
    ) -> None:
        """List saved threads with their status, state and age (newest first)."""
        from stateflow.checkpoint.location import StoreMissing

        valid = ("running", "paused", "finished", "failed")
        if status is not None and status not in valid:
            raise ConfigError(f"--status {status!r}: choose from {', '.join(valid)}")
        try:
            with _store(checkpoints) as store:
                rows = [t for t in store.threads() if status is None or t.status.value == status]
        except StoreMissing as err:
            if checkpoints is not None:
                raise
            typer.echo(f"no threads yet (nothing saved in {err.path})")  # the default store, before any run
            return
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
        from stateflow.threads import history

        with _store(checkpoints) as store:
            for line in history(thread, checkpointer=store):
                typer.echo(str(line))

"""``stateflow whatif``: re-run a run's recorded episodes from a state on, with another model there.

See :mod:`stateflow.tasks.harness.whatif` for how the episodes are replayed and checked, and
:mod:`stateflow.tasks.reports.whatif` for the table.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape

from stateflow.errors import ConfigError
from stateflow.profiles import ModelAssignment, load_config, parse_model_options

__all__ = ["register"]


def register(app: typer.Typer) -> None:
    """Add ``whatif`` to ``app``."""

    @app.command("whatif")
    def whatif_cmd(
        run_dir: Annotated[Path, typer.Argument(help="a results directory of `stateflow run` (its --out)")],
        at: Annotated[str, typer.Option("--at", help="the state from which the change applies")],
        model: Annotated[list[str], typer.Option("--model", "-m", help="STATE=PROFILE: the change (repeatable)")],
        tasks: Annotated[str, typer.Option(help="which recorded tasks: all, A:B, 0,4,9")] = "all",
        config: Annotated[Path | None, typer.Option(help="the TOML file the run's profiles came from")] = None,
        out: Annotated[
            Path | None, typer.Option(help="where the new records go (default RUN_DIR/whatif-STATE-CHANGE)")
        ] = None,
        timeout: Annotated[float, typer.Option(min=0.1, help="seconds per episode")] = 600.0,
        dry_run: Annotated[bool, typer.Option("--dry-run", help="check and list the episodes; run nothing")] = False,
    ) -> None:
        """Re-run every recorded episode that reached --at from there with --model's change: the
        prefix's model replies are reused (never asked again) and its actions replayed in a fresh
        environment; prints reward before / after per task, tasks won and lost, tokens."""
        from stateflow.tasks.harness.registry import default_registry
        from stateflow.tasks.harness.whatif import plan_whatif, run_whatif
        from stateflow.tasks.reports.whatif import whatif_tables

        from stateflow.cli.inputs import output_dir

        if out is not None:  # before the records are read (thousands of lines)
            output_dir(out, "--out", create=False)
        console = Console(stderr=True)
        change = parse_model_options(model)
        if any(k == "default" for k in change):
            raise ConfigError("--model: name the state to change (STATE=PROFILE), e.g. --model Verify=local-small")
        base = load_config(config) if config else ModelAssignment.of(None)
        plan = plan_whatif(run_dir, at, change, registry=default_registry(), base=base, tasks=tasks, out=out)
        console.print(
            f"{len(plan.episodes)} episode(s) reached {escape(at)} and are re-run from there"
            + (f"; {len(plan.not_reached)} never did (tasks {plan.not_reached})" if plan.not_reached else "")
            + f"; records: {plan.out}"
        )
        if dry_run or not plan.episodes:
            return

        def progress(record) -> None:
            console.print(f"  task {record.task}: reward {record.reward_raw:.2f} ({record.status})")

        result = run_whatif(plan, timeout_s=timeout, on_record=progress)
        table_console = Console() if Console().is_terminal else Console(width=160)
        for table in whatif_tables(result):
            table_console.print(table)
        for r in result.diverged:
            console.print(f"[yellow]diverged:[/] task {r.task}: {escape(r.error or 'the replay stopped early')}")
        console.print(f"results: {plan.out / 'results.jsonl'}   report: stateflow report {plan.out}")

"""`stateflow demo`: StateFlow and SF_Agent on the demo SQL and Bash tasks, then the table and the report."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from stateflow.tasks.cli.run import _announce, _assignment, _auto_grammar, _table_console
from stateflow.tasks.cli.stopping import stop_on_signals

from stateflow.errors import ConfigError

__all__ = ["register"]


def register(app: typer.Typer) -> None:
    """Add ``demo`` to ``app``."""

    @app.command("demo")
    def demo_cmd(
        model: Annotated[list[str] | None, typer.Option("--model", "-m", help="NAME or STATE=NAME")] = None,
        config: Annotated[Path | None, typer.Option(help="TOML model config")] = None,
        sql_tasks: Annotated[str, typer.Option(help="demo SQL tasks to run")] = "0:6",
        bash_tasks: Annotated[str, typer.Option(help="demo Bash tasks to run")] = "0:3",
        out: Annotated[Path, typer.Option(help="results directory")] = Path("runs/demo"),
        workers: Annotated[int, typer.Option(min=1)] = 1,
        max_turns: Annotated[int, typer.Option(min=1, help="environment turns per task")] = 10,
        timeout: Annotated[float, typer.Option(help="seconds per task")] = 600.0,
        flow: Annotated[
            str, typer.Option(help="SQL flow: paper | schema | tuned | auto (tuned for local models)")
        ] = "auto",
    ) -> None:
        """StateFlow and SF_Agent on demo SQL and Bash tasks, then the table and the report.

        With the embedded model the SQL part uses the best preset by default
        (stateflow.tasks.sql.benchmark.BEST_SQL_SUFFIX, chosen there by measured quality and time
        per task): the paper's flow rarely succeeds with a 1.5B model and takes several times
        longer. With any other model, or --flow paper, it runs the paper's flow.
        """
        from stateflow.tasks.bash.benchmark import INTERCODE_BASH
        from stateflow.tasks.harness.runner import RunSpec, evaluate
        from stateflow.tasks.reports.metrics import summarize
        from stateflow.tasks.reports.report import metrics_table
        from stateflow.tasks.sql.benchmark import BEST_SQL_SUFFIX, INTERCODE_SQL
        from stateflow.tasks.ui.static_report import write_report

        variants = {
            "paper": ("", "the paper's (Init runs SHOW TABLES)"),
            "schema": ("_schema", "schema variant (Init lists every table's columns)"),
            "tuned": (BEST_SQL_SUFFIX, f"the best preset {BEST_SQL_SUFFIX[1:]!r} (stateflow.tasks.sql.benchmark)"),
        }
        if flow not in (*variants, "auto"):
            raise ConfigError(f"--flow {flow!r}: choose {', '.join(variants)} or auto")
        console = Console(stderr=True)
        assignment, label = _assignment(model or [], config)
        _announce(console, assignment)
        all_local = all(assignment.profiles[n].provider == "local" for n in assignment.by_state.values())
        suffix, what = variants[flow if flow != "auto" else ("tuned" if all_local else "paper")]
        sql_methods = (f"stateflow{suffix}", f"sf_agent{suffix}")
        console.print(f"SQL flow: {what}")
        records: list[dict] = []
        parts = (
            (INTERCODE_SQL, sql_tasks, sql_methods),
            (INTERCODE_BASH, bash_tasks, ("stateflow", "sf_agent")),
        )
        for bench, sel, methods in parts:
            spec = RunSpec(
                benchmark=bench,
                methods=methods,
                models=assignment,
                models_label=label,
                out=out,
                dataset="demo",
                tasks=sel,
                workers=workers,
                max_turns=max_turns,
                task_timeout_s=timeout,
                grammar=_auto_grammar(assignment),
                # The demo directory keeps earlier demos (other models or flows); this demo's
                # records are told apart by their identity and only they are shown below.
                mix_settings=True,
            )
            with stop_on_signals():
                summary = evaluate(spec, console=console)
            if summary.interrupted:
                raise typer.Exit(130)
            records += summary.records
        _table_console().print(metrics_table(summarize(records), title=f"demo — {label}"))
        paths = write_report(records, out)
        console.print(f"report: {paths['html']}   results: {out / 'results.jsonl'}")

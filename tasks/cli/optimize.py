"""`stateflow optimize`: search recipes and per-state models on the dev sample (see docs/optimize.md).

Everything about the space is checked before any model starts (:func:`stateflow.tasks.optimize.space.expand`);
the search (:func:`stateflow.tasks.optimize.search.optimize`) runs every evaluation through the
runner, so re-running the same command after a kill resumes without re-running a finished episode.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console
from rich.markup import escape
from stateflow.tasks.cli.stopping import stop_on_signals

from stateflow import ModelAssignment
from stateflow.errors import ConfigError

if TYPE_CHECKING:
    from stateflow.tasks.optimize.outcome import OptimizeSummary

__all__ = ["register"]


def register(app: typer.Typer) -> None:
    """Add the ``optimize`` command to ``app``."""

    @app.command("optimize")
    def optimize_cmd(
        space: Annotated[Path, typer.Argument(help="the search space (TOML, see docs/optimize.md)")],
        config: Annotated[Path | None, typer.Option(help="TOML file with [profiles.*] (endpoints)")] = None,
        out: Annotated[Path | None, typer.Option(help="results root (default: runs/optimize/<space name>)")] = None,
        budget: Annotated[float | None, typer.Option(help="overrides [budget] limit (in its unit)")] = None,
        archive: Annotated[
            Path | None,
            typer.Option(help="record archive file (default: docs/data/optimize/<benchmark>/<space name>.jsonl)"),
        ] = None,
        no_archive: Annotated[bool, typer.Option("--no-archive", help="neither read nor write an archive")] = False,
        no_heldout: Annotated[bool, typer.Option("--no-heldout", help="do not evaluate the pick on held-out")] = False,
        workers: Annotated[int, typer.Option(min=1, help="episodes in parallel")] = 1,
        timeout: Annotated[float, typer.Option(help="seconds per task")] = 600.0,
        grammar: Annotated[
            bool | None,
            typer.Option("--grammar/--no-grammar", help="enforce the response format (default: where supported)"),
        ] = None,
        data: Annotated[str | None, typer.Option(help="directory with InterCode's sql/ and bash/ data")] = None,
        no_progress: Annotated[bool, typer.Option("--no-progress")] = False,
        dry_run: Annotated[
            bool, typer.Option("--dry-run", help="check the space, list its candidates and rungs; run nothing")
        ] = False,
        report: Annotated[
            bool,
            typer.Option("--report", help="redraw OUT/front.md and OUT/front.png from OUT/optimize.json; run nothing"),
        ] = False,
    ) -> None:
        """Search a space of recipes x per-state models by successive halving with paired tests.

        Writes OUT/front.md (the table), OUT/front.png (the plot) and OUT/optimize.json; the
        pick is then evaluated once on the space's held-out tasks. Re-run the same command to
        resume (a larger --budget goes on further). Exit status 130 when interrupted.
        """
        from stateflow.cli.inputs import output_dir

        if out is not None:  # before the heavy imports below: a typo is refused at once
            output_dir(out, "--out", create=False)
        from stateflow.tasks.cli.run import _assignment, _auto_grammar
        from stateflow.tasks.harness.registry import default_registry
        from stateflow.tasks.optimize.search import OptimizeRun, check_budget, optimize, rung_sizes, task_pool
        from stateflow.tasks.optimize.space import expand, load_space

        console = Console(stderr=True)
        chosen = load_space(space)
        if budget is not None:
            if budget <= 0:
                raise ConfigError(f"--budget {budget:g}: give a positive amount in {chosen.budget.unit}")
            chosen = chosen.model_copy(update={"budget": chosen.budget.model_copy(update={"limit": budget})})
        try:
            bench = default_registry().get(chosen.benchmark)
        except ValueError as err:
            raise ConfigError(f"{space}: {err}") from None
        models, _ = _assignment([], config)
        plan = expand(chosen, bench, models, where=str(space))
        for c in plan.candidates:
            c.assignment(models).refuse_test_doubles()
        if chosen.rewrite is not None:
            ModelAssignment.of(chosen.rewrite.profile, profiles=models.profiles.values()).refuse_test_doubles()
        use_grammar = (
            grammar if grammar is not None else all(_auto_grammar(c.assignment(models)) for c in plan.candidates)
        )
        root = output_dir(out or Path("runs/optimize") / chosen.name, "--out", create=not (dry_run or report))
        default_archive = Path("docs/data/optimize") / bench.name / f"{chosen.name}.jsonl"
        record_file = None if no_archive else archive or default_archive
        console.print(
            f"{len(plan.candidates)} candidate(s) ({plan.skipped_sets} lever set(s) skipped as incompatible, "
            f"{plan.duplicates} duplicate flow(s)); budget {chosen.budget.limit:g} {chosen.budget.unit}"
        )
        run = OptimizeRun(
            space=chosen,
            plan=plan,
            benchmark=bench,
            models=models,
            out=root,
            archive=record_file,
            heldout=not no_heldout,
            workers=workers,
            task_timeout_s=timeout,
            grammar=use_grammar,
            data_dir=data,
        )
        if report:  # the front as today's rule draws it, from what a finished search recorded
            from stateflow.tasks.optimize.front import mark_front
            from stateflow.tasks.optimize.outcome import OptimizeSummary

            saved = root / "optimize.json"
            if not saved.is_file():
                raise ConfigError(f"{saved}: no search summary here (run the search first, or give --out)")
            try:
                summary = OptimizeSummary.from_json(saved.read_text())
            except ValueError as err:
                raise ConfigError(f"{saved}: {err}") from None
            mark_front(summary.candidates)
            _write_front(summary, root, console)
            return
        if dry_run:  # the checks above ran; the pool needs the environment but no model
            sizes = rung_sizes(chosen.search.first_rung, chosen.search.eta, len(task_pool(run)))
            check_budget(chosen, sizes)  # the same refusal the search would give
            for c in plan.candidates:
                console.print(escape(c.label))
            console.print(
                f"rungs of {', '.join(map(str, sizes))} tasks (eta {chosen.search.eta}, order {chosen.search.order}); "
                f"at most {len(plan.candidates) * sizes[-1]} episodes if nothing were cut; "
                f"results in {escape(str(root))}"
            )
            return
        with stop_on_signals():
            summary = optimize(run, console=console, progress=not no_progress)
        _write_front(summary, root, console)
        if summary.stop == "interrupted":
            raise typer.Exit(130)


def _write_front(summary: OptimizeSummary, root: Path, console: Console) -> None:
    """Print the front's table and write it, with its plot, next to ``optimize.json``."""
    from stateflow.tasks.optimize.front import front_table, plot_front

    table = front_table(summary)
    (root / "front.md").write_text(table)
    png = plot_front(summary, root / "front.png")
    Console(width=200).print(table, markup=False, soft_wrap=True)
    wrote = ", ".join(escape(str(p)) for p in (root / "front.md", png, root / "optimize.json"))
    console.print(f"wrote {wrote}")

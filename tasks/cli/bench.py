"""`stateflow bench paper`: the paper's comparison, reproduced offline, in one resumable command.

It runs every method of :data:`stateflow.tasks.harness.paper.PAPER_BENCHMARKS` with every model of
``--models`` (:func:`stateflow.tasks.harness.paper.run_paper`), one results directory per pair under
``--out``, then writes the tables and plots (:func:`stateflow.tasks.reports.paper_report.write_paper_docs`).
Re-running the same command resumes; with everything recorded it only rewrites the documents.
The records behind the documents are kept, without traces, in ``docs/data/paper/`` (``--archive``,
see :mod:`stateflow.tasks.harness.archive`), so they survive the machine that ran them.

At full size (the defaults) it runs 12 SQL methods x 100 Spider dev tasks and 6 Bash methods x 50
NL2Bash tasks with each of the two embedded models: 3,000 episodes, a day or more on 2 cores.
Interrupt it at will and re-run the same command. On a busy machine, give the models and
episodes more time so slow calls are not recorded as errors::

    # slow.toml:  [profiles.local] timeout = 900.0 / max_retries = 0, the same for [profiles.local-small]
    stateflow bench paper --config slow.toml --timeout 1800
"""

from __future__ import annotations

import shlex
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape
from stateflow.tasks.cli.run import Order
from stateflow.tasks.cli.stopping import stop_on_signals

from stateflow.errors import ConfigError

__all__ = ["register"]


def _split(value: str) -> list[str]:
    return [v.strip() for v in value.split(",") if v.strip()]


def _datasets(values: list[str], benchmarks: list[str]) -> dict[str, str]:
    """``--dataset NAME`` (every benchmark) or ``--dataset BENCHMARK=NAME`` (repeatable)."""
    out: dict[str, str] = {}
    for v in values:
        bench, sep, name = v.partition("=")
        if not sep:
            out |= dict.fromkeys(benchmarks, v.strip())
        elif not name.strip():
            raise ConfigError(f"--dataset {v!r}: give BENCHMARK=DATASET or DATASET")
        else:
            out[bench.strip()] = name.strip()
    return out


def register(app: typer.Typer) -> None:
    """Add the ``bench`` group (with ``paper``) to ``app``."""
    bench = typer.Typer(help="Reproduce comparisons (many runs, one resumable command).", no_args_is_help=True)
    app.add_typer(bench, name="bench")

    @bench.command("heldout")
    def heldout_cmd(
        archives: Annotated[
            list[Path] | None,
            typer.Argument(help="archive or results files / directories (default: the record archives in docs/data)"),
        ] = None,
        results: Annotated[Path, typer.Option(help="the document whose heldout section is rewritten")] = Path(
            "docs/results.md"
        ),
        data: Annotated[str | None, typer.Option(help="directory with InterCode's sql/ and bash/ data")] = None,
        unarchived: Annotated[
            Path | None,
            typer.Option(help="ledger of held-out runs without records (default: docs/data/heldout/unarchived.json)"),
        ] = None,
    ) -> None:
        """List every recipe evaluated on the held-out sample, with how many of its family came before.

        Rewrites the section between the `heldout` markers of --results (see stateflow.tasks.reports.heldout);
        prints the same table.
        """
        from stateflow.tasks.kit.episode_record import InvalidRecordError
        from stateflow.tasks.reports.doc_sections import SectionMarkers, write_section
        from stateflow.tasks.reports.heldout import heldout_evaluations, heldout_section, heldout_tasks, load_unarchived
        from stateflow.tasks.reports.metrics import load_results

        console = Console(stderr=True)
        if archives:
            files = list(archives)
            records = load_results([str(f) for f in files])
        else:  # every record archive under docs/data; other JSONL files there (vote candidates) are skipped
            files, records = [], []
            for f in sorted(Path("docs/data").rglob("*.jsonl")):
                try:
                    records += load_results([str(f)])
                except InvalidRecordError:
                    console.print(f"skipped {escape(str(f))}: not a file of episode records")
                    continue
                files.append(f)
            if not files:
                raise ConfigError("no archive given and no record archive under docs/data")
        ledger = Path("docs/data/heldout/unarchived.json") if unarchived is None else unarchived
        evaluations = heldout_evaluations(records, heldout_tasks(records, data), load_unarchived(ledger))
        command = "stateflow " + shlex.join(sys.argv[1:]) if sys.argv[1:2] == ["bench"] else "stateflow bench heldout"
        body = heldout_section(evaluations, sources=[f.as_posix() for f in files], command=command)
        write_section(results, SectionMarkers("heldout"), body)
        Console().print(body, markup=False, soft_wrap=True)

    @bench.command("paper")
    def paper_cmd(
        models: Annotated[str, typer.Option(help="comma-separated model profiles (columns)")] = "local,local-small",
        benchmarks: Annotated[str, typer.Option(help="comma-separated benchmarks")] = "intercode-sql,intercode-bash",
        methods: Annotated[
            str | None,
            typer.Option(help="comma-separated methods (default: the paper's set per benchmark, see the docs)"),
        ] = None,
        tasks: Annotated[str, typer.Option(help="dev | heldout (fixed samples), or all, A:B, 0,4,9")] = "dev",
        dataset: Annotated[
            list[str] | None,
            typer.Option(help="NAME for every benchmark or BENCHMARK=NAME (default: spider, nl2bash)"),
        ] = None,
        out: Annotated[Path, typer.Option(help="results root: OUT/<benchmark>/<model>/ (re-run to resume)")] = Path(
            "runs/paper"
        ),
        results: Annotated[Path, typer.Option(help="document whose paper section is written")] = Path(
            "docs/results.md"
        ),
        images: Annotated[Path, typer.Option(help="folder for the PNG plots")] = Path("docs/img/paper"),
        readme: Annotated[Path, typer.Option(help="README whose headline table is written")] = Path("README.md"),
        archive: Annotated[
            Path,
            typer.Option(help="record archive to commit: ARCHIVE/<benchmark>/<model>.jsonl, read and updated"),
        ] = Path("docs/data/paper"),
        no_archive: Annotated[bool, typer.Option("--no-archive", help="neither read nor write an archive")] = False,
        no_readme: Annotated[bool, typer.Option("--no-readme", help="leave the README alone")] = False,
        config: Annotated[Path | None, typer.Option(help="TOML file with [profiles.*] and [models]")] = None,
        workers: Annotated[
            int | None,
            typer.Option(
                min=1,
                help="episodes in parallel (one environment each; default 1, with the embedded model "
                "the measured best for its cores: stateflow.backends.local.defaults)",
            ),
        ] = None,
        max_turns: Annotated[int, typer.Option(min=1, help="environment turns per task")] = 10,
        timeout: Annotated[float, typer.Option(help="seconds per task")] = 600.0,
        grammar: Annotated[
            bool | None,
            typer.Option("--grammar/--no-grammar", help="enforce the response format (default: where supported)"),
        ] = None,
        data: Annotated[str | None, typer.Option(help="directory with InterCode's sql/ and bash/ data")] = None,
        retry_errors: Annotated[bool, typer.Option(help="re-run episodes recorded as errored")] = False,
        order: Annotated[
            Order,
            typer.Option(
                help="task: every method on a task, then the next (a stopped run stays comparable); method; "
                "context: tasks grouped by database / file system (a local model's prompt cache is reused)"
            ),
        ] = Order.TASK,
        no_run: Annotated[
            bool, typer.Option("--no-run", help="run nothing: write the documents from what is recorded")
        ] = False,
        gold: Annotated[
            Path,
            typer.Option(
                help="archived gold replays (`run --policy oracle --repeats K`, archived here): the tasks whose "
                "gold did not reproduce are named under their benchmark's table (skipped when absent)"
            ),
        ] = Path("docs/data/gold"),
        no_progress: Annotated[bool, typer.Option("--no-progress")] = False,
    ) -> None:
        """Run the paper's comparison (every method x every model) and write the tables and plots.

        Each (benchmark, model) pair runs with `stateflow run`'s runner into OUT/<benchmark>/<model>/;
        re-running resumes. Then the dated section between the paper markers of --results, the
        PNGs in --images and the headline between the paper-headline markers of --readme are
        (re)written. Pairs not complete are shown as done/total, never as final numbers; when no
        pair recorded anything, the documents are left alone. Exit status 1 if a pair crashed.

        Every reported record is also kept, without its trace, in --archive (commit it with the
        docs): episodes found there count as recorded, so a fresh clone resumes the comparison,
        and --no-run rebuilds the documents from the archive alone.
        """
        from stateflow.tasks.cli.run import _announce, _assignment, _auto_grammar
        from stateflow.tasks.harness.paper import PaperModel, PaperRun, paper_benchmarks, run_paper
        from stateflow.tasks.reports.paper_report import PaperDocs, write_paper_docs

        console = Console(stderr=True)
        names = _split(benchmarks)
        chosen, notes = paper_benchmarks(
            names, _split(methods) if methods is not None else None, _datasets(dataset or [], names)
        )
        for note in notes:
            console.print(f"[yellow]note:[/] {escape(note)}")
        model_names = list(dict.fromkeys(_split(models)))
        if not model_names:
            raise ConfigError("--models: give at least one model profile")
        columns = []
        for name in model_names:
            assignment, label = _assignment([name], config)
            _announce(console, assignment)
            columns.append(PaperModel(name, assignment, label, grammar=_auto_grammar(assignment)))
        docs = PaperDocs(results, images, None if no_readme else readme)
        run = PaperRun(
            benchmarks=chosen,
            models=tuple(columns),
            out=out,
            tasks=tasks,
            workers=workers,
            max_turns=max_turns,
            task_timeout_s=timeout,
            grammar=grammar,
            data_dir=data,
            retry_errors=retry_errors,
            order=order.value,
            run_missing=not no_run,
            archive=None if no_archive else archive,
        )
        with stop_on_signals():
            outcomes, interrupted = run_paper(run, console=console, progress=not no_progress)
        if any(o.records for o in outcomes):
            command = "stateflow " + shlex.join(sys.argv[1:])
            date = datetime.now(UTC).strftime("%Y-%m-%d")
            from stateflow.tasks.reports.gold_check import gold_replays
            from stateflow.tasks.reports.metrics import load_results

            archived = sorted(gold.glob("*.jsonl")) if gold.is_dir() else []
            replays = gold_replays(load_results([str(p) for p in archived])) if archived else []
            for path in write_paper_docs(outcomes, docs, command=command, tasks=tasks, date=date, gold=replays):
                console.print(f"wrote {escape(str(path))}")
        else:  # a typo must not replace a published section with a table of failures
            console.print("[yellow]no episode recorded in any pair:[/] the documents were left as they were")
        crashed = [o for o in outcomes if o.status == "crashed"]
        if interrupted:
            raise typer.Exit(130)
        if crashed:
            console.print(
                f"[red]{len(crashed)} pair(s) crashed:[/] "
                + "; ".join(escape(f"{o.benchmark.name} x {o.model.name}: {o.error}") for o in crashed)
            )
            raise typer.Exit(1)

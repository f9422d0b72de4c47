"""Commands on recorded results: `stateflow compare` (one method against another on the tasks both
finished: won / lost, exact McNemar test) and `stateflow archive` (keep a run's records, without traces, in
a file to commit).

Each side is a results directory, a results file or an archive file
(``docs/data/paper/<benchmark>/<model>.jsonl``), with ``:METHOD`` when it holds several methods::

    stateflow compare runs/levers:oneshot runs/levers:sf_agent_hint
    stateflow compare runs/before runs/after --list      # also print the tasks won and lost
    stateflow compare runs/before runs/after --show      # and what each side submitted on them
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from stateflow.errors import ConfigError

if TYPE_CHECKING:  # the commands import their modules when run, to keep `stateflow --help` fast
    from collections.abc import Sequence

    from stateflow.tasks.kit.episode_record import EpisodeRecord
    from stateflow.tasks.reports.paired import PairedComparison

__all__ = ["parse_side", "register"]


def _show_tasks(
    console: Console, result: PairedComparison, baseline: Sequence[EpisodeRecord], candidate: Sequence[EpisodeRecord]
) -> None:
    """Each task won or lost, with the statement each side's submission scored (``last_action``)."""
    a = {r.task: r for r in baseline}
    b = {r.task: r for r in candidate}
    for verdict, tasks in (("won", result.won_tasks), ("lost", result.lost_tasks)):
        for task in tasks:
            hardness = f" ({a[task].hardness})" if a[task].hardness else ""
            console.print(f"{verdict} {task}{hardness}: {escape(a[task].query)}", soft_wrap=True)
            for label, text in (
                ("gold", a[task].gold),
                ("baseline", a[task].last_action),
                ("candidate", b[task].last_action),
            ):
                # records written before last_action existed (or that ran nothing) have none
                console.print(f"  {label + ':':<10} {escape(text) if text else '-'}", soft_wrap=True)


def parse_side(side: str) -> tuple[Path, str | None, str | None]:
    """``PATH``, ``PATH:METHOD`` or ``PATH:METHOD@SETTING`` -> (path, method, setting), the absent
    parts ``None``; a path that exists as written wins. ``METHOD`` may itself hold colons: a user's
    flow run as ``module:attribute`` is selected as ``PATH:module:attribute`` (the longest
    existing path before a colon is the path).

    Raises:
        ConfigError: neither the whole text nor a part before one of its ``:`` is an existing path.
    """
    if Path(side).exists():
        return Path(side), None, None
    cuts = [i for i, ch in enumerate(side) if ch == ":" and i > 0 and Path(side[:i]).exists()]
    if cuts:
        path, rest = side[: cuts[-1]], side[cuts[-1] + 1 :]
        method, at, setting = rest.partition("@")
        if method and (setting or not at):
            return Path(path), method, setting or None
    raise ConfigError(
        f"{side}: no results there; give a results directory or file, optionally as PATH:METHOD[@SETTING]"
    )


def _only(records: list[EpisodeRecord], field: str, values: list[str], dirs: list[str]) -> list[EpisodeRecord]:
    """The records whose ``field`` is one of ``values``; a value no record has is an error listing those present."""
    present = sorted({getattr(r, field) for r in records})
    missing = [v for v in values if v not in present]
    if missing:
        raise ConfigError(
            f"--{field} {', '.join(missing)}: no such episodes in {', '.join(dirs)}; recorded: {', '.join(present)}"
        )
    return [r for r in records if getattr(r, field) in values]


def _pct(solved: int, n: int) -> str:
    return f"{100.0 * solved / n:.1f}" if n else "-"


def register(app: typer.Typer) -> None:
    """Add ``compare`` and ``archive`` to ``app``."""

    @app.command("archive")
    def archive_cmd(
        dirs: Annotated[list[str], typer.Argument(help="result directories (or results.jsonl files)")],
        to: Annotated[Path, typer.Option("--to", help="the archive file to create or update (commit it)")],
        benchmark: Annotated[
            str | None,
            typer.Option("--benchmark", help="keep only this benchmark's records (a paper archive holds one)"),
        ] = None,
        methods: Annotated[
            list[str] | None, typer.Option("--method", help="keep only this method's records (repeatable)")
        ] = None,
    ) -> None:
        """Keep the records of DIRS, without their traces, in an archive file to commit.

        Records already in the archive stay; a newer record of the same episode replaces its older
        one. The archive reads like a results file: `stateflow report` and `stateflow compare`
        take it, and `stateflow bench paper` resumes from its own (docs/data/paper).
        """
        from stateflow.tasks.harness.archive import RecordArchive
        from stateflow.tasks.reports.metrics import load_results

        records = load_results(dirs)
        if not records:
            raise ConfigError(f"no episodes recorded in {', '.join(dirs)}")
        if benchmark:
            records = _only(records, "benchmark", [benchmark], dirs)
        if methods:
            records = _only(records, "method", methods, dirs)
        archive = RecordArchive(to)
        changed = archive.merge(records)
        held = len(archive.load())
        Console().print(f"{escape(str(to))}: {changed} record(s) added or updated, {held} in all")

    @app.command("compare")
    def compare_cmd(
        baseline: Annotated[
            str,
            typer.Argument(
                help="PATH, PATH:METHOD or PATH:METHOD@SETTING (results directory, results or archive file)"
            ),
        ],
        candidate: Annotated[str, typer.Argument(help="the same forms, compared against the baseline")],
        list_tasks: Annotated[bool, typer.Option("--list", help="also print the task indices won and lost")] = False,
        show: Annotated[
            bool,
            typer.Option("--show", help="also print each task won or lost: question, gold, both sides' last command"),
        ] = False,
    ) -> None:
        """Compare two methods on the tasks both finished: success with its 95 % Wilson interval, won / lost,
        the exact McNemar test on them, tokens, time."""
        from stateflow.tasks.cli.run import _table_console
        from stateflow.tasks.reports.metrics import load_results
        from stateflow.tasks.reports.paired import compare, side_records

        sides, labels = [], []
        for text in (baseline, candidate):
            path, method, setting = parse_side(text)
            records = side_records(load_results([str(path)]), method, text, setting)
            sides.append(records)
            labels.append(text if method else f"{text}:{records[0].method}")
        result = compare(sides[0], sides[1], labels=(labels[0], labels[1]))
        if not result.tasks:
            raise ConfigError(
                f"{baseline} and {candidate} share no task (benchmark, dataset and task index must match)"
            )
        console = _table_console()
        table = Table(title=f"{len(result.tasks)} common tasks", title_justify="left")
        table.add_column("")
        table.add_column("baseline", overflow="fold")
        table.add_column("candidate", overflow="fold")
        table.add_row("", escape(result.baseline), escape(result.candidate))
        table.add_row("success %", f"{result.success('baseline'):.1f}", f"{result.success('candidate'):.1f}")
        table.add_row(
            "  95 % CI (Wilson)",
            *(ci.text() for ci in (result.interval("baseline"), result.interval("candidate")) if ci is not None),
        )
        for level, split in result.by_hardness.items():
            table.add_row(
                f"  {level} ({split.tasks})",
                _pct(split.baseline_solved, split.tasks),
                _pct(split.candidate_solved, split.tasks),
            )
        table.add_row("prompt tok / task", *(f"{v:.0f}" for v in result.mean_prompt_tokens))
        table.add_row("completion tok / task", *(f"{v:.0f}" for v in result.mean_completion_tokens))
        table.add_row("s / task", *(f"{v:.1f}" for v in result.mean_wall_s))
        console.print(table)
        console.print(
            f"candidate won {result.won}, lost {result.lost} (exact McNemar test on the discordant tasks: "
            f"p = {result.p_value:.3g}); "
            f"same reward on {result.same_reward} of {len(result.tasks)} tasks"
        )
        if result.only_baseline or result.only_candidate:
            console.print(
                f"not compared: {result.only_baseline} task(s) only the baseline finished, "
                f"{result.only_candidate} only the candidate"
            )
        if list_tasks:
            console.print(f"won: {', '.join(map(str, result.won_tasks)) or '-'}")
            console.print(f"lost: {', '.join(map(str, result.lost_tasks)) or '-'}")
        if show:
            _show_tasks(console, result, sides[0], sides[1])

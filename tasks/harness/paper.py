"""The paper's comparison, reproduced offline: every method x every model on each benchmark.

:data:`PAPER_BENCHMARKS` says what the comparison is (one :class:`PaperBenchmark` per
benchmark: its dataset, the paper's methods, the ablations, and the slot for this project's best
flows); :func:`run_paper` runs it with the ordinary runner (:func:`stateflow.tasks.harness.runner.evaluate`),
one (benchmark, model) pair at a time, each into its own results directory
``OUT/<benchmark>/<model>/``. So the whole comparison resumes like a single ``stateflow run``:
re-running skips every recorded episode. With an archive (:attr:`PaperRun.archive`, the CLI's
``docs/data/paper``), each pair also keeps its records, without traces, in
``ARCHIVE/<benchmark>/<model>.jsonl`` (:mod:`stateflow.tasks.harness.archive`): committed with the
docs, it lets any clone rebuild the tables or resume the comparison where it stopped. A pair
that fails (its environment does not start, a model profile is wrong...) is reported in its
:class:`PairOutcome` and the other pairs still run; nothing recorded is lost.
:mod:`stateflow.tasks.reports.paper_report` turns the outcomes into the tables and plots of
``docs/results.md`` and the README; ``stateflow bench paper`` (:mod:`stateflow.tasks.cli.bench`)
does both.

Adding a method to the comparison is adding its name to a benchmark's entry below: e.g. a
one-shot flow registered as method ``oneshot`` on both benchmarks goes into both
``best_flows`` tuples, and is then run, tabled, plotted and shown in the README headline.

Size (~400 lines): the comparison's definition and its runs stay together so what is compared
and what is run cannot drift apart.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Literal

from rich.console import Console
from stateflow.envs.base import Environment
from stateflow.tasks.agents.methods import resolve_method
from stateflow.tasks.harness.archive import RecordArchive
from stateflow.tasks.harness.registry import default_registry
from stateflow.tasks.harness.runner import RunOrder, RunSpec, evaluate, open_env
from stateflow.tasks.kit.episode_record import EpisodeRecord
from stateflow.tasks.kit.samples import SAMPLE_NAMES, SAMPLE_SIZES

from stateflow import ModelAssignment
from stateflow.backends.local.defaults import default_workers
from stateflow.backends.scripted import ScriptedLLM
from stateflow.errors import ConfigError
from stateflow.flow_ref import is_flow_ref

__all__ = [
    "PAPER_BENCHMARKS",
    "PAPER_MODELS",
    "PairOutcome",
    "PaperBenchmark",
    "PaperModel",
    "PaperRun",
    "pair_dir",
    "paper_benchmarks",
    "run_paper",
]


@dataclass(frozen=True)
class PaperBenchmark:
    """What the comparison runs on one benchmark.

    Attributes:
        name: the benchmark (a name in :func:`~stateflow.tasks.harness.registry.default_registry`).
        dataset: the dataset the comparison uses (its ``dev`` sample by default).
        methods: the paper's methods, in table order.
        ablated: the methods whose ablations are run (``<base>_no_<part>``).
        ablations: the parts switched off, one ablation each (``observe``, ``verify``, ``error``).
        best_flows: this project's best flows (method names), compared with the paper's. Empty
            until they exist; a name added here is run, tabled, plotted and put in the headline.
        headline: the paper's methods the README headline shows (the best flows are added).
        bars: reference methods in ``methods`` that are not agents (one prompt, one action); with
            the headline methods they are compared on the tasks all of them finished
            (:attr:`paired_methods`).
        only: when set (``--methods``), the methods run instead of all of the above; tables and
            plots then show the ones of the above that ran.
    """

    name: str
    dataset: str
    methods: tuple[str, ...]
    ablated: tuple[str, ...] = ()
    ablations: tuple[str, ...] = ()
    best_flows: tuple[str, ...] = ()
    headline: tuple[str, ...] = ("react", "stateflow", "sf_agent")
    bars: tuple[str, ...] = ()
    only: tuple[str, ...] | None = None

    def ablation(self, base: str, part: str) -> str:
        """The method name of ``base`` with ``part`` switched off (``stateflow_no_verify``)."""
        return f"{base}_no_{part}"

    @property
    def ablation_methods(self) -> tuple[str, ...]:
        """Every ablation method, base by base."""
        return tuple(self.ablation(b, p) for b in self.ablated for p in self.ablations)

    @property
    def all_methods(self) -> tuple[str, ...]:
        """Everything the comparison runs here, in table order (paper, ablations, best flows)."""
        if self.only is not None:
            return self.only
        return tuple(dict.fromkeys((*self.methods, *self.ablation_methods, *self.best_flows)))

    @property
    def headline_methods(self) -> tuple[str, ...]:
        """The README headline's rows: the paper's headline methods, then the best flows (those run)."""
        return tuple(m for m in dict.fromkeys((*self.headline, *self.best_flows)) if m in self.all_methods)

    @property
    def paired_methods(self) -> tuple[str, ...]:
        """The methods compared task by task while a run is partial: the headline's and the bars."""
        return tuple(m for m in dict.fromkeys((*self.headline_methods, *self.bars)) if m in self.all_methods)


_BASELINES = ("react", "react_refined", "plan_solve", "try_again")
_BAR = ("oneshot",)  # not the paper's: one prompt, one action; the bar an agent must clear on a small model

PAPER_BENCHMARKS: tuple[PaperBenchmark, ...] = (
    PaperBenchmark(
        name="intercode-sql",
        dataset="spider",
        methods=("stateflow", "sf_agent", *_BASELINES, *_BAR, "oneshot_direct"),
        ablated=("stateflow", "sf_agent"),
        ablations=("observe", "verify", "error"),  # the paper ablates these states on SQL only
        # the best on the dev sample (docs/results.md, issue 15), each the one after it plus a lever
        best_flows=("sf_agent_vote_question_last", "sf_agent_prompt_vote", "sf_agent_values", "sf_agent_hint"),
        bars=(*_BAR, "oneshot_direct"),
    ),
    PaperBenchmark(
        name="intercode-bash",
        dataset="nl2bash",
        methods=("stateflow", "sf_agent", *_BASELINES, *_BAR),
        best_flows=(),  # no Bash flow beyond the paper's yet
        bars=_BAR,
    ),
)
"""The paper's comparison, one entry per benchmark (see :class:`PaperBenchmark`)."""

PAPER_MODELS: tuple[str, ...] = ("local", "local-small")
"""The embedded models the comparison runs with by default (Qwen2.5-Coder 1.5B and 0.5B)."""


def paper_benchmarks(
    names: Sequence[str],
    methods: Sequence[str] | None = None,
    datasets: dict[str, str] | None = None,
) -> tuple[tuple[PaperBenchmark, ...], list[str]]:
    """The entries of :data:`PAPER_BENCHMARKS` named, with a method list or datasets overridden.

    Args:
        names: benchmark names, in run order.
        methods: ``None`` keeps each entry's own methods; otherwise each benchmark runs those of
            ``methods`` it has (a ``module:attribute`` flow applies everywhere), the rest are
            skipped there with a note.
        datasets: benchmark name -> dataset, replacing the entry's dataset.

    Returns:
        The entries, and one note per method skipped on a benchmark.

    Raises:
        ConfigError: no or an unknown benchmark name, a dataset for a benchmark not selected, or a
            method that no selected benchmark has (the message lists the valid ones).
    """
    known = {b.name: b for b in PAPER_BENCHMARKS}
    if not names:
        raise ConfigError(f"--benchmarks: give at least one of {', '.join(known)}")
    unknown = [n for n in names if n not in known]
    if unknown:
        raise ConfigError(f"--benchmarks: unknown {', '.join(unknown)}; the comparison has {', '.join(known)}")
    datasets = datasets or {}
    stray = [n for n in datasets if n not in names]
    if stray:
        raise ConfigError(f"--dataset names {', '.join(stray)}, which is not in --benchmarks ({', '.join(names)})")
    registry = default_registry()
    chosen = [known[n] for n in dict.fromkeys(names)]
    notes: list[str] = []
    if methods is not None:
        wanted = tuple(dict.fromkeys(methods))
        valid = {b.name: {m for m in wanted if m in registry.get(b.name).methods or is_flow_ref(m)} for b in chosen}
        nowhere = [m for m in wanted if not any(m in v for v in valid.values())]
        if nowhere:
            listed = ", ".join(sorted({m for b in chosen for m in registry.get(b.name).methods}))
            raise ConfigError(f"--methods: {', '.join(nowhere)} is a method of no selected benchmark; valid: {listed}")
        for b in chosen:
            skipped = [m for m in wanted if m not in valid[b.name]]
            if skipped:
                notes.append(f"{b.name}: {', '.join(skipped)} not a method here, skipped")
        chosen = [replace(b, only=tuple(m for m in wanted if m in valid[b.name])) for b in chosen]
        notes += [f"{b.name}: none of --methods applies, benchmark skipped" for b in chosen if not b.all_methods]
        chosen = [b for b in chosen if b.all_methods]
    return tuple(replace(b, dataset=datasets.get(b.name, b.dataset)) for b in chosen), notes


@dataclass(frozen=True)
class PaperModel:
    """One model column of the comparison.

    Attributes:
        name: what ``--models`` named (a profile name); used in directory names and tables.
        assignment: the profiles serving the states.
        label: the assignment as the runner records it (``default=local``).
        grammar: enforce the response format (on for models whose provider supports grammars).
        scripts: scripted replies for profiles whose provider is ``scripted`` (tests only).
    """

    name: str
    assignment: ModelAssignment
    label: str
    grammar: bool = False
    scripts: dict[str, ScriptedLLM] = field(default_factory=dict, compare=False)


@dataclass(frozen=True)
class PaperRun:
    """The whole comparison: benchmarks x models, and the runner settings every pair shares.

    Attributes:
        tasks: ``dev`` | ``heldout`` (a fixed sample) or any ``--tasks`` selection.
        grammar: ``None``: each model's own :attr:`PaperModel.grammar`; else forced for all.
        run_missing: ``False`` runs nothing: the outcomes hold what is already recorded with
            these settings (to publish a partial run, or one made elsewhere).
        archive: the root of the record archive (``None``: none). Archived episodes of the
            same settings count as recorded, and every pair's records are merged into it.
        order: ``"task"`` (default) runs every method on a task before the next task, so a
            comparison stopped part-way compares all methods on the same tasks; ``"method"``
            runs one method over every task before the next (:attr:`RunSpec.order`).
    """

    benchmarks: tuple[PaperBenchmark, ...]
    models: tuple[PaperModel, ...]
    out: Path
    tasks: str = "dev"
    workers: int | None = None
    max_turns: int = 10
    task_timeout_s: float = 600.0
    grammar: bool | None = None
    data_dir: str | None = None
    retry_errors: bool = False
    run_missing: bool = True
    archive: Path | None = None
    order: RunOrder = "task"

    def archive_file(self, bench: PaperBenchmark, model: PaperModel) -> Path | None:
        """The pair's record archive, ``ARCHIVE/<benchmark>/<model>.jsonl`` (``None`` without an archive)."""
        if self.archive is None:
            return None
        return pair_dir(self.archive, bench.name, model.name).with_suffix(".jsonl")

    def spec(self, bench: PaperBenchmark, model: PaperModel) -> RunSpec:
        """The runner's settings for one pair."""
        return RunSpec(
            benchmark=default_registry().get(bench.name),
            methods=bench.all_methods,
            models=model.assignment,
            models_label=model.label,
            out=pair_dir(self.out, bench.name, model.name),
            dataset=bench.dataset,
            tasks=self.tasks,
            workers=self.workers if self.workers is not None else default_workers(model.assignment),
            max_turns=self.max_turns,
            task_timeout_s=self.task_timeout_s,
            grammar=model.grammar if self.grammar is None else self.grammar,
            data_dir=self.data_dir,
            retry_errors=self.retry_errors,
            run_missing=self.run_missing,
            archive=self.archive_file(bench, model),
            order=self.order,
            scripts=model.scripts,
        )


PairStatus = Literal["complete", "incomplete", "crashed", "not run"]


@dataclass(frozen=True)
class PairOutcome:
    """What running one (benchmark, model) pair gave.

    Attributes:
        status: ``complete`` (every method has a record for every task), ``incomplete`` (some
            are missing: interrupted, or a method failed to start), ``crashed`` (the runner
            raised; ``error`` says why) or ``not run`` (an earlier pair was interrupted).
        records: the newest record of every episode of this pair's settings.
        tasks_total: tasks per method (0 when the pair crashed before its tasks were known).
        ran, skipped: episodes run now, and found already recorded.
        seconds: wall time of this invocation on the pair.
        archive: the pair's record archive file (``None`` without an archive).
    """

    benchmark: PaperBenchmark
    model: PaperModel
    out: Path
    status: PairStatus
    records: list[EpisodeRecord] = field(default_factory=list)
    tasks_total: int = 0
    ran: int = 0
    skipped: int = 0
    seconds: float = 0.0
    error: str | None = None
    archive: Path | None = None

    def done(self, method: str) -> int:
        """How many of ``method``'s tasks have a record."""
        return sum(r.method == method for r in self.records)


def pair_dir(out: Path, benchmark: str, model: str) -> Path:
    """``out/<benchmark>/<model>``, the model name made safe for a path (``openai:x`` -> ``openai_x``)."""
    return out / benchmark / re.sub(r"[^A-Za-z0-9._-]+", "_", model)


def _status(records: list[EpisodeRecord], methods: tuple[str, ...], tasks_total: int) -> PairStatus:
    counts = {m: 0 for m in methods}
    for r in records:
        counts[r.method] = counts.get(r.method, 0) + 1
    return "complete" if all(counts[m] >= tasks_total for m in methods) else "incomplete"


def run_paper(
    run: PaperRun,
    *,
    console: Console | None = None,
    progress: bool = True,
    env_factory: Callable[[RunSpec], Environment] = open_env,
) -> tuple[list[PairOutcome], bool]:
    """Run every (benchmark, model) pair of ``run`` not yet recorded, one after the other.

    Every method of every benchmark is checked before anything starts. Each pair prints one
    progress line before and one after it runs. An exception from a pair (an environment that
    does not start, a refused results directory...) is caught, printed and kept in its
    outcome, and the next pair runs; Ctrl-C (the runner lets the episodes in flight finish)
    stops after the current pair and the remaining pairs are ``not run``.

    Args:
        env_factory: opens a pair's environment (the runner's default; tests pass fakes).

    Returns:
        One outcome per pair (benchmarks outer, models inner), and whether the run was interrupted.

    Raises:
        ValueError, ConfigError: a method that does not exist on its benchmark, or a fixed
            sample (``dev``) asked of a dataset that has none.
    """
    console = console or Console(stderr=True)
    registry = default_registry()
    for bench in run.benchmarks:
        if run.tasks.strip() in SAMPLE_NAMES and bench.dataset not in SAMPLE_SIZES:
            raise ConfigError(
                f"--tasks {run.tasks.strip()}: {bench.name}'s dataset {bench.dataset} has no fixed samples "
                f"(they exist for {', '.join(SAMPLE_SIZES)}); give --tasks A:B or another --dataset"
            )
        for m in bench.all_methods:
            resolve_method(registry.get(bench.name), m)  # an unknown method fails before any pair runs
    pairs = [(b, m) for b in run.benchmarks for m in run.models]
    outcomes: list[PairOutcome] = []
    interrupted = False
    for k, (bench, model) in enumerate(pairs, 1):
        spec = run.spec(bench, model)
        if interrupted:
            outcomes.append(PairOutcome(bench, model, spec.out, "not run"))
            continue
        head = f"[{k}/{len(pairs)}] {bench.name} x {model.name}"
        console.print(
            f"[bold]{head}[/]: {len(bench.all_methods)} method(s) on {bench.dataset} --tasks {run.tasks} -> {spec.out}"
        )
        started = time.monotonic()
        try:
            summary = evaluate(spec, console=console, progress=progress, env_factory=env_factory)
        except Exception as err:  # one pair's failure must not lose the others: recorded and reported
            seconds = time.monotonic() - started
            console.print(f"[red]{head}: crashed after {seconds:.0f} s:[/] {type(err).__name__}: {err}")
            outcomes.append(
                PairOutcome(bench, model, spec.out, "crashed", seconds=seconds, error=f"{type(err).__name__}: {err}")
            )
            continue
        seconds = time.monotonic() - started
        total = summary.planned // len(bench.all_methods)
        status = _status(summary.records, bench.all_methods, total)
        outcome = PairOutcome(
            bench,
            model,
            spec.out,
            status,
            summary.records,
            total,
            summary.finished,
            summary.skipped,
            seconds,
            archive=spec.archive,
        )
        outcomes.append(outcome)
        if spec.archive is not None and summary.records:
            changed = RecordArchive(spec.archive).merge(summary.records)
            console.print(f"{head}: archive {spec.archive}: {changed} record(s) added or updated")
        solved = sum(r.success for r in summary.records)
        errored = sum(r.status != "ok" for r in summary.records)
        console.print(
            f"{head}: {status}, {len(summary.records)}/{summary.planned} episodes recorded "
            f"({summary.finished} run now, {summary.skipped} resumed), {solved} solved, {errored} errored, "
            f"{seconds:.0f} s"
        )
        interrupted = summary.interrupted
    return outcomes, interrupted

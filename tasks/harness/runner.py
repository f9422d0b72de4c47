"""The evaluation runner: methods x tasks, in parallel, resumable, with live progress.

Results go to ``OUT/results.jsonl`` (one line per finished episode, see :mod:`stateflow.tasks.harness.records`);
``OUT/run.json`` keeps the last command's settings. Every record carries its episode identity
(:mod:`stateflow.tasks.harness.identity`); re-running the same command skips every episode recorded with exactly
that identity, so an interrupted run (Ctrl-C, ``kill -9``, a crash) resumes where it stopped with
no duplicate and no lost task. A directory holding records of the same benchmark made with other
settings is refused unless mixing is asked for (``--mix-settings``), so a changed dataset, model,
turn limit, flow or prompt is never mistaken for a finished episode.

Size (over ~400 lines, on purpose): the run loop, resume and the settings check share the
run's identity fields and its one results file; split apart they would each re-derive them.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field, fields, replace
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from stateflow.envs.base import Environment
from stateflow.tasks.agents.methods import build_method
from stateflow.tasks.harness.archive import RecordArchive
from stateflow.tasks.harness.episode import ORACLE_PROFILE, EpisodeSpec, run_episode
from stateflow.tasks.harness.executors import EpisodeExecutor, ThreadExecutor
from stateflow.tasks.harness.flow_cards import FLOW_CARDS_NAME, card_for, save_cards
from stateflow.tasks.harness.identity import (
    REPEAT_FIELDS,
    RUN_WIDE_FIELDS,
    EpisodeIdentity,
    FieldDifference,
    dataset_fingerprint,
    differences,
    flow_fingerprint,
    models_fingerprint,
    prompts_fingerprint,
)
from stateflow.tasks.harness.live_file import LIVE_DIR, LiveEpisode, LiveFile, clear_live, live_path
from stateflow.tasks.harness.order import RUN_ORDERS, RunOrder, episode_order
from stateflow.tasks.harness.records import ResultsFile, latest_records, record_key
from stateflow.tasks.harness.run_lock import LOCK_NAME, RunLock
from stateflow.tasks.kit.benchmark import Benchmark, EnvOptions
from stateflow.tasks.kit.episode_record import EpisodeRecord
from stateflow.tasks.kit.samples import SAMPLE_NAMES, sample_of
from stateflow.tasks.kit.selection import TaskSelection, select_tasks

from stateflow import ModelAssignment, ModelProfile
from stateflow.backends.http import HttpClients
from stateflow.backends.scripted import ScriptedLLM
from stateflow.cli.inputs import output_dir
from stateflow.errors import ConfigError

__all__ = [
    "MixedSettingsError",
    "RunOrder",
    "RunSpec",
    "RunSummary",
    "TaskSelection",
    "evaluate",
    "open_env",
    "run_identities",
    "seeded",
    "select_tasks",
]


def _check_out_dir(out: Path) -> None:
    """Refuse a results directory that is (or lies under) an existing file, before anything is
    written: the command line's own check, for callers that come through Python."""
    output_dir(out, "--out", create=False)


@dataclass(frozen=True)
class RunSpec:
    """A whole evaluation (what ``stateflow run`` is given).

    ``benchmark`` is the :class:`~stateflow.tasks.kit.benchmark.Benchmark` object itself (a
    caller holding a name asks a registry for it:
    ``default_registry().get("intercode-sql")``); the runner looks nothing up by name.
    ``methods`` are names of the benchmark's methods, recipes (``sf_agent_hint+values``) or
    ``module:attribute`` flow references.

    Raises:
        TypeError: (at construction) ``benchmark`` is not a Benchmark (e.g. a name).
    """

    benchmark: Benchmark
    methods: tuple[str, ...]
    models: ModelAssignment
    models_label: str
    out: Path
    dataset: str = "demo"
    tasks: str = "all"
    workers: int = 1
    max_turns: int = 10
    task_timeout_s: float = 600.0
    grammar: bool = False
    oracle: bool = False
    backend: str | None = None
    dsn: str | None = None
    data_dir: str | None = None
    sql_database_scope: str = "benchmark"  # stateflow.envs.sql DatabaseScope: "benchmark" (as upstream) or "task"
    retry_errors: bool = False
    mix_settings: bool = False
    run_missing: bool = True  # False: only report what is recorded (nothing runs, nothing is written)
    archive: Path | None = None  # a record archive (stateflow.tasks.harness.archive) whose episodes count as recorded
    # "method": every task of the first method, then the next method; "task": every method on the
    # first task, then the next task, so a run stopped part-way leaves all methods on the same
    # tasks (comparable row by row) instead of the first methods done and the last not started;
    # "context": tasks grouped by database / file system, so consecutive episodes share their
    # prompt prefix in a model server's cache (stateflow.tasks.harness.order)
    order: RunOrder = "method"
    scripts: dict[str, ScriptedLLM] = field(default_factory=dict, compare=False)
    # one of K repeats (stateflow.tasks.harness.repeats): its index and the sampler seed every profile gets
    repeat: int | None = None
    seed: int | None = None
    # the episodes in flight write their events to OUT/live/ for `stateflow ui` (stateflow.tasks.harness.live_file);
    # live_tokens also streams every model reply there token by token (streamed calls report no cached tokens)
    live: bool = True
    live_tokens: bool = False

    def __post_init__(self) -> None:
        if self.order not in RUN_ORDERS:
            raise ValueError(f"RunSpec.order: {self.order!r} is not one of {', '.join(RUN_ORDERS)}")
        if not isinstance(self.benchmark, Benchmark):
            raise TypeError(
                f"RunSpec.benchmark: give the Benchmark object, not {self.benchmark!r} "
                f"(by name: stateflow.tasks.harness.registry.default_registry().get({self.benchmark!r}))"
            )

    @property
    def bench(self) -> Benchmark:
        """The benchmark object (the same as :attr:`benchmark`)."""
        return self.benchmark

    @property
    def resolved_backend(self) -> str:
        """The environment backend, with the benchmark's default filled in.

        Raises:
            ValueError: a backend the benchmark does not have.
        """
        return self.bench.backend_or_default(self.backend)

    def env_options(self) -> EnvOptions:
        """What :attr:`Benchmark.open_env` is given for this run."""
        return EnvOptions(
            dataset=self.dataset,
            backend=self.resolved_backend,
            dsn=self.dsn,
            data_dir=self.data_dir,
            database_scope=self.sql_database_scope,
        )


def open_env(spec: RunSpec) -> Environment:
    """Open one environment for ``spec`` (each worker opens its own)."""
    return spec.bench.open_env(spec.env_options())


class MixedSettingsError(ConfigError):
    """The results directory holds records of the same benchmark made with other settings.

    Attributes:
        path: the results file.
        count: how many (newest) records have other settings.
        differences: each differing field once, with a recorded and this run's value.
        legacy: how many of those records carry no identity at all (written by an older version).
    """

    def __init__(self, path: Path, count: int, differences: list[FieldDifference], legacy: int):
        self.path, self.count, self.differences, self.legacy = path, count, differences, legacy
        what = [str(d) for d in differences]
        if legacy:
            what.append(f"{legacy} record(s) have no episode identity (written by an older version)")
        super().__init__(
            f"{path} holds {count} record(s) of this benchmark made with other settings ("
            + "; ".join(what)
            + "). Use another --out, or pass --mix-settings to add this run's records next to them "
            "(reports keep each setting apart)"
        )


def _other_settings(
    records: list[EpisodeRecord], identities: dict[str, EpisodeIdentity]
) -> tuple[list[EpisodeRecord], list[FieldDifference], int]:
    """Records of this run's benchmark whose identity is not compatible with this run's.

    Methods are the comparison axis of a results directory, so another method is fine as long
    as every run-wide setting (dataset, models, max_turns, ...) matches; the same method must
    match exactly. Other benchmarks are never compared.
    """
    mine = next(iter(identities.values()))
    others: list[EpisodeRecord] = []
    diffs: dict[str, FieldDifference] = {}
    legacy = 0
    for r in records:
        if r.benchmark != mine.benchmark:
            continue
        recorded = r.identity
        if recorded is None:
            others.append(r)
            legacy += 1
            continue
        same_method = identities.get(str(recorded.get("method")))
        found = (
            differences(recorded, same_method)
            if same_method is not None
            else differences(recorded, mine, RUN_WIDE_FIELDS)
        )
        found = [d for d in found if d.field not in REPEAT_FIELDS]  # another repeat of the same setting is fine
        if found:
            others.append(r)
            for d in found:
                diffs.setdefault(d.field, d)
    return others, list(diffs.values()), legacy


def run_identities(spec: RunSpec, dataset_sha256: str) -> dict[str, EpisodeIdentity]:
    """The episode identity of each of ``spec``'s methods.

    Raises:
        ValueError: unknown benchmark or method, or a method that does not apply to the domain.
    """
    bench = spec.bench
    models: ModelAssignment | ModelProfile = ORACLE_PROFILE if spec.oracle else spec.models
    out: dict[str, EpisodeIdentity] = {}
    for m in spec.methods:
        flow, _ = build_method(m, bench, grammar=spec.grammar)
        out[m] = EpisodeIdentity(
            benchmark=bench.name,
            dataset=spec.dataset,
            dataset_sha256=dataset_sha256,
            method=m,
            flow=flow.name,
            flow_sha256=flow_fingerprint(flow),
            prompts_sha256=prompts_fingerprint(bench.prompts_dir),
            policy="oracle" if spec.oracle else "llm",
            models="oracle" if spec.oracle else spec.models_label,
            models_sha256=models_fingerprint(models),
            max_turns=spec.max_turns,
            grammar=spec.grammar,
            backend=spec.resolved_backend,
            database_scope=spec.sql_database_scope if bench.database_scope else None,
            repeat=spec.repeat,
            seed=spec.seed,
        )
    return out


def seeded(models: ModelAssignment, seed: int | None) -> ModelAssignment:
    """``models`` with every profile sampling at ``seed`` (``models`` itself for ``None``)."""
    if seed is None:
        return models
    profiles = {name: replace(p, seed=seed) for name, p in models.profiles.items()}
    return ModelAssignment.of(dict(models.by_state), profiles=profiles.values())


@dataclass
class RunSummary:
    """What a call to :func:`evaluate` did.

    Attributes:
        records: the newest record of every episode of this run's identities in the results
            file (earlier runs' included), one per method and task.
        identities: this run's identity per method.
    """

    out: Path
    planned: int
    skipped: int
    finished: int
    interrupted: bool
    records: list[EpisodeRecord]
    identities: dict[str, EpisodeIdentity] = field(default_factory=dict)


# Where the output is not a terminal (a log file, nohup, CI), the progress bar draws nothing
# until the run ends; a plain line at most this often says how far the run is instead.
PLAIN_PROGRESS_EVERY_S = 10.0


class _Live:
    """Running totals shown in the progress bar (and in plain progress lines)."""

    def __init__(self) -> None:
        self.started = self.last_line = time.monotonic()
        self.done = self.solved = self.errors = 0
        self.tokens = 0
        self.cost = 0.0
        self.sent = self.cached = 0

    def add(self, r: EpisodeRecord) -> None:
        self.done += 1
        self.solved += r.success
        self.errors += r.status != "ok"
        self.tokens += r.prompt_tokens + r.completion_tokens
        self.cost += r.cost
        self.sent += r.prompt_tokens
        self.cached += min(r.cached_tokens, r.prompt_tokens)

    def text(self) -> str:
        sr = 100.0 * self.solved / self.done if self.done else 0.0
        err = f" | {self.errors} errored" if self.errors else ""
        # the share of prompt tokens the server evaluated (the rest came from its prompt cache)
        share = f" | eval/sent {(self.sent - self.cached) / self.sent:.2f}" if self.sent else ""
        return f"SR {sr:5.1f}% | {self.tokens / 1000:.1f}k tok{share} | ${self.cost:.4f}{err}"

    def plain_line(self, total: int, *, last: bool) -> str | None:
        """The progress as one line of text, when one is due (every few seconds, and at the end)."""
        now = time.monotonic()
        if not last and now - self.last_line < PLAIN_PROGRESS_EVERY_S:
            return None
        self.last_line = now
        return f"progress: {self.done}/{total} episodes | {self.text()} | {now - self.started:.0f}s"


def evaluate(
    spec: RunSpec,
    *,
    console: Console | None = None,
    executor_factory: Callable[[int, Callable[[], Environment]], EpisodeExecutor] = ThreadExecutor,
    env_factory: Callable[[RunSpec], Environment] = open_env,
    progress: bool = True,
) -> RunSummary:
    """Run every (method, task) episode of ``spec`` not yet recorded in ``spec.out``.

    Everything is validated before ``spec.out`` is created (methods, the task selection, the
    settings of records already there), so a refused run leaves no directory behind; if the run
    fails before recording anything in a directory it created, the directory is removed again.

    A recorded episode is reused only when its identity (see :mod:`stateflow.tasks.harness.identity`) equals this
    run's exactly; with ``retry_errors`` an errored one is re-run and its new record appended
    (the newest record wins for every reader).

    Ctrl-C stops scheduling new episodes, lets the running ones finish and be recorded, and
    returns with ``interrupted=True``; a second Ctrl-C aborts at once.

    One run at a time writes to ``spec.out`` (see :mod:`stateflow.tasks.harness.run_lock`).

    Raises:
        ValueError: unknown benchmark or method, or a bad task selection.
        RunInProgressError: another process is running into ``spec.out``.
        MixedSettingsError: ``spec.out`` holds records of this benchmark made with other
            settings and ``spec.mix_settings`` is off.
    """
    console = console or Console(stderr=True)
    _check_out_dir(spec.out)
    methods = tuple(dict.fromkeys(spec.methods))
    if len(methods) < len(spec.methods):
        console.print(f"[yellow]note:[/] methods repeated in {','.join(spec.methods)}; each runs once")
        spec = replace(spec, methods=methods)
    states: dict[str, None] = {}
    for m in methods:
        flow, _ = build_method(m, spec.bench)  # unknown methods fail before anything starts
        states.update(dict.fromkeys(flow.states))
    if not spec.oracle:  # a per-state model key must name a state of some method (a typo is no fallback)
        spec.models.check_states(list(states), f"the flows of {', '.join(methods)}")
    probe = env_factory(spec)
    try:
        tasks = spec.tasks
        if tasks.strip() in SAMPLE_NAMES:  # a fixed sample: its indices come from the dataset itself
            sample = sample_of(tasks.strip(), spec.dataset, [probe.task(i) for i in range(len(probe))])
            tasks = ",".join(map(str, sample.indices))
        selection = select_tasks(tasks, len(probe))
        if spec.order == "context":  # read the tasks' contexts once, while the probe is open
            selection = replace(selection, contexts=tuple(probe.task(i).context for i in selection.indices))
        identities = run_identities(spec, dataset_fingerprint(probe))
    finally:
        probe.close()
    if selection.duplicates:
        repeated = ", ".join(map(str, selection.duplicates))
        console.print(f"[yellow]note:[/] --tasks repeats {repeated}; each task runs once")
    results = ResultsFile(spec.out / "results.jsonl")
    loaded = results.load()
    current = latest_records(loaded.records)
    if not spec.run_missing:  # only what is recorded with these settings; the directory is not touched
        digests = {ident.digest for ident in identities.values()}
        wanted = set(selection.indices)
        mine = [r for r in current if r.identity_digest in digests and r.task in wanted]
        mine += _archived(spec, identities, selection, current)
        planned = len(spec.methods) * len(selection.indices)
        return RunSummary(spec.out, planned, len(mine), 0, False, mine, identities)
    others, diffs, legacy = _other_settings(current, identities)
    if others and not spec.mix_settings:
        raise MixedSettingsError(results.path, len(others), diffs, legacy)
    if others:
        console.print(f"[yellow]note:[/] adding to {len(others)} record(s) of other settings in {results.path}")
    created = not spec.out.exists()
    spec.out.mkdir(parents=True, exist_ok=True)
    lock: RunLock | None = None
    try:
        lock = RunLock(spec.out)
        # What a report draws: each method's flow, kept here so no report re-imports a user's module.
        save_cards(
            spec.out,
            [card_for(spec.bench.name, m, build_method(m, spec.bench, grammar=spec.grammar)[0]) for m in spec.methods],
        )
        # Read again under the lock: a run that held it until now may have recorded more.
        loaded = results.load()
        current = latest_records(loaded.records)
        archived = _archived(spec, identities, selection, current)
        if archived:  # copied in, so this directory alone holds every episode the run reports
            if loaded.torn_tail:
                results.load(repair=True)
            results.extend(archived)
            console.print(f"resumed {len(archived)} episode(s) from the archive {spec.archive}")
            loaded = results.load()
            current = latest_records(loaded.records)
        return _run(
            spec,
            identities,
            selection,
            results,
            current,
            loaded.torn_tail,
            console,
            executor_factory,
            env_factory,
            progress,
        )
    except BaseException:
        if created and not results.path.exists():  # nothing recorded: leave no empty directory behind
            for name in ("run.json", FLOW_CARDS_NAME, LOCK_NAME):
                (spec.out / name).unlink(missing_ok=True)
            _drop_live(spec.out)
            with contextlib.suppress(OSError):
                spec.out.rmdir()
        raise
    finally:
        if lock is not None:
            _drop_live(spec.out)  # none is in flight any more (a killed run's are swept at the next start)
            lock.release()


def _drop_live(out: Path) -> None:
    clear_live(out)
    with contextlib.suppress(OSError):
        (out / LIVE_DIR).rmdir()


def _archived(
    spec: RunSpec, identities: dict[str, EpisodeIdentity], selection: TaskSelection, current: list[EpisodeRecord]
) -> list[EpisodeRecord]:
    """The archived records of this run's episodes that the results file does not hold yet."""
    if spec.archive is None:
        return []
    digests = {ident.digest for ident in identities.values()}
    wanted = set(selection.indices)
    have = {record_key(r) for r in current}
    return [
        r
        for r in RecordArchive(spec.archive).load()
        if r.identity_digest in digests and r.task in wanted and record_key(r) not in have
    ]


def _run(
    spec: RunSpec,
    identities: dict[str, EpisodeIdentity],
    selection: TaskSelection,
    results: ResultsFile,
    current: list[EpisodeRecord],
    torn_tail: bool,
    console: Console,
    executor_factory: Callable[[int, Callable[[], Environment]], EpisodeExecutor],
    env_factory: Callable[[RunSpec], Environment],
    progress: bool,
) -> RunSummary:
    if torn_tail:
        # Cut the torn line off before appending, or the next record would be glued onto it.
        results.load(repair=True)
        console.print("[yellow]note:[/] cut off an incomplete last record (the previous run was killed mid-write)")
    digests = {ident.digest: m for m, ident in identities.items()}
    done = {
        record_key(r) for r in current if r.identity_digest in digests and not (spec.retry_errors and r.status != "ok")
    }
    contexts = selection.contexts or (None,) * len(selection.indices)
    pairs = episode_order(spec.methods, list(zip(selection.indices, contexts, strict=True)), spec.order)
    jobs = [(m, i) for m, i in pairs if (identities[m].digest, i) not in done]
    skipped = len(spec.methods) * len(selection.indices) - len(jobs)
    (spec.out / "run.json").write_text(
        json.dumps(
            {f.name: getattr(spec, f.name) for f in fields(spec) if f.name not in ("models", "scripts")}
            | {
                "benchmark": spec.bench.name,
                "models": identities[spec.methods[0]].models,
                "tasks_selected": len(selection.indices),
                "identities": {m: ident.digest for m, ident in identities.items()},
                "started": time.time(),
            },
            default=str,
            indent=2,
        )
    )
    clear_live(spec.out)  # a killed run's episodes are not in flight any more
    if skipped:
        console.print(f"resuming: {skipped} episode(s) already in {results.path}, {len(jobs)} to run")
    http = HttpClients()
    specs = {
        m: EpisodeSpec(
            benchmark=spec.bench,
            dataset=spec.dataset,
            method=m,
            models=seeded(spec.models, spec.seed),
            models_label=identities[m].models,
            max_turns=spec.max_turns,
            timeout_s=spec.task_timeout_s,
            grammar=spec.grammar,
            oracle=spec.oracle,
            scripts=spec.scripts,
            http=http,
        )
        for m in spec.methods
    }
    stamps = {m: (ident.to_dict(), ident.digest) for m, ident in identities.items()}
    # a fixed sample's name goes on every record: held-out runs are counted from it (stateflow.tasks.reports.heldout)
    sample = spec.tasks.strip() if spec.tasks.strip() in SAMPLE_NAMES else None
    live = _Live()
    new_records: list[EpisodeRecord] = []
    interrupted = False
    executor = executor_factory(spec.workers, lambda: env_factory(spec))
    if jobs and not spec.oracle:
        # Loading a model takes seconds: do it before the first episode, not inside it.
        try:
            executor.start_models(spec.models)
        except BaseException:
            executor.close()
            http.close()
            raise
    bar = Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[stats]}"),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        console=console,
        disable=not progress,
        transient=False,
    )

    def work(env: Environment, job: tuple[str, int]) -> EpisodeRecord:
        method, index = job
        side: LiveFile | None = None
        if spec.live:
            started = LiveEpisode(method, index, env.task(index).query, identities[method].models, time.time())
            side = LiveFile(live_path(spec.out, identities[method].digest, index), started)
        try:
            record = run_episode(env, index, specs[method], on_event=side, tokens=spec.live_tokens)
        except BaseException:
            if side is not None:
                side.close()
            raise
        if side is not None:
            side.end(record.status)
        record = record.stamped(*stamps[method])
        return record.model_copy(update={"sample": sample}) if sample else record

    # --order context: parallel workers take different databases (executors.LaneQueue), so each
    # stays on its replica's prompt cache; other orders keep the order they promise (and one
    # worker has no lanes to choose between).
    context_of = dict(zip(selection.indices, contexts, strict=True))
    lanes = {"lane": lambda job: context_of[job[1]]} if spec.order == "context" and spec.workers > 1 else {}

    def on_interrupt() -> None:
        console.print("[yellow]interrupted:[/] finishing the episodes in flight (Ctrl-C again to abort)")

    plain = progress and not console.is_terminal
    with bar:
        tid = bar.add_task(f"{spec.bench.name} {','.join(spec.methods)}", total=len(jobs), stats=live.text())
        try:
            for record in executor.run(jobs, work, on_interrupt, **lanes):
                results.append(record)  # recorded before anything else can go wrong
                if spec.live:  # its record is saved: the episode is no longer in flight
                    with contextlib.suppress(OSError):
                        live_path(spec.out, record.identity_digest or "", record.task).unlink(missing_ok=True)
                new_records.append(record)
                live.add(record)
                bar.update(tid, advance=1, stats=live.text())
                line = live.plain_line(len(jobs), last=live.done == len(jobs)) if plain else None
                if line is not None:
                    console.print(line, markup=False, highlight=False)
        except KeyboardInterrupt:
            console.print("[red]aborted[/]; finished episodes are saved")
            interrupted = True
        finally:
            executor.close()
            http.close()
    interrupted = interrupted or executor.interrupted
    if interrupted:
        console.print(f"saved {len(new_records)} episode(s); re-run the same command to resume")
    mine = [r for r in latest_records(current + new_records) if r.identity_digest in digests]
    return RunSummary(spec.out, len(jobs) + skipped, skipped, len(new_records), interrupted, mine, identities)

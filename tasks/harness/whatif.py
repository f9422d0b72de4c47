"""What-if replays: re-run recorded episodes from a state on, with another model there.

``stateflow whatif RUN_DIR --at Verify --model Verify=local-small`` answers "what would the
reward have been had Verify used another model" with measured rewards, paired task by task.

How an episode is re-run. Every record written by ``stateflow run`` keeps the episode's model
calls in order (:attr:`EpisodeRecord.calls`: the asking state, the reply, its usage and a hash
of the request). The *prefix* is every call made before the first call from state ``at``. The
episode is run again from its start in a fresh environment (reset to the task as usual) with a
:class:`~stateflow.backends.call_log.CallLog` that answers the prefix's calls with their recorded
replies, so no model is asked again, while the flow's own tools execute the prefix's actions
again: the environment reaches the fork point by replaying them (exact for Bash as for SQL: the
file system at the fork point is rebuilt, not assumed). From the first call in ``at`` on, the
models answer: the recorded assignment with the change applied.

:mod:`stateflow.tasks.reports.whatif` pairs the new records with the recorded ones.

The replay is checked, not trusted: each replayed call must come from the same state with the
same request (the same messages, so the same observations) as recorded, and every prefix call
must be consumed; otherwise the episode is reported *diverged* (kept in the records with its
error, left out of the paired comparison). The records are refused up front when they cannot be
replayed faithfully: written before calls were kept (or archived: archives drop traces), made by
a flow whose definition has changed since, on another dataset, or with model profiles that
cannot be rebuilt (see :func:`plan_whatif`).

The new records go to their own directory (default ``RUN_DIR/whatif-<state>-<change>``) as
ordinary episode records (``stateflow report`` reads them), stamped with an identity whose
``models`` label names the replay (``default=local,Verify=local-small (whatif at Verify)``), so
they are never mistaken for a fresh run of that assignment, plus a ``whatif`` entry: the source
record's identity digest, the state and how many calls were replayed. Re-running the same
command skips episodes already recorded there.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

from stateflow.envs.base import Environment
from stateflow.tasks.agents.methods import build_method
from stateflow.tasks.harness.episode import EpisodeSpec, run_episode
from stateflow.tasks.harness.identity import EpisodeIdentity, dataset_fingerprint, flow_fingerprint, models_fingerprint
from stateflow.tasks.harness.live_file import LiveEpisode, LiveFile, clear_live, live_path
from stateflow.tasks.harness.records import ResultsFile, check_results_file, latest_records
from stateflow.tasks.harness.registry import BenchmarkRegistry
from stateflow.tasks.harness.run_lock import RunLock
from stateflow.tasks.harness.runner import select_tasks
from stateflow.tasks.kit.benchmark import Benchmark, EnvOptions
from stateflow.tasks.kit.episode_record import EpisodeRecord

from stateflow.backends.call_log import RecordedCall
from stateflow.backends.http import HttpClients
from stateflow.errors import ConfigError
from stateflow.events import Event, EventSink
from stateflow.profiles import ModelAssignment, parse_model_options

__all__ = ["WhatIfEpisode", "WhatIfPlan", "WhatIfResult", "plan_whatif", "run_whatif"]


@dataclass(frozen=True)
class WhatIfEpisode:
    """One recorded episode to re-run: its record and the prefix of calls to replay."""

    source: EpisodeRecord
    prefix: tuple[RecordedCall, ...]


@dataclass(frozen=True)
class _Setting:
    """What the episodes of one recorded setting (method and identity) are re-run with."""

    bench: Benchmark
    identity: EpisodeIdentity
    models: ModelAssignment
    data_dir: str | None


@dataclass
class WhatIfPlan:
    """What :func:`run_whatif` will do (built and checked by :func:`plan_whatif`, nothing run yet).

    Attributes:
        at: the state the change starts at.
        change: ``{state: profile}`` applied on top of each record's own assignment.
        out: the directory the new records go to.
        episodes: the recorded episodes that reached ``at`` (one per task and setting).
        not_reached: records (task indices) whose episode never asked a model in ``at``.
    """

    at: str
    change: dict[str, str]
    out: Path
    episodes: list[WhatIfEpisode]
    not_reached: list[int]
    settings: dict[str, _Setting] = field(default_factory=dict, repr=False)


@dataclass
class WhatIfResult:
    """The replays' records and their paired comparison with the recorded episodes.

    Attributes:
        plan: what was re-run.
        before, after: the recorded records and the new ones, for the episodes that replayed
            faithfully (the comparison's sides).
        diverged: new records whose replay did not follow the recording (with their error).
        new_tokens: per task, the prompt + completion tokens of the calls after the fork point
            (what the change cost; the prefix's tokens were paid by the recorded run).
    """

    plan: WhatIfPlan
    before: list[EpisodeRecord]
    after: list[EpisodeRecord]
    diverged: list[EpisodeRecord]
    new_tokens: dict[int, int]


def _slug(text: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "-" for c in text)


def _load(source: Path) -> list[EpisodeRecord]:
    path = source / "results.jsonl" if source.is_dir() else source
    if not path.exists():
        raise ConfigError(f"{source}: no results.jsonl (give the --out directory of a `stateflow run`)")
    check_results_file(path)
    records = latest_records(ResultsFile(path).load().records)
    if not records:
        raise ConfigError(f"{path}: no episodes recorded")
    return records


def _data_dir(source: Path) -> str | None:
    """The ``--data`` the source run was given (its ``run.json``), if any."""
    settings = source / "run.json"
    if not settings.is_file():
        return None
    try:
        value = json.loads(settings.read_text()).get("data_dir")
    except (OSError, ValueError):
        return None
    return value if isinstance(value, str) and value else None


def _identity(record: EpisodeRecord, where: str) -> EpisodeIdentity:
    raw = record.identity
    if not isinstance(raw, Mapping):
        raise ConfigError(
            f"{where}: task {record.task} has no episode identity (written by an older version); "
            "a what-if needs records written by this version of `stateflow run`"
        )
    known = {f for f in EpisodeIdentity.__dataclass_fields__}
    try:
        return EpisodeIdentity(**{k: v for k, v in raw.items() if k in known})
    except TypeError as err:
        raise ConfigError(f"{where}: task {record.task}: unreadable episode identity ({err})") from None


def _setting(
    record: EpisodeRecord,
    identity: EpisodeIdentity,
    registry: BenchmarkRegistry,
    base: ModelAssignment,
    change: dict[str, str],
    at: str,
    where: str,
    data_dir: str | None,
) -> _Setting:
    """Check that ``record``'s setting can be re-run faithfully with ``change`` from ``at``."""
    if identity.policy != "llm":
        raise ConfigError(f"{where}: the records replay the gold answer (oracle policy); a what-if needs model runs")
    if record.benchmark not in registry:
        raise ConfigError(f"{where}: unknown benchmark {record.benchmark!r} ({', '.join(registry.names())})")
    bench = registry.get(record.benchmark)
    flow, _ = build_method(identity.method, bench, grammar=identity.grammar)
    if at not in flow.states:
        raise ConfigError(
            f"--at {at!r}: flow {flow.name!r} (method {identity.method!r}) has no such state; "
            f"its states: {', '.join(flow.states)}"
        )
    fingerprint = flow_fingerprint(flow)
    if fingerprint != identity.flow_sha256:
        raise ConfigError(
            f"{where}: method {identity.method!r} was recorded with flow fingerprint {identity.flow_sha256[:12]}, "
            f"but its flow is now {fingerprint[:12]}: the definition changed since the run, so its recorded "
            "replies no longer fit; re-run the episodes first"
        )
    try:
        recorded = ModelAssignment.of(parse_model_options(identity.models.split(",")), profiles=base.profiles.values())
        same = models_fingerprint(recorded) == identity.models_sha256
        problem = "" if same else "the profiles' settings differ from the run's"
    except (ConfigError, KeyError) as err:
        problem = str(err)
    if problem:
        raise ConfigError(
            f"{where}: the run's models ({identity.models}) cannot be rebuilt as they were ({problem}); "
            "pass the --config the run was given"
        )
    recorded.check_states(list(flow.states), f"flow {flow.name!r}")
    models = recorded.merged(change)
    models.check_states(list(flow.states), f"flow {flow.name!r}")
    for state, name in change.items():
        if name not in models.profiles:
            raise ConfigError(
                f"--model {state}={name}: unknown model profile {name!r}; known: {', '.join(sorted(models.profiles))}"
            )
    models.refuse_test_doubles()
    return _Setting(bench, identity, models, data_dir)


def plan_whatif(
    source: Path,
    at: str,
    change: Mapping[str, str],
    *,
    registry: BenchmarkRegistry,
    base: ModelAssignment | None = None,
    tasks: str = "all",
    out: Path | None = None,
    identity_digest: str | None = None,
) -> WhatIfPlan:
    """Check a what-if and list the episodes it re-runs (nothing runs, nothing is written).

    Args:
        source: a results directory of ``stateflow run`` (or its ``results.jsonl``).
        at: the state from which the change applies.
        change: ``{state: profile name}`` (``--model STATE=PROFILE``); every state it names
            must exist in the flow, every profile must be known.
        registry: the benchmarks.
        base: the profiles known to the run (a ``--config`` file's; default: the built-in ones).
        tasks: which recorded tasks (``all``, ``A:B``, ``0,4,9``).
        out: where the new records go (default: ``source/whatif-<at>-<change>``).
        identity_digest: only the records of this setting (one method's episodes; ``stateflow
            ui`` replays one episode); ``None``: every setting in ``source``.

    Raises:
        ConfigError: no records; records without identity or without their model calls (older
            records, or an archive); an unknown state or profile; a flow whose fingerprint no
            longer matches the recorded one; models that cannot be rebuilt; an empty change.
    """
    if not change:
        raise ConfigError("give the change as --model STATE=PROFILE")
    change = {str(k): str(v) for k, v in change.items()}
    base = base or ModelAssignment.of(None)
    folder = source if source.is_dir() else source.parent
    where = str(source)
    records = _load(source)
    with_calls = [r for r in records if r.calls or r.llm_calls == 0]
    if not with_calls:
        raise ConfigError(
            f"{where}: its {len(records)} record(s) keep no model calls (written before records kept them, or "
            "an archive, which drops traces); a what-if replays recorded calls: re-run the episodes"
        )
    total = max(r.task for r in records) + 1
    wanted = set(select_tasks(tasks, total).indices)
    settings: dict[str, _Setting] = {}
    episodes: list[WhatIfEpisode] = []
    not_reached: list[int] = []
    for r in records:
        if r.task not in wanted or (identity_digest is not None and r.identity_digest != identity_digest):
            continue
        identity = _identity(r, where)
        digest = r.identity_digest or identity.digest
        if digest not in settings:
            settings[digest] = _setting(r, identity, registry, base, change, at, where, _data_dir(folder))
        if not r.calls and r.llm_calls:
            raise ConfigError(f"{where}: task {r.task} keeps no model calls; a what-if needs every record's calls")
        calls = [RecordedCall.from_dict(c, f"{where}: task {r.task} call {i}") for i, c in enumerate(r.calls)]
        first = next((i for i, c in enumerate(calls) if c.state == at), None)
        if first is None:
            not_reached.append(r.task)
            continue
        episodes.append(WhatIfEpisode(r, tuple(calls[:first])))
    label = ",".join(f"{k}={v}" for k, v in sorted(change.items()))
    target = out or folder / f"whatif-{_slug(at)}-{_slug(label)}"
    plan = WhatIfPlan(at, change, target, episodes, sorted(not_reached), settings)
    return plan


def _label(models: ModelAssignment, at: str) -> str:
    return ",".join(f"{k}={v}" for k, v in sorted(models.by_state.items())) + f" (whatif at {at})"


def _both(first: EventSink, second: EventSink) -> EventSink:
    def sink(event: Event) -> None:
        first(event)
        second(event)

    return sink


def _faithful(record: EpisodeRecord, prefix: tuple[RecordedCall, ...]) -> bool:
    """The replay consumed the whole prefix as recorded (a diverged one raised, or stopped early)."""
    if record.status == "error" and (record.error or "").startswith("ReplayDiverged"):
        return False
    replayed = record.calls[: len(prefix)]
    return len(replayed) == len(prefix) and all(c == p.to_dict() for c, p in zip(replayed, prefix, strict=True))


def run_whatif(
    plan: WhatIfPlan,
    *,
    env_factory: Callable[[Benchmark, EnvOptions], Environment] | None = None,
    timeout_s: float = 600.0,
    on_record: Callable[[EpisodeRecord], None] | None = None,
    on_event: EventSink | None = None,
) -> WhatIfResult:
    """Re-run every episode of ``plan`` (see the module docstring) and compare it with its record.

    While it runs, ``plan.out`` is locked as a run's results directory is
    (:mod:`~stateflow.tasks.harness.run_lock`: a second replay into it fails at once) and each
    episode in flight writes its events to ``plan.out/live/`` as the runner's do
    (:mod:`~stateflow.tasks.harness.live_file`), so ``stateflow ui``'s live page lists it; the
    side file is deleted once its record is saved.

    Args:
        plan: from :func:`plan_whatif`.
        env_factory: opens an environment (default: the benchmark's own ``open_env``).
        timeout_s: seconds per episode.
        on_record: called with each new record once it is saved (progress).
        on_event: also receives every event of the episodes re-run (:mod:`stateflow.events`;
            steps and transitions, no tokens): ``stateflow ui`` shows a replay's progress from them.

    Raises:
        RunInProgressError: another process is writing to ``plan.out``.
    """
    plan.out.mkdir(parents=True, exist_ok=True)
    with RunLock(plan.out):
        clear_live(plan.out)  # a killed replay's side files: not in flight any more
        try:
            return _run_whatif(plan, env_factory, timeout_s, on_record, on_event)
        finally:
            clear_live(plan.out)


def _run_whatif(
    plan: WhatIfPlan,
    env_factory: Callable[[Benchmark, EnvOptions], Environment] | None,
    timeout_s: float,
    on_record: Callable[[EpisodeRecord], None] | None,
    on_event: EventSink | None,
) -> WhatIfResult:
    results = ResultsFile(plan.out / "results.jsonl")
    have = {(r.identity_digest, r.task): r for r in latest_records(results.load(repair=True).records)}
    open_env = env_factory or (lambda bench, options: bench.open_env(options))
    envs: dict[str, Environment] = {}
    http = HttpClients()
    new: list[tuple[WhatIfEpisode, EpisodeRecord]] = []
    try:
        for episode in plan.episodes:
            src = episode.source
            setting = plan.settings[src.identity_digest or _identity(src, str(plan.out)).digest]
            ident = setting.identity
            identity = replace(
                ident, models=_label(setting.models, plan.at), models_sha256=models_fingerprint(setting.models)
            )
            done = have.get((identity.digest, src.task))
            if done is not None:
                new.append((episode, done))
                continue
            key = src.identity_digest or ""
            env = envs.get(key)
            if env is None:
                options = EnvOptions(
                    dataset=ident.dataset,
                    backend=ident.backend,
                    data_dir=setting.data_dir,
                    database_scope=ident.database_scope or "benchmark",
                )
                env = envs[key] = open_env(setting.bench, options)
                if dataset_fingerprint(env) != ident.dataset_sha256:
                    raise ConfigError(
                        f"{plan.out}: dataset {ident.dataset!r} differs from the one the run used "
                        f"(fingerprint {ident.dataset_sha256[:12]}); pass the run's --data"
                    )
            spec = EpisodeSpec(
                benchmark=setting.bench,
                dataset=ident.dataset,
                method=ident.method,
                models=setting.models,
                models_label=identity.models,
                max_turns=ident.max_turns,
                timeout_s=timeout_s,
                grammar=ident.grammar,
                http=http,
                replay=episode.prefix,
            )
            side = LiveFile(
                live_path(plan.out, identity.digest, src.task),
                LiveEpisode(ident.method, src.task, src.query, identity.models, time.time()),
            )
            sink = side if on_event is None else _both(side, on_event)
            try:
                record = run_episode(env, src.task, spec, on_event=sink).stamped(identity.to_dict(), identity.digest)
                side.end(record.status)
            finally:
                side.close()
            record = record.model_copy(
                update={
                    "sample": src.sample,
                    "whatif": {
                        "source": src.identity_digest,
                        "at": plan.at,
                        "change": dict(plan.change),
                        "replayed_calls": len(episode.prefix),
                    },
                }
            )
            results.append(record)
            live_path(plan.out, identity.digest, src.task).unlink(missing_ok=True)  # recorded: not in flight
            new.append((episode, record))
            if on_record is not None:
                on_record(record)
    finally:
        http.close()
        for env in envs.values():
            with contextlib.suppress(Exception):  # closing must not hide the run's own error
                env.close()
    faithful = [(e, r) for e, r in new if _faithful(r, e.prefix)]
    diverged = [r for e, r in new if not _faithful(r, e.prefix)]
    before = [e.source for e, _ in faithful]
    after = [r for _, r in faithful]
    new_tokens = {
        r.task: sum(
            int(c["usage"].get("prompt_tokens", 0)) + int(c["usage"].get("completion_tokens", 0))
            for c in r.calls[len(e.prefix) :]
        )
        for e, r in faithful
    }
    return WhatIfResult(plan, before, after, diverged, new_tokens)

"""The search itself: rungs of growing task prefixes, every evaluation done by the runner.

Each candidate has its own results directory ``OUT/candidates/<key>/`` and every evaluation is a
call to :func:`stateflow.tasks.harness.runner.evaluate` on the rung's tasks: the runner writes the
records, stamps their identity and skips every episode already recorded. So the search keeps no
state of its own: a killed ``optimize`` re-run with the same space walks the same rungs, finds
the finished evaluations in the records (nothing re-runs), and makes the same cuts, because the
cuts and the budget are computed from those records alone. ``OUT/plan.json`` keeps the space a
directory was made for; another space is refused (the budget may change, to go on further).

The pool's tasks are shuffled once with the space's seed and every rung is a prefix of that
order: the dev sample is sorted by index, which groups tasks by database, and a prefix of it
would be a few databases only.

Budget: before a candidate's evaluation on a rung, its remaining episodes are priced at the
mean cost per episode measured so far in this search (the space's ``per_episode`` estimate
before anything is measured); a candidate that does not fit ends the search there, and the front
is drawn from what was evaluated. A budget that cannot pay for one candidate's first rung is
refused before any model call.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from rich.console import Console
from stateflow.envs.base import Environment
from stateflow.tasks.agents.methods import resolve_method
from stateflow.tasks.harness.archive import RecordArchive
from stateflow.tasks.harness.runner import RunSpec, evaluate, open_env, select_tasks
from stateflow.tasks.kit.benchmark import Benchmark
from stateflow.tasks.kit.episode_record import EpisodeRecord
from stateflow.tasks.kit.samples import SAMPLE_NAMES, sample_of
from stateflow.tasks.kit.stats import mcnemar_exact_p, wilson_interval
from stateflow.tasks.optimize.front import mark_front
from stateflow.tasks.optimize.outcome import CandidateResult, OptimizeSummary, RewriteResult, RungLog
from stateflow.tasks.optimize.racing import Standing, next_rung
from stateflow.tasks.optimize.rewrite import (
    RewrittenPrompt,
    has_prompt,
    load_or_rewrite,
    save_prompt_set,
    with_rewritten,
)
from stateflow.tasks.optimize.space import Candidate, SearchPlan, SearchSpace, SpaceError

from stateflow import ModelAssignment

__all__ = [
    "OptimizeRun",
    "episode_cost",
    "optimize",
    "rung_sizes",
    "task_pool",
]

PLAN_NAME = "plan.json"
SUMMARY_NAME = "optimize.json"


def episode_cost(record: EpisodeRecord, unit: str) -> float:
    """What one episode cost: summed model-call seconds, or prompt + completion tokens."""
    if unit == "tokens":
        return float(record.prompt_tokens + record.completion_tokens)
    return float(sum(float(u.get("latency_s", 0.0)) for u in record.usage_by_model.values()))


def rung_sizes(first: int, eta: int, pool: int) -> list[int]:
    """``first, first*eta, ...`` up to the whole pool (its size last)."""
    sizes: list[int] = []
    n = min(first, pool)
    while True:
        sizes.append(n)
        if n >= pool:
            return sizes
        n = min(n * eta, pool)


@dataclass(frozen=True)
class OptimizeRun:
    """Everything ``stateflow optimize`` is given.

    Attributes:
        space: the validated space; plan: its candidates (:func:`~.space.expand`).
        models: knows every usable profile (built-ins and a config's).
        out: results root; archive: a record archive file read and merged (``None``: none).
        heldout: evaluate the pick on ``space.heldout`` afterwards.
    """

    space: SearchSpace
    plan: SearchPlan
    benchmark: Benchmark
    models: ModelAssignment
    out: Path
    archive: Path | None = None
    heldout: bool = True
    workers: int = 1
    task_timeout_s: float = 600.0
    grammar: bool = False
    data_dir: str | None = None
    env_factory: Callable[[RunSpec], Environment] = field(default=open_env, compare=False)


def task_pool(run: OptimizeRun) -> list[int]:
    """The pool's task indices, in the search's fixed order (opens the environment, runs no model).

    Raises:
        SpaceError: the space's ``tasks`` selects nothing valid.
    """
    spec = _spec(run, next(iter(run.plan.candidates)), "all", run.out)
    probe = run.env_factory(spec)
    try:
        wanted = run.space.tasks.strip()
        if wanted in SAMPLE_NAMES:
            indices = list(sample_of(wanted, run.space.dataset, [probe.task(i) for i in range(len(probe))]).indices)
        else:
            indices = list(select_tasks(wanted, len(probe)).indices)
    except ValueError as err:
        raise SpaceError("the search space", [f"tasks {wanted!r}: {err}"]) from None
    finally:
        probe.close()
    random.Random(run.space.search.seed).shuffle(indices)
    return indices


def _spec(run: OptimizeRun, c: Candidate, tasks: str, out: Path, benchmark: Benchmark | None = None) -> RunSpec:
    return RunSpec(
        benchmark=benchmark or run.benchmark,
        methods=(c.method,),
        models=c.assignment(run.models),
        models_label=c.models_label,
        out=out,
        dataset=run.space.dataset,
        tasks=tasks,
        workers=run.workers,
        max_turns=run.space.max_turns,
        task_timeout_s=run.task_timeout_s,
        grammar=run.grammar,
        data_dir=run.data_dir,
        archive=run.archive if run.archive is not None and run.archive.exists() else None,
        order=run.space.search.order,
    )


def _check_plan(run: OptimizeRun) -> None:
    """Refuse a results root made for another space; remember this one's."""
    mine = run.space.model_dump(exclude={"budget"}) | {"candidates": [c.label for c in run.plan.candidates]}
    path = run.out / PLAN_NAME
    if path.exists():
        recorded = json.loads(path.read_text())
        if recorded != mine:
            changed = ", ".join(sorted(k for k in mine.keys() | recorded.keys() if mine.get(k) != recorded.get(k)))
            why = f"this directory holds a search of another space (differs in: {changed}); use another --out"
            raise SpaceError(str(path), [why])
        return
    run.out.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(mine, indent=2))


def _result(c: Candidate, records: Sequence[EpisodeRecord], unit: str) -> CandidateResult:
    n = len(records)
    if not n:
        return CandidateResult(c.key, c.method, c.models_label)
    solved = sum(r.success for r in records)
    ci = wilson_interval(solved, n)
    spent = sum(episode_cost(r, unit) for r in records)
    return CandidateResult(
        c.key,
        c.method,
        c.models_label,
        n=n,
        solved=solved,
        success=100.0 * solved / n,
        ci_low=ci.low,
        ci_high=ci.high,
        prompt_tokens=sum(r.prompt_tokens for r in records) / n,
        seconds=sum(r.wall_s for r in records) / n,
        model_seconds=sum(episode_cost(r, "model_seconds") for r in records) / n,
        cost=spent / n,
        spent=spent,
    )


def check_budget(space: SearchSpace, sizes: list[int]) -> None:
    """Refuse a budget that cannot pay for one candidate's first rung (``sizes``: the rungs).

    Raises:
        SpaceError: naming the budget, the first rung's cost and the two ways out.
    """
    unit, per_episode = space.budget.unit, space.budget.estimate()
    if space.budget.limit < sizes[0] * per_episode:
        raise SpaceError(
            "the search space",
            [
                f"budget {space.budget.limit:g} {unit} cannot pay for one candidate's first rung "
                f"({sizes[0]} tasks x {per_episode:g} {unit} per episode, budget.per_episode); "
                "raise budget.limit (--budget) or lower search.first_rung"
            ],
        )


def optimize(run: OptimizeRun, *, console: Console | None = None, progress: bool = False) -> OptimizeSummary:
    """Search ``run.plan`` on the space's pool, then evaluate the pick on the held-out tasks.

    Raises:
        SpaceError: a bad pool, a results root of another space, or a budget that cannot pay for
            one candidate's first rung (all before any model call).
        MixedSettingsError, RunInProgressError: from the runner.
    """
    console = console or Console(stderr=True)
    space, unit = run.space, run.space.budget.unit
    pool = task_pool(run)
    sizes = rung_sizes(space.search.first_rung, space.search.eta, len(pool))
    check_budget(space, sizes)
    _check_plan(run)
    records: dict[str, list[EpisodeRecord]] = {}
    results = {c.key: _result(c, [], unit) for c in run.plan.candidates}
    survivors = list(run.plan.candidates)
    rungs: list[RungLog] = []
    stop = "complete"
    for r, n in enumerate(sizes):
        tasks = pool[:n]
        rung_tasks = set(tasks)
        for c in survivors:
            done = {x.task for x in records.get(c.key, []) if x.task in rung_tasks}
            measured = [x for rs in records.values() for x in rs]
            per_episode = (
                sum(episode_cost(x, unit) for x in measured) / len(measured) if measured else space.budget.estimate()
            )
            spent = sum(res.spent for res in results.values())
            cap = _cap(space.budget.limit, space.budget.share, results, per_episode, len(pool))
            if spent + (n - len(done)) * per_episode > cap:
                console.print(
                    f"budget: {spent:.0f} of {cap:.0f} {unit} spent; {c.label} on {n} tasks "
                    "does not fit, the search stops here"
                )
                stop = "budget"
                break
            summary = evaluate(
                _spec(run, c, ",".join(map(str, tasks)), run.out / "candidates" / c.key),
                console=console,
                env_factory=run.env_factory,
                progress=progress,
            )
            # the runner returns every record of the candidate's directory; a re-run search finds
            # there the tasks of rungs it went on to before, which must not count at this rung's cut
            records[c.key] = [x for x in summary.records if x.task in rung_tasks]
            results[c.key] = replace(_result(c, records[c.key], unit), rung=r)
            if summary.interrupted:
                stop = "interrupted"
                break
        if stop != "complete":
            break
        if n == len(pool):  # the whole pool is run: nothing further to cut for
            rungs.append(RungLog(n, {c.key: "ran the whole pool" for c in survivors}))
            break
        log = RungLog(n)
        standings = [
            Standing(
                c.key,
                {x.task: x.success for x in records[c.key]},
                results[c.key].cost,
                c.traits(space.levers, space.states),
            )
            for c in survivors
        ]
        verdicts = next_rung(standings, eta=space.search.eta, alpha=space.search.alpha)
        for v in verdicts:
            log.verdicts[v.key] = v.reason
            if not v.kept:
                results[v.key].dropped = f"rung {r} ({n} tasks): {v.reason}"
        rungs.append(log)
        kept = {v.key for v in verdicts if v.kept}
        # a last survivor still runs the whole pool: it is the pick, and its dev number and the
        # rewrite's paired comparison need every task, not the few of an early rung
        survivors = [c for c in survivors if c.key in kept]
    measured = [x for rs in records.values() for x in rs]
    mean = sum(episode_cost(x, unit) for x in measured) / len(measured) if measured else 0.0
    exhaustive = sum((res.cost if res.n else mean) * len(pool) for res in results.values())
    candidates = {c.key: c for c in run.plan.candidates}
    benchmarks = dict.fromkeys(candidates, run.benchmark)
    pick = _pick(list(results.values()))
    rewrite = None
    if pick is not None and space.rewrite is not None and stop == "complete":
        rewrite, stop = _rewrite_step(run, candidates[pick.key], records, results, candidates, benchmarks, console)
        if rewrite is not None and rewrite.adopted:
            pick = results[rewrite.key]
    summary = OptimizeSummary(
        space=space.name,
        benchmark=run.benchmark.name,
        unit=unit,
        budget=space.budget.limit,
        pool=len(pool),
        candidates=list(results.values()),
        rungs=rungs,
        spent=sum(res.spent for res in results.values()),
        exhaustive=exhaustive,
        stop=stop,
        skipped_sets=run.plan.skipped_sets,
        duplicates=run.plan.duplicates,
        rewrite=rewrite,
    )
    mark_front(summary.candidates)
    summary.pick = pick.key if pick else None
    if pick is not None and run.heldout and space.heldout and summary.stop != "interrupted":
        chosen = candidates[pick.key]
        held = evaluate(
            _spec(run, chosen, space.heldout, run.out / "heldout" / chosen.key, benchmarks[chosen.key]),
            console=console,
            env_factory=run.env_factory,
            progress=progress,
        )
        records["heldout"] = held.records
        summary.heldout = _result(chosen, held.records, unit)
        if held.interrupted:
            summary.stop = "interrupted"
    if run.archive is not None:
        RecordArchive(run.archive).merge(x for rs in records.values() for x in rs)
        if rewrite is not None:  # the records name the rewritten method: its text goes with them
            name = candidates[rewrite.key].method
            save_prompt_set(run.archive.parent, RewrittenPrompt(name.rsplit("@", 1)[0], rewrite.state, rewrite.text))
    (run.out / SUMMARY_NAME).write_text(summary.to_json())
    return summary


def _cap(
    limit: float, share: float | None, results: dict[str, CandidateResult], per_episode: float, pool: int
) -> float:
    """What the search may spend: ``limit``, or less when ``share`` of the exhaustive cost is less
    (each candidate on the whole pool at its measured cost per episode, ``per_episode`` for one
    not yet run)."""
    if share is None:
        return limit
    exhaustive = sum((res.cost if res.n else per_episode) * pool for res in results.values())
    return min(limit, share * exhaustive)


def _pick(results: Sequence[CandidateResult]) -> CandidateResult | None:
    """The best of the candidates evaluated on the most tasks (cheaper first on ties)."""
    ran = [r for r in results if r.n]
    if not ran:
        return None
    deepest = max(r.n for r in ran)
    return min((r for r in ran if r.n == deepest), key=lambda r: (-r.solved, r.cost, r.key))


def _rewrite_step(
    run: OptimizeRun,
    pick: Candidate,
    records: dict[str, list[EpisodeRecord]],
    results: dict[str, CandidateResult],
    candidates: dict[str, Candidate],
    benchmarks: dict[str, Benchmark],
    console: Console,
) -> tuple[RewriteResult | None, str]:
    """Rewrite the pick's state from its failures and run the rewritten flow on the pick's tasks.

    Updates ``records``, ``results``, ``candidates`` and ``benchmarks`` with the rewritten
    candidate; returns its comparison with the pick (``None``: not rewritten) and the stop reason.
    """
    settings, unit = run.space.rewrite, run.space.budget.unit
    assert settings is not None
    flow = resolve_method(run.benchmark, pick.method).build(False)
    if not has_prompt(flow, settings.state):
        console.print(f"rewrite: {pick.method} has no instruction in {settings.state}; nothing rewritten")
        return None, "complete"
    rewritten = load_or_rewrite(run.out, run.benchmark, pick.method, records[pick.key], settings, run.models)
    if rewritten is None:
        console.print(f"rewrite: {pick.label} failed no task; nothing to rewrite from")
        return None, "complete"
    c = Candidate(rewritten.name, pick.models)
    tasks = sorted(x.task for x in records[pick.key])
    measured = [x for rs in records.values() for x in rs]
    per_episode = sum(episode_cost(x, unit) for x in measured) / len(measured)
    spent = sum(res.spent for res in results.values())
    if spent + len(tasks) * per_episode > run.space.budget.limit:
        console.print(f"budget: the rewritten {settings.state} of {pick.method} on {len(tasks)} tasks does not fit")
        return None, "budget"
    bench = with_rewritten(run.benchmark, rewritten)
    done = evaluate(
        _spec(run, c, ",".join(map(str, tasks)), run.out / "candidates" / c.key, bench),
        console=console,
        env_factory=run.env_factory,
    )
    candidates[c.key], benchmarks[c.key], records[c.key] = c, bench, done.records
    results[c.key] = replace(_result(c, done.records, unit), rung=results[pick.key].rung)
    mine, theirs = {x.task: x.success for x in done.records}, {x.task: x.success for x in records[pick.key]}
    common = mine.keys() & theirs.keys()
    won = sum(mine[t] and not theirs[t] for t in common)
    lost = sum(theirs[t] and not mine[t] for t in common)
    adopted = results[c.key].solved > results[pick.key].solved and not done.interrupted
    result = RewriteResult(
        key=c.key,
        state=settings.state,
        sha256=rewritten.sha256,
        text=rewritten.text,
        won=won,
        lost=lost,
        p_value=mcnemar_exact_p(won, lost),
        adopted=adopted,
    )
    return result, "interrupted" if done.interrupted else "complete"

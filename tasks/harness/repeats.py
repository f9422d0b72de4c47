"""Repeated episodes: each task run K times with distinct sampler seeds, and what that shows.

One run of a sampled model on 100 tasks is one draw: run it again and some tasks flip. ``stateflow
run --repeats K --temperature T`` runs every (method, task) episode K times, repeat ``r`` with
every model profile at seed ``seed + r`` (:func:`~stateflow.tasks.harness.runner.seeded`), and reports per
method (:func:`repeat_rows`):

* pass@1: the mean success over all episodes, with its 95 % interval (a bootstrap over tasks:
  the repeats of one task are not independent draws, :func:`~stateflow.tasks.kit.stats.repeat_outcomes`);
* pass@K: the share of tasks solved at least once; pass^K: solved every time;
* flips: the share of tasks whose outcome changes between repeats.

Each repeat is recorded with its own episode identity (``repeat`` and ``seed`` are identity
fields, see :mod:`stateflow.tasks.harness.identity`), so repeats resume like any run and never replace one
another; records made without repeats keep their identities.

Repeats at temperature 0 would replay one greedy episode K times, so :func:`check_repeats` refuses
them unless some profile samples (temperature > 0). With the oracle policy there is no sampler:
K repeats are K replays of every gold, each in environments opened for that replay, which finds
golds that do not reproduce (:mod:`stateflow.tasks.reports.gold_check`).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from typing import Any

from rich.table import Table
from stateflow.tasks.harness.identity import REPEAT_FIELDS
from stateflow.tasks.harness.records import latest_records
from stateflow.tasks.harness.runner import RunSpec, RunSummary, evaluate
from stateflow.tasks.kit.episode_record import EpisodeRecord
from stateflow.tasks.kit.stats import RepeatOutcomes, repeat_outcomes

from stateflow.errors import ConfigError
from stateflow.profiles import ModelAssignment

__all__ = [
    "RepeatRow",
    "check_repeats",
    "recorded_repeats",
    "repeat_rows",
    "repeat_table",
    "run_repeats",
    "with_temperature",
]


def with_temperature(models: ModelAssignment, temperature: float) -> ModelAssignment:
    """``models`` with every profile sampling at ``temperature`` (a new setting: a new identity)."""
    profiles = {name: replace(p, temperature=temperature) for name, p in models.profiles.items()}
    return ModelAssignment.of(dict(models.by_state), profiles=profiles.values())


def check_repeats(models: ModelAssignment, repeats: int, *, oracle: bool = False) -> None:
    """Refuse repeats that cannot differ, before anything runs.

    Raises:
        ConfigError: ``repeats`` < 1, or repeats > 1 of a model policy while every assigned profile
            samples at temperature 0 (the oracle's repeats are gold replays: always allowed).
    """
    if repeats < 1:
        raise ConfigError(f"--repeats {repeats}: give at least 1")
    if repeats == 1 or oracle:
        return
    used = {name: models.profiles[name] for name in models.by_state.values()}
    if all(p.temperature == 0.0 for p in used.values()):
        raise ConfigError(
            f"--repeats {repeats}: every model samples at temperature 0 ({', '.join(sorted(used))}), so each repeat "
            "would replay the same greedy episode; add --temperature T (e.g. 0.7) or set temperature in the profiles"
        )


def run_repeats(
    spec: RunSpec, repeats: int, *, seed: int = 0, evaluate_fn: Callable[..., RunSummary] = evaluate, **kwargs: Any
) -> list[RunSummary]:
    """Run ``spec`` ``repeats`` times, repeat ``r`` at sampler seed ``seed + r`` (the oracle: no seed, a
    gold replay in fresh environments); one summary per repeat.

    With ``repeats == 1`` this is one plain run (no repeat fields in the identity). A run stopped
    by Ctrl-C stops before the next repeat; re-running the same command resumes every repeat.
    ``kwargs`` go to :func:`~stateflow.tasks.harness.runner.evaluate`.

    Raises:
        ConfigError: see :func:`check_repeats`.
    """
    check_repeats(spec.models, repeats, oracle=spec.oracle)
    if repeats == 1:
        return [evaluate_fn(spec, **kwargs)]
    out = []
    for r in range(repeats):
        summary = evaluate_fn(replace(spec, repeat=r, seed=None if spec.oracle else seed + r), **kwargs)
        out.append(summary)
        if summary.interrupted:
            break
    return out


@dataclass(frozen=True)
class RepeatRow:
    """One method's repeats: its group (benchmark, method, models) and the outcome statistics."""

    benchmark: str
    method: str
    models: str
    outcomes: RepeatOutcomes


def _setting(r: EpisodeRecord) -> tuple[Any, ...]:
    # the identity without the repeat fields: what the repeats of one setting share
    ident = r.identity or {}
    return tuple(sorted((k, repr(v)) for k, v in ident.items() if k not in REPEAT_FIELDS))


def recorded_repeats(records: Iterable[EpisodeRecord]) -> int:
    """K of the repeats in ``records``: one more than the highest ``repeat`` recorded (0 without repeats)."""
    found = [(r.identity or {}).get("repeat") for r in records]
    return max((x + 1 for x in found if isinstance(x, int)), default=0)


def repeat_rows(records: Iterable[EpisodeRecord], repeats: int) -> list[RepeatRow]:
    """Per method and setting, the outcome of ``repeats`` repeats (tasks with fewer are left out).

    Only records carrying a ``repeat`` identity field count; the newest record per episode is used.
    """
    by_setting: dict[tuple[Any, ...], dict[int, dict[int, bool]]] = defaultdict(lambda: defaultdict(dict))
    heads: dict[tuple[Any, ...], EpisodeRecord] = {}
    for r in latest_records(records):
        repeat = (r.identity or {}).get("repeat")
        if repeat is None or not 0 <= repeat < repeats:
            continue
        key = _setting(r)
        heads.setdefault(key, r)
        by_setting[key][r.task][repeat] = r.success
    rows = []
    for key, tasks in by_setting.items():
        full = {t: [runs[i] for i in range(repeats)] for t, runs in tasks.items() if len(runs) == repeats}
        if not full:
            continue
        head = heads[key]
        rows.append(RepeatRow(head.benchmark, head.method, head.models, repeat_outcomes(full, repeats)))
    return sorted(rows, key=lambda row: (row.benchmark, row.method, row.models))


def repeat_table(rows: Iterable[RepeatRow]) -> Table:
    """The repeats as a rich table: tasks, pass@1 with its 95 % interval, pass@K, pass^K, flips."""
    rows = list(rows)
    k = rows[0].outcomes.k if rows else 0
    table = Table(title=f"{k} repeats per task (distinct seeds)", title_justify="left")
    for head in ("benchmark", "method", "models"):
        table.add_column(head)
    for head in ("tasks", "pass@1 %", "95 % CI (bootstrap)", f"pass@{k} %", f"pass^{k} %", "flips %"):
        table.add_column(head, justify="right")
    for row in rows:
        o = row.outcomes
        table.add_row(
            row.benchmark,
            row.method,
            row.models,
            str(o.tasks),
            f"{o.pass_1:.1f}",
            o.pass_1_ci.text(),
            f"{o.pass_k:.1f}",
            f"{o.pass_hat_k:.1f}",
            f"{o.flips:.1f}",
        )
    table.caption = (
        "pass@1: mean success per episode; its interval is a percentile bootstrap over tasks (repeats of one "
        "task are not independent draws); flips: tasks whose outcome differs between repeats."
    )
    return table

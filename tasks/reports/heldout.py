"""Held-out discipline: which recipes were evaluated on the held-out sample, and in what order.

A held-out number means what it claims only if few recipes were tried on the held-out sample
before it: pick the best of ten recipes on the held-out tasks and its score is a development
score again. So every reported held-out number comes with the count of distinct recipes of its
*family* (benchmark, dataset and model assignment) that had been evaluated on the held-out sample
before it (:func:`heldout_evaluations`); ``stateflow bench heldout`` writes that table into
``docs/results.md`` from the archived records (:func:`heldout_section`).

What counts:

* a *recipe* is one episode identity (:mod:`stateflow.tasks.harness.identity`): method, flow and prompt
  fingerprints, models, turn limit, grammar... A flow edited after a held-out run is a new recipe;
  re-running the same recipe (resume, ``--retry-errors``) is not;
* a record is held-out when the runner stamped ``sample="heldout"`` on it (``--tasks heldout``),
  or, for records written before that field existed, when its task is one of the dataset's
  held-out indices (:mod:`stateflow.tasks.kit.samples`); repeats (``--repeats``) of one setting are one
  recipe;
* *before* means: its first held-out episode finished earlier than this recipe's first one;
* held-out runs published before their records were archived are listed in a ledger
  (``docs/data/heldout/unarchived.json``, :func:`load_unarchived`) and count like the others.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from stateflow.tasks.harness.identity import REPEAT_FIELDS, setting_digest
from stateflow.tasks.harness.records import latest_records
from stateflow.tasks.kit.episode_record import EpisodeRecord
from stateflow.tasks.kit.samples import SAMPLE_SIZES, sample_of
from stateflow.tasks.kit.stats import Interval, wilson_interval

from stateflow.errors import ConfigError

__all__ = [
    "HeldoutEvaluation",
    "UnarchivedRun",
    "heldout_evaluations",
    "heldout_section",
    "heldout_tasks",
    "is_heldout",
    "load_unarchived",
]


class UnarchivedRun(BaseModel):
    """A held-out run whose records were not archived (its published numbers only).

    ``recipe``: the identity digest when an archived run is known to be the same recipe (the two
    then count once, from the earlier), else a label of its own; ``source``: where it is published.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)

    benchmark: str
    dataset: str
    models: str
    method: str
    finished: str = Field(min_length=10)
    n: int = Field(ge=1)
    solved: int = Field(ge=0)
    recipe: str = Field(min_length=1)
    source: str


def load_unarchived(path: Path) -> list[UnarchivedRun]:
    """The ledger of unarchived held-out runs (``{"runs": [...]}``); ``[]`` when the file is absent.

    Raises:
        ConfigError: not JSON, no ``runs`` list, or an entry with a missing, unknown or invalid
            field (names the file, the entry and the field), or more solved than run.
    """
    if not path.exists():
        return []
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as err:
        raise ConfigError(f"{path}: not JSON ({err.msg}, line {err.lineno})") from None
    runs = data.get("runs") if isinstance(data, dict) else None
    if not isinstance(runs, list):
        raise ConfigError(f'{path}: expected an object with a "runs" list')
    out = []
    for i, entry in enumerate(runs):
        try:
            run = UnarchivedRun.model_validate(entry)
        except ValidationError as err:
            problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'entry'}: {e['msg']}" for e in err.errors())
            raise ConfigError(f"{path}: runs[{i}]: {problems}") from None
        if run.solved > run.n:
            raise ConfigError(f"{path}: runs[{i}]: solved {run.solved} > n {run.n}")
        out.append(run)
    return out


def heldout_tasks(records: Iterable[EpisodeRecord], data_dir: str | None = None) -> dict[str, frozenset[int]]:
    """The held-out indices of every dataset with fixed samples that ``records`` use without a
    ``sample`` stamp (older records); read from the dataset itself, as ``--tasks heldout`` does.

    Raises:
        DataNotFoundError: a dataset's files are not on this machine.
    """
    from stateflow.tasks.harness.registry import default_registry
    from stateflow.tasks.kit.benchmark import EnvOptions

    registry = default_registry()
    wanted = sorted({(r.benchmark, r.dataset) for r in records if r.sample is None and r.dataset in SAMPLE_SIZES})
    out: dict[str, frozenset[int]] = {}
    for benchmark, dataset in wanted:
        if dataset in out or benchmark not in registry:
            continue
        bench = registry.get(benchmark)
        env = bench.open_env(EnvOptions(dataset=dataset, backend=bench.backend_or_default(None), data_dir=data_dir))
        try:
            tasks = [env.task(i) for i in range(len(env))]
        finally:
            env.close()
        out[dataset] = frozenset(sample_of("heldout", dataset, tasks).indices)
    return out


def is_heldout(record: EpisodeRecord, heldout_tasks: Mapping[str, frozenset[int]]) -> bool:
    """Whether ``record`` ran on its dataset's held-out sample (``heldout_tasks``: dataset -> indices)."""
    if record.sample is not None:
        return record.sample == "heldout"
    return record.task in heldout_tasks.get(record.dataset, frozenset())


@dataclass(frozen=True)
class HeldoutEvaluation:
    """One recipe's held-out evaluation.

    Attributes:
        benchmark, dataset, models: the family.
        source: for a run without archived records, where its numbers are published ("" otherwise).
        method, recipe: the method and the recipe's identity digest (without repeat fields).
        first_finished: when its first held-out episode finished (ISO time).
        n, solved: held-out episodes recorded and solved.
        before: distinct recipes of the family evaluated on the held-out sample before it.
    """

    benchmark: str
    dataset: str
    models: str
    method: str
    recipe: str
    first_finished: str
    n: int
    solved: int
    before: int
    source: str = ""

    @property
    def sr(self) -> float:
        return 100.0 * self.solved / self.n

    @property
    def interval(self) -> Interval:
        return wilson_interval(self.solved, self.n)


def _recipe(r: EpisodeRecord) -> str:
    ident = r.identity or {}
    if not any(k in ident for k in REPEAT_FIELDS):
        return r.identity_digest or f"legacy:{r.method}"
    return setting_digest(ident)  # repeats of one setting are one recipe


def heldout_evaluations(
    records: Iterable[EpisodeRecord],
    heldout_tasks: Mapping[str, frozenset[int]],
    unarchived: Sequence[UnarchivedRun] = (),
) -> list[HeldoutEvaluation]:
    """Every held-out evaluation, per family in the order first run, with the distinct recipes before it.

    Args:
        records: records of any samples (newest per episode counts; the rest are ignored).
        heldout_tasks: dataset -> its held-out task indices (for records without ``sample``).
        unarchived: held-out runs without records; one naming an archived recipe's digest is an
            earlier evaluation of that recipe (listed as its own row, the recipe counted once).
    """
    by_recipe: dict[str, list[EpisodeRecord]] = defaultdict(list)
    for r in latest_records(records):
        if r.models == "oracle":  # gold replays check the harness; they evaluate no recipe
            continue
        if is_heldout(r, heldout_tasks):
            by_recipe[_recipe(r)].append(r)
    families: dict[tuple[str, str, str], list[tuple[str, str, list[EpisodeRecord]]]] = defaultdict(list)
    for recipe, rs in by_recipe.items():
        head = rs[0]
        first = min(r.finished_at for r in rs)
        families[(head.benchmark, head.dataset, head.models)].append((first, recipe, rs))
    rows: dict[tuple[str, str, str], list[HeldoutEvaluation]] = defaultdict(list)
    for (benchmark, dataset, models), runs in families.items():
        for first, recipe, rs in runs:
            solved = sum(r.success for r in rs)
            rows[(benchmark, dataset, models)].append(
                HeldoutEvaluation(benchmark, dataset, models, rs[0].method, recipe, first, len(rs), solved, 0)
            )
    for u in unarchived:
        rows[(u.benchmark, u.dataset, u.models)].append(
            HeldoutEvaluation(
                u.benchmark, u.dataset, u.models, u.method, u.recipe, u.finished, u.n, u.solved, 0, source=u.source
            )
        )
    out = []
    for family in sorted(rows):
        seen: list[str] = []
        for e in sorted(rows[family], key=lambda e: (e.first_finished, e.recipe)):
            # recipes of this family evaluated earlier, this one's own earlier runs not counted
            out.append(replace(e, before=len([r for r in seen if r != e.recipe])))
            if e.recipe not in seen:
                seen.append(e.recipe)
    return out


def _recipe_cell(e: HeldoutEvaluation) -> str:
    recipe = f"`{e.recipe[:8]}`" if ":" not in e.recipe else f"`{e.recipe}`"
    return f"{recipe} (not archived: {e.source})" if e.source else recipe


def heldout_section(evaluations: Sequence[HeldoutEvaluation], *, sources: Sequence[str], command: str) -> str:
    """The ``docs/results.md`` section (without markers): one row per held-out number."""
    lines = [
        "## Held-out numbers and how many recipes were tried on the held-out sample",
        "",
        f"Generated by `{command}` from {', '.join(f'`{s}`' for s in sources)}; edit outside the `heldout` "
        "markers. A recipe is one episode identity (flow, prompts, models, settings); *before* counts the "
        "distinct recipes of the same family (benchmark, dataset, models) whose held-out episodes began "
        "earlier. A number picked as the best of several held-out runs is optimistic by that selection: read "
        "a row with many recipes before it as a development number. Success % with its 95 % Wilson interval.",
        "",
        "| benchmark | dataset | models | method | recipe | first run (UTC) | n | success % | 95 % CI | before |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for e in evaluations:
        lines.append(
            f"| {e.benchmark} | {e.dataset} | {e.models} | `{e.method}` | {_recipe_cell(e)} | {e.first_finished[:16]} "
            f"| {e.n} | {e.sr:.1f} | {e.interval.text()} | {e.before} |"
        )
    if not evaluations:
        lines.append("| (no held-out run recorded) | | | | | | | | | |")
    return "\n".join(lines)

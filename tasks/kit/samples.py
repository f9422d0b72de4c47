"""Fixed task samples: the development sample prompts are tuned on, and a held-out sample.

Tuning prompts or flows on the tasks you report is how benchmark numbers stop meaning anything.
So the samples are fixed *before* tuning, from a seed and the dataset alone (same indices on
every machine), and they are disjoint:

* ``dev`` - what levers are measured on while developing (100 Spider-dev tasks, 50 NL2Bash);
* ``heldout`` - the same sizes, drawn from the remaining tasks; numbers reported as final come
  from here, run once the flows are frozen.

Both are stratified: Spider tasks by hardness (easy/medium/hard/extra), NL2Bash tasks by file
system (fs_1..fs_4), each stratum getting its share of the dataset (largest remainders), so a
sample's mix matches the dataset's. ``stateflow run ... --tasks dev`` (or ``heldout``) selects one.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = [
    "SAMPLE_NAMES",
    "SAMPLE_SIZES",
    "SEED",
    "STRATA",
    "TaskSample",
    "sample_indices",
    "sample_of",
    "stratified_sample",
]

#: the seed of both samples; changing it means a new development sample (document why)
SEED = "stateflow-dev-2026-11"
#: sample size per dataset (the same for ``dev`` and ``heldout``)
SAMPLE_SIZES = {"spider": 100, "nl2bash": 50}
SAMPLE_NAMES = ("dev", "heldout")
#: the task attribute each dataset is stratified by
STRATA = {"spider": "hardness", "nl2bash": "context"}


@dataclass(frozen=True)
class TaskSample:
    """A named, fixed set of task indices of one dataset."""

    name: str
    dataset: str
    indices: tuple[int, ...]


def stratified_sample(labels: Sequence[str], n: int, seed: str, exclude: frozenset[int] = frozenset()) -> list[int]:
    """``n`` indices of ``labels`` (task index -> stratum), each stratum in proportion to its size.

    Shares are computed over all tasks (not only the ones left after ``exclude``), rounded by the
    largest remainder (ties broken by stratum name), and filled at random within each stratum
    with an RNG seeded by ``seed`` and the stratum, so adding a stratum does not reshuffle others.
    The result is sorted.

    Raises:
        ValueError: ``n`` is larger than the tasks available, or a stratum has too few left.
    """
    available = len(labels) - len(exclude)
    if not 0 <= n <= available:
        raise ValueError(f"cannot sample {n} of {available} tasks")
    strata: dict[str, list[int]] = {}
    for index, label in enumerate(labels):
        strata.setdefault(label, []).append(index)
    exact = {label: n * len(members) / len(labels) for label, members in strata.items()}
    quota = {label: int(share) for label, share in exact.items()}
    by_remainder = sorted(strata, key=lambda label: (-(exact[label] - quota[label]), label))
    for label in by_remainder[: n - sum(quota.values())]:
        quota[label] += 1
    chosen: list[int] = []
    for label in sorted(strata):
        pool = [i for i in strata[label] if i not in exclude]
        if quota[label] > len(pool):
            raise ValueError(f"stratum {label!r} has {len(pool)} tasks left, {quota[label]} wanted")
        chosen += random.Random(f"{seed}/{label}").sample(pool, quota[label])
    return sorted(chosen)


def sample_indices(name: str, dataset: str, labels: Sequence[str]) -> TaskSample:
    """The ``dev`` or ``heldout`` sample of ``dataset`` ("spider" or "nl2bash").

    ``labels`` is the stratum of every task of the dataset, in index order (Spider: hardness,
    NL2Bash: file system); the caller reads them from the loaded dataset, so this module needs
    no data access.

    Raises:
        ValueError: unknown sample or dataset.
    """
    if name not in SAMPLE_NAMES:
        raise ValueError(f"unknown task sample {name!r}; use one of {', '.join(SAMPLE_NAMES)}")
    if dataset not in SAMPLE_SIZES:
        raise ValueError(f"no fixed samples for dataset {dataset!r}; they exist for {', '.join(SAMPLE_SIZES)}")
    n = SAMPLE_SIZES[dataset]
    dev = stratified_sample(labels, n, f"{SEED}/{dataset}/dev")
    if name == "dev":
        return TaskSample(name, dataset, tuple(dev))
    held = stratified_sample(labels, n, f"{SEED}/{dataset}/heldout", exclude=frozenset(dev))
    return TaskSample(name, dataset, tuple(held))


def sample_of(name: str, dataset: str, tasks: Sequence[object]) -> TaskSample:
    """The ``dev`` or ``heldout`` sample of a loaded dataset (its tasks in index order).

    Raises:
        ValueError: unknown sample or dataset, or a task without the stratum attribute.
    """
    if dataset not in STRATA:
        raise ValueError(f"no fixed samples for dataset {dataset!r}; they exist for {', '.join(SAMPLE_SIZES)}")
    attribute = STRATA[dataset]
    labels = [getattr(t, attribute, None) for t in tasks]
    missing = [i for i, label in enumerate(labels) if not label]
    if missing:
        raise ValueError(f"dataset {dataset!r}: task {missing[0]} has no {attribute} to stratify by")
    return sample_indices(name, dataset, [str(label) for label in labels])

"""The fixed development and held-out samples: deterministic, stratified, disjoint."""

from __future__ import annotations

import random
from collections import Counter

import pytest
from hypothesis import given
from hypothesis import strategies as st
from stateflow.tasks.kit.samples import SAMPLE_SIZES, sample_indices, sample_of, stratified_sample
from stateflow.tasks.sql.benchmark import INTERCODE_SQL

labels_strategy = st.lists(st.sampled_from(["a", "b", "c", "d"]), min_size=1, max_size=300)


@given(labels_strategy, st.data())
def test_each_stratum_gets_its_share_within_one(labels: list[str], data: st.DataObject) -> None:
    n = data.draw(st.integers(0, len(labels)))
    chosen = stratified_sample(labels, n, "s")
    assert len(chosen) == n == len(set(chosen))
    assert chosen == sorted(chosen)
    counts = Counter(labels[i] for i in chosen)
    for label, size in Counter(labels).items():
        assert abs(counts[label] - n * size / len(labels)) < 1


def test_same_seed_same_sample_other_seed_other_sample() -> None:
    labels = [random.Random(1).choice("xyz") for _ in range(500)]
    assert stratified_sample(labels, 50, "one") == stratified_sample(labels, 50, "one")
    assert stratified_sample(labels, 50, "one") != stratified_sample(labels, 50, "two")


def test_largest_remainder_breaks_the_rounding() -> None:
    # shares 2.5 / 2.5 / 5.0 of n=10 over 4/4/8 tasks would round to 2+2+5 = 9
    labels = ["a"] * 4 + ["b"] * 4 + ["c"] * 8
    counts = Counter(labels[i] for i in stratified_sample(labels, 10, "s"))
    assert sum(counts.values()) == 10 and counts["c"] == 5 and {counts["a"], counts["b"]} == {2, 3}


def test_excluded_tasks_are_never_chosen_and_too_many_is_an_error() -> None:
    labels = ["a"] * 10 + ["b"] * 10
    first = stratified_sample(labels, 10, "s")
    second = stratified_sample(labels, 10, "t", exclude=frozenset(first))
    assert not set(first) & set(second) and len(first) + len(second) == 20
    with pytest.raises(ValueError, match="cannot sample 11 of 10"):
        stratified_sample(labels, 11, "s", exclude=frozenset(first))


def test_unknown_names_are_refused() -> None:
    with pytest.raises(ValueError, match="unknown task sample 'test'"):
        sample_indices("test", "spider", ["easy"] * 200)
    with pytest.raises(ValueError, match="no fixed samples for dataset 'demo'"):
        sample_indices("dev", "demo", ["easy"] * 200)


@pytest.mark.shared_data
def test_the_real_samples_match_the_datasets_mix() -> None:
    from stateflow.envs.bash.tasks import load_bash_dataset
    from stateflow.envs.sql.tasks import resolve_dataset

    spider = [t.hardness for t in resolve_dataset("spider").tasks]
    nl2bash = [t.context for t in load_bash_dataset("nl2bash").tasks]
    for dataset, labels in (("spider", spider), ("nl2bash", nl2bash)):
        dev = sample_indices("dev", dataset, labels).indices
        held = sample_indices("heldout", dataset, labels).indices
        assert len(dev) == len(held) == SAMPLE_SIZES[dataset]
        assert not set(dev) & set(held)
        assert dev == sample_indices("dev", dataset, labels).indices
    dev_mix = Counter(spider[i] for i in sample_indices("dev", "spider", spider).indices)
    assert dev_mix == {"easy": 24, "medium": 43, "hard": 17, "extra": 16}
    bash_mix = Counter(nl2bash[i] for i in sample_indices("dev", "nl2bash", nl2bash).indices)
    assert bash_mix == {"fs_1": 15, "fs_3": 15, "fs_2": 13, "fs_4": 7}


def test_sample_of_reads_each_datasets_stratum_attribute() -> None:
    from stateflow.envs.base import Task

    spider = [Task(i, "q", "g", "db", hardness=("easy", "hard")[i % 2]) for i in range(400)]
    assert (
        sample_of("dev", "spider", spider).indices
        == sample_indices("dev", "spider", [t.hardness for t in spider]).indices
    )
    bash = [Task(i, "q", "g", f"fs_{1 + i % 4}") for i in range(200)]
    assert sample_of("heldout", "nl2bash", bash) == sample_indices("heldout", "nl2bash", [t.context for t in bash])
    with pytest.raises(ValueError, match="task 0 has no hardness"):
        sample_of("dev", "spider", [Task(0, "q", "g", "db"), *spider])
    with pytest.raises(ValueError, match="no fixed samples for dataset 'demo'"):
        sample_of("dev", "demo", spider)


def test_the_runner_refuses_a_fixed_sample_of_a_dataset_without_one(tmp_path, sql_available) -> None:
    from stateflow.tasks.harness.runner import RunSpec, evaluate

    from stateflow import ModelAssignment

    spec = RunSpec(
        INTERCODE_SQL,
        ("stateflow",),
        models=ModelAssignment.of("local"),
        models_label="x",
        oracle=True,
        out=tmp_path / "out",
        tasks="dev",
    )
    with pytest.raises(ValueError, match="no fixed samples for dataset 'demo'"):
        evaluate(spec, progress=False)
    assert not (tmp_path / "out").exists()


@pytest.mark.shared_data
def test_the_runner_runs_exactly_the_dev_sample(tmp_path, sql_available) -> None:
    from stateflow.envs.sql.tasks import resolve_dataset
    from stateflow.tasks.harness.runner import RunSpec, evaluate

    from stateflow import ModelAssignment

    spec = RunSpec(
        INTERCODE_SQL,
        ("stateflow",),
        models=ModelAssignment.of("local"),
        models_label="x",
        oracle=True,
        out=tmp_path / "out",
        dataset="spider",
        tasks="heldout",
        workers=2,
    )
    summary = evaluate(spec, progress=False)
    expected = sample_of("heldout", "spider", resolve_dataset("spider").tasks).indices
    assert sorted(r.task for r in summary.records) == list(expected)

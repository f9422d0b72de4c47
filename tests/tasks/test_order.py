"""The order a run's episodes start in (tasks/harness/order.py), and the runner keeping it on resume."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from stateflow.tasks.harness.executors import ThreadExecutor
from stateflow.tasks.harness.order import RUN_ORDERS, episode_order
from stateflow.tasks.harness.runner import RunSpec, evaluate
from stateflow.tasks.sql.benchmark import INTERCODE_SQL

from stateflow import ModelAssignment

ORACLE_SPEC = {"models": ModelAssignment.of("local"), "models_label": "default=local", "oracle": True}

_tasks = st.lists(st.tuples(st.integers(0, 60), st.sampled_from(["a", "b", "c", None])), max_size=25).map(
    lambda ts: list({i: (i, c) for i, c in ts}.values())  # distinct indices, as select_tasks gives
)
_methods = st.lists(st.sampled_from(["m1", "m2", "m3"]), min_size=1, max_size=3, unique=True)


@given(_methods, _tasks, st.sampled_from(RUN_ORDERS))
def test_every_order_runs_each_episode_exactly_once(methods, tasks, order):
    pairs = episode_order(methods, tasks, order)
    assert sorted(pairs) == sorted((m, i) for m in methods for i, _ in tasks)


@given(_methods, _tasks)
def test_context_order_runs_each_context_as_one_block_and_keeps_the_selection_order_inside(methods, tasks):
    context = dict(tasks)
    pairs = episode_order(methods, tasks, "context")
    blocks = [context[i] for _, i in pairs]
    # a context never comes back once another one started: its episodes are contiguous
    seen: list[Any] = []
    for c in blocks:
        if not seen or seen[-1] != c:
            assert c not in seen
            seen.append(c)
    first = list(dict.fromkeys(c for _, c in tasks))
    assert seen == first  # blocks in the order their first task was selected
    for m in methods:  # each method meets a context's tasks in selection order
        for c in first:
            assert [i for mm, i in pairs if mm == m and context[i] == c] == [i for i, cc in tasks if cc == c]


def test_context_order_keeps_a_methods_tasks_of_one_context_together():
    tasks = [(0, "x"), (1, "y"), (2, "x"), (3, "y"), (4, "z")]
    assert episode_order(("a", "b"), tasks, "context") == [
        ("a", 0), ("a", 2), ("b", 0), ("b", 2), ("a", 1), ("a", 3), ("b", 1), ("b", 3), ("a", 4), ("b", 4),
    ]  # fmt: skip


def test_unknown_order_and_repeated_task_are_errors():
    with pytest.raises(ValueError, match="order 'random' is not one of method, task, context"):
        episode_order(("a",), [(0, "x")], "random")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="selected twice"):
        episode_order(("a",), [(0, "x"), (0, "x")], "context")


class _StopsAfter(ThreadExecutor):
    """A thread executor that stops scheduling after ``limit`` finished episodes (a Ctrl-C)."""

    def __init__(self, limit: int) -> Callable[[int, Callable[[], Any]], ThreadExecutor]:  # type: ignore[misc]
        self.limit = limit

    def __call__(self, workers: int, make_env: Callable[[], Any]) -> ThreadExecutor:
        limit = self.limit
        inner = ThreadExecutor(workers, make_env)
        original = inner.run

        def run(jobs, work, on_interrupt=None):
            for n, record in enumerate(original(jobs, work, on_interrupt), 1):
                if n == limit:  # as the first Ctrl-C does: no new episode, the run says it stopped
                    inner.stop()
                    inner.interrupted = True
                yield record

        inner.run = run  # type: ignore[method-assign]
        return inner


def test_a_run_in_context_order_groups_databases_and_its_resumed_run_keeps_the_order(tmp_path, sql_available):
    # demo tasks 0-9 are on `library`, 10-14 on `weather`, 15-19 on `bakery`
    spec = RunSpec(INTERCODE_SQL, ("stateflow", "sf_agent"), out=tmp_path, tasks="12,0,15,1,13", order="context",
                   **ORACLE_SPEC)  # fmt: skip
    expected = [
        ("stateflow", 12), ("stateflow", 13), ("sf_agent", 12), ("sf_agent", 13),
        ("stateflow", 0), ("stateflow", 1), ("sf_agent", 0), ("sf_agent", 1),
        ("stateflow", 15), ("sf_agent", 15),
    ]  # fmt: skip
    first = evaluate(spec, progress=False, executor_factory=_StopsAfter(3))
    assert first.interrupted and first.finished == 3
    second = evaluate(spec, progress=False)  # the same command: resume
    assert (second.skipped, second.finished) == (3, 7)
    lines = (tmp_path / "results.jsonl").read_text().splitlines()
    ran = [(r["method"], r["task"]) for r in map(json.loads, lines)]
    assert ran == expected  # the interrupted run's three, then the rest in the order the first run had
    assert [r["context"] for r in map(json.loads, lines)][:4] == ["weather"] * 4
    assert json.loads((tmp_path / "run.json").read_text())["order"] == "context"


def test_the_cli_runs_in_context_order(tmp_path, sql_available):
    from tests.core.test_cli import sf

    out = tmp_path / "run"
    args = ["run", "intercode-sql", "--policy", "oracle", "--method", "stateflow", "--tasks", "15,0,12,1"]
    p = sf(*args, "--order", "context", "--out", str(out), "--no-progress")
    assert p.returncode == 0, p.stderr
    ran = [json.loads(line)["task"] for line in (out / "results.jsonl").read_text().splitlines()]
    assert ran == [15, 0, 1, 12]  # bakery, then library (0 and 1), then weather

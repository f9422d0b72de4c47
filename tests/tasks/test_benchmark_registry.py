"""Benchmarks are objects in a registry: adding one is an environment plus one record.

The counting benchmark below is defined entirely in this file (its environment, its flow, its
prompts folder and its :class:`Benchmark` record) and evaluated end to end by the real runner
with a scripted model: records, resume and the metrics table work with no change to the runner.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest
from stateflow.envs.base import Task
from stateflow.tasks.agents.methods import build_method, resolve_method
from stateflow.tasks.bash.benchmark import INTERCODE_BASH
from stateflow.tasks.harness.registry import BUILTIN_BENCHMARKS, BenchmarkRegistry, default_registry
from stateflow.tasks.harness.runner import RunSpec, evaluate, run_identities
from stateflow.tasks.kit.benchmark import Benchmark, EnvOptions, Method
from stateflow.tasks.kit.tools import ObservationFormat, env_done, execute
from stateflow.tasks.reports.metrics import summarize
from stateflow.tasks.sql.benchmark import INTERCODE_SQL

from stateflow import ANY, LLM, Flow, ModelAssignment, ModelProfile, State, StateFlowView, Transition
from stateflow.backends.scripted import ScriptedLLM
from stateflow.errors import ConfigError


class CountingEnv:
    """Task ``i``: "how many letters in WORD?"; ``execute[len WORD]`` shows the count; ``submit``
    pays 1 when the last observation is the right count."""

    WORDS = ("a", "bb", "ccc", "dddd")

    def __init__(self) -> None:
        self.index = -1
        self.last: Any = None
        self.closed = False

    def __len__(self) -> int:
        return len(self.WORDS)

    def task(self, index: int) -> Task:
        word = self.WORDS[index]
        return Task(index, f"how many letters in {word}?", f"len {word}", "letters")

    def reset(self, index: int) -> tuple[Any, dict[str, Any]]:
        self.index, self.last = index, None
        return self.task(index).query, {}

    def step(self, action: str) -> tuple[Any, float, bool, dict[str, Any]]:
        if action.strip() == "submit":
            right = self.last == len(self.WORDS[self.index])
            return "submitted", float(right), True, {"action_executed": True}
        command = action.strip()
        if not command.startswith("len "):
            return f"unknown command {command!r}", 0.0, False, {"action_executed": False}
        self.last = len(command.removeprefix("len ").strip())
        return self.last, 0.0, False, {"action_executed": True}

    def close(self) -> None:
        self.closed = True


def _count_flow(grammar: bool) -> Flow:
    act = State("Count", LLM(), execute(fmt=ObservationFormat()), description="run len, then submit")
    end = State("End", final=True)
    return Flow("counting", initial=act, transitions=[Transition(ANY, end, when=env_done), Transition(act, act)])


def counting_benchmark(prompts_dir: Path) -> Benchmark:
    """The whole of the new benchmark's registration: one record."""
    return Benchmark(
        name="counting",
        domain="count",
        open_env=lambda options: CountingEnv(),
        task_prompt=lambda task: f"Count: {task.query}",
        observation=ObservationFormat(),
        methods={"count": Method("count", _count_flow, StateFlowView, "count letters")},
        prompts_dir=prompts_dir,
        default_backend="memory",
        backends=("memory",),
        flows={"counting": lambda: _count_flow(False)},
    )


def _counter(messages: list[dict[str, Any]], params: dict[str, Any]) -> str:
    """Reads the task from the first message, runs the gold command, then submits."""
    ran = any(m.get("name") == "environment" for m in messages)
    if ran:
        return "Thought: counted.\nAction: submit"
    task = next(str(m["content"]) for m in messages if str(m.get("content") or "").startswith("Count: "))
    word = task.split("letters in ", 1)[1].rstrip("?")
    return f"Thought: count it.\nAction: execute[len {word}]"


@pytest.fixture
def counting(tmp_path: Path) -> Benchmark:
    prompts = tmp_path / "prompts"
    prompts.mkdir()
    (prompts / "count.md").write_text("Count the letters.\n")
    return counting_benchmark(prompts)


def test_a_benchmark_defined_in_a_test_runs_end_to_end_and_resumes(tmp_path: Path, counting: Benchmark) -> None:
    profile = ModelProfile(name="counter", model="c", provider="scripted", api_key_env=None)
    spec = RunSpec(
        counting,
        ("count",),
        models=ModelAssignment.of(profile),
        models_label="default=counter",
        out=tmp_path / "out",
        scripts={"counter": ScriptedLLM(_counter)},
    )
    first = evaluate(spec, progress=False)
    assert (first.planned, first.finished) == (4, 4)
    assert sorted((r["benchmark"], r["task"], r["success"]) for r in first.records) == [
        ("counting", i, True) for i in range(4)
    ]
    assert {r["path"][-1] for r in first.records} == {"End"}
    assert {r["identity"]["backend"] for r in first.records} == {"memory"}  # the benchmark's default
    assert {r["identity"]["database_scope"] for r in first.records} == {None}
    [row] = summarize(first.records)
    assert (row.n, row.sr, row.turns) == (4, 100.0, 1.0)
    again = evaluate(spec, progress=False)
    assert (again.skipped, again.finished) == (4, 0)


def test_registry_adds_without_changing_the_default_and_rejects_duplicates(counting: Benchmark) -> None:
    base = default_registry()
    grown = base.with_benchmark(counting)
    assert grown.get("counting") is counting
    assert "counting" not in base  # immutable: the default registry is untouched
    assert base.names()[:3] == ("intercode-sql", "intercode-bash", "pdoctor")
    with pytest.raises(ConfigError, match="registered twice"):
        grown.with_benchmark(dataclasses.replace(counting, description="again"))
    with pytest.raises(ValueError, match="unknown benchmark 'nope'; choose intercode-sql, intercode-bash, pdoctor"):
        base.get("nope")
    # the runner takes the Benchmark object and looks nothing up by name
    with pytest.raises(TypeError, match=r"the Benchmark object, not 'intercode-sql' \(by name: .*default_registry"):
        RunSpec("intercode-sql", ("stateflow",), ModelAssignment.of("local"), "x", Path("x"))  # type: ignore[arg-type]


def test_benchmarks_answer_what_the_domain_strings_used_to() -> None:
    sql, bash = INTERCODE_SQL, INTERCODE_BASH
    task = Task(0, "How many books?", "SELECT 1", "library")
    assert (sql.task_prompt(task), bash.task_prompt(task)) == ("Question: How many books?", "Task: How many books?")
    assert (sql.observation.full_schema, bash.observation.full_schema) == (True, False)
    assert (sql.default_backend, bash.default_backend) == ("embedded", "sandbox")
    assert (sql.database_scope, bash.database_scope) == (True, False)
    assert "stateflow_no_verify" in sql.methods and "stateflow_no_verify" not in bash.methods
    assert build_method("react", sql)[0].name == "sql-react"  # flow names (and identities) as before
    with pytest.raises(
        ValueError, match="unknown method 'stateflow_schema' for intercode-bash; choose from: stateflow"
    ):
        bash.method("stateflow_schema")
    with pytest.raises(ValueError, match="intercode-bash has no backend 'embedded'; choose from: sandbox, docker"):
        bash.backend_or_default("embedded")
    assert [b.name for b in BUILTIN_BENCHMARKS] == ["intercode-sql", "intercode-bash", "pdoctor"]


def test_a_method_may_be_a_users_flow_given_as_module_attribute(tmp_path: Path, monkeypatch) -> None:
    (tmp_path / "user_flows_regtest.py").write_text(
        "from stateflow import ANY, LLM, Flow, State, Transition\n"
        "from stateflow.tasks.kit.tools import env_done, execute\n"
        "act = State('Act', LLM(), execute())\n"
        "ONE_SHOT = Flow('one-shot', initial=act, transitions=[\n"
        "    Transition(ANY, State('End', final=True), when=env_done), Transition(act, act)])\n"
    )
    monkeypatch.chdir(tmp_path)
    method = resolve_method(INTERCODE_BASH, "user_flows_regtest:ONE_SHOT")
    assert method.name == "user_flows_regtest:ONE_SHOT" and method.build(False).name == "one-shot"
    spec = RunSpec(INTERCODE_BASH, ("user_flows_regtest:ONE_SHOT",), ModelAssignment.of("local"), "x", tmp_path)
    [identity] = run_identities(spec, "0" * 64).values()
    assert (identity.method, identity.flow) == ("user_flows_regtest:ONE_SHOT", "one-shot")
    with pytest.raises(ConfigError, match="has no attribute 'MISSING'"):
        resolve_method(INTERCODE_BASH, "user_flows_regtest:MISSING")
    with pytest.raises(ValueError, match="unknown method 'no_such'"):
        resolve_method(INTERCODE_BASH, "no_such")


def test_registry_type_is_immutable() -> None:
    registry = BenchmarkRegistry((INTERCODE_SQL,))
    with pytest.raises(dataclasses.FrozenInstanceError):
        registry.benchmarks = ()  # type: ignore[misc]
    assert EnvOptions("demo", "embedded").database_scope == "benchmark"

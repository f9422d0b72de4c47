"""The record archive: compact records kept with the docs, read back as recorded episodes.

The runs use the real runner, flows and AutoGen with a scripted model on the in-memory
environment (tests/tasks/fakes.py).
"""

from __future__ import annotations

import io
import json
import multiprocessing
import os
import threading
from dataclasses import replace

from rich.console import Console
from stateflow.tasks.bash.benchmark import INTERCODE_BASH
from stateflow.tasks.harness.archive import RecordArchive, compact
from stateflow.tasks.harness.paper import PaperModel, PaperRun, paper_benchmarks, run_paper
from stateflow.tasks.harness.runner import RunSpec, evaluate
from stateflow.tasks.kit.episode_record import EpisodeRecord
from stateflow.tasks.reports.paper_report import method_cells

from stateflow import ModelAssignment, ModelProfile
from stateflow.backends.scripted import ScriptedLLM
from tests.tasks.fakes import FakeEnv


def _record(task: int, *, method: str = "react", digest: str = "d1", reward: float = 1.0) -> EpisodeRecord:
    return EpisodeRecord(
        benchmark="intercode-bash",
        method=method,
        models="default=m",
        task=task,
        status="ok",
        success=reward == 1.0,
        reward_raw=reward,
        reward=reward,
        turns=2,
        failed_actions=0,
        prompt_tokens=120,
        completion_tokens=30,
        usage_by_state={"Solve": {"prompt_tokens": 120, "completion_tokens": 30}},
        history=[{"role": "user", "content": "x" * 5000}],
        transitions=[{"from": "Init", "to": "Solve"}],
        eval={"observation": "y" * 1000},
        identity={"method": method},
        identity_digest=digest,
        last_action="SELECT count(*) FROM t",
    )


def test_compact_drops_only_the_trace():
    r = _record(3)
    small = compact(r)
    assert (small.history, small.transitions, small.eval) == ([], [], {})
    assert small.last_action == "SELECT count(*) FROM t"  # a failure stays readable without the trace
    kept = {k: v for k, v in r.to_dict().items() if k not in ("history", "transitions", "eval")}
    assert {k: v for k, v in small.to_dict().items() if k not in ("history", "transitions", "eval")} == kept
    assert len(json.dumps(small.to_dict())) < len(json.dumps(r.to_dict())) / 4


def test_merge_replaces_by_key_keeps_the_rest_sorted_and_leaves_no_temporary_file(tmp_path):
    archive = RecordArchive(tmp_path / "a" / "bash" / "m.jsonl")
    assert archive.load() == []
    assert archive.merge([_record(2), _record(0, method="stateflow"), _record(1)]) == 3
    assert [(r.method, r.task) for r in archive.load()] == [("react", 1), ("react", 2), ("stateflow", 0)]
    lines = archive.path.read_text().splitlines()
    assert [json.loads(line)["task"] for line in lines] == [1, 2, 0]  # sorted by method, then task
    stamp = archive.path.stat().st_mtime_ns
    assert archive.merge([_record(1)]) == 0  # the same episode again: nothing to write
    assert archive.path.stat().st_mtime_ns == stamp
    assert archive.merge([_record(1, reward=0.5)]) == 1  # a newer record of that episode replaces it
    by_task = {(r.method, r.task): r.reward_raw for r in archive.load()}
    assert by_task == {("react", 1): 0.5, ("react", 2): 1.0, ("stateflow", 0): 1.0}
    assert archive.merge([_record(1, digest="other")]) == 1  # another identity: kept beside it
    assert len(archive.load()) == 4
    assert os.listdir(archive.path.parent) == ["m.jsonl"]
    assert archive.path.stat().st_mode & 0o777 == 0o644  # readable like any file of the checkout


def test_a_merge_waits_for_the_archive_lock_and_then_keeps_both_writers_records(tmp_path):
    archive = RecordArchive(tmp_path / "bash" / "m.jsonl")
    archive.merge([_record(0)])
    with archive.locked():  # another writer is between its read and its write
        other = threading.Thread(target=archive.merge, args=([_record(1)],))
        other.start()
        other.join(timeout=0.5)
        assert other.is_alive()  # the merge waits instead of reading the archive under the writer
        archive._write([*archive.load(), compact(_record(2))])  # the holder's own write
    other.join(timeout=10)
    assert not other.is_alive()
    assert [r.task for r in archive.load()] == [0, 1, 2]  # the waiting merge read the holder's write


def _merge_one_by_one(path: str, method: str) -> None:
    archive = RecordArchive(path)
    for task in range(25):
        archive.merge([_record(task, method=method, digest=method)])


def test_two_processes_merging_into_one_archive_lose_no_record(tmp_path):
    path = str(tmp_path / "bash" / "m.jsonl")
    ctx = multiprocessing.get_context("spawn")
    writers = [ctx.Process(target=_merge_one_by_one, args=(path, m)) for m in ("react", "stateflow")]
    for w in writers:
        w.start()
    for w in writers:
        w.join(timeout=120)
        assert w.exitcode == 0
    assert len(RecordArchive(path).load()) == 50


def _profile(name: str = "m") -> ModelProfile:
    return ModelProfile(name=name, model=name, provider="scripted", api_key_env=None)


def _spec(out, archive, **kw) -> RunSpec:
    script = ScriptedLLM(["Thought: done.\nAction: submit"], cycle=True)
    base = RunSpec(
        INTERCODE_BASH,
        ("react",),
        models=ModelAssignment.of(_profile()),
        models_label="default=m",
        out=out,
        dataset="demo",
        tasks="0:3",
        archive=archive,
        scripts={"m": script},
    )
    return replace(base, **kw)


def test_archived_episodes_of_the_same_settings_count_as_recorded_in_a_fresh_directory(tmp_path):
    archive = tmp_path / "archive.jsonl"
    first = evaluate(_spec(tmp_path / "one", None), env_factory=lambda s: FakeEnv(n=3), progress=False)
    assert first.finished == 3
    RecordArchive(archive).merge(first.records)

    buf = io.StringIO()
    spec = _spec(tmp_path / "two", archive, tasks="0:3")
    again = evaluate(spec, console=Console(file=buf), env_factory=lambda s: FakeEnv(n=3), progress=False)
    assert (again.finished, again.skipped) == (0, 3)
    assert spec.scripts["m"].requests == []  # no model call: every episode came from the archive
    rewards = sorted((r.task, r.reward_raw) for r in first.records)
    assert sorted((r.task, r.reward_raw) for r in again.records) == rewards
    assert "resumed 3 episode(s) from the archive" in buf.getvalue()
    copied = [json.loads(line) for line in (tmp_path / "two" / "results.jsonl").read_text().splitlines()]
    assert sorted(c["task"] for c in copied) == [0, 1, 2] and all(c["history"] == [] for c in copied)

    # Other settings (another turn limit is another identity) never take an archived record.
    other = evaluate(
        _spec(tmp_path / "three", archive, max_turns=4), env_factory=lambda s: FakeEnv(n=3), progress=False
    )
    assert (other.finished, other.skipped) == (3, 0)


def test_report_only_reads_the_archive_and_creates_nothing(tmp_path):
    archive = tmp_path / "archive.jsonl"
    first = evaluate(_spec(tmp_path / "one", None, tasks="0:2"), env_factory=lambda s: FakeEnv(n=3), progress=False)
    RecordArchive(archive).merge(first.records)
    report = evaluate(
        _spec(tmp_path / "none", archive, run_missing=False), env_factory=lambda s: FakeEnv(n=3), progress=False
    )
    assert (report.planned, report.skipped, report.finished) == (3, 2, 0)
    assert sorted(r.task for r in report.records) == [0, 1]
    assert not (tmp_path / "none").exists()


def _model(name: str) -> PaperModel:
    script = ScriptedLLM(["Thought: done.\nAction: submit"], cycle=True)
    return PaperModel(name, ModelAssignment.of(_profile(name)), f"default={name}", scripts={name: script})


def test_the_paper_comparison_archives_its_records_and_a_fresh_clone_rebuilds_the_same_table(tmp_path):
    benches, _ = paper_benchmarks(["intercode-bash"], ["react", "stateflow"], {"intercode-bash": "demo"})
    quiet = {"console": Console(file=io.StringIO()), "progress": False, "env_factory": lambda s: FakeEnv(n=3)}
    run = PaperRun(benches, (_model("m-a"),), tmp_path / "runs", tasks="0:3", archive=tmp_path / "docs" / "data")
    ran, _ = run_paper(run, **quiet)
    path = tmp_path / "docs" / "data" / "intercode-bash" / "m-a.jsonl"
    assert path.exists() and len(RecordArchive(path).load()) == 6

    # Another machine: no results directory, only the archive.
    model = _model("m-a")
    rebuilt, _ = run_paper(replace(run, out=tmp_path / "clone", models=(model,), run_missing=False), **quiet)
    assert rebuilt[0].status == "complete" and model.scripts["m-a"].requests == []
    assert method_cells(rebuilt[0]) == method_cells(ran[0])
    resumed, _ = run_paper(replace(run, out=tmp_path / "clone", models=(model,), tasks="0:3"), **quiet)
    assert (resumed[0].ran, resumed[0].skipped) == (0, 6) and model.scripts["m-a"].requests == []

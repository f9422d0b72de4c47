"""Episode identity, resume, mixed settings, --retry-errors and validation, on an in-memory env.

These run the real runner, flows and AutoGen with the gold-replay oracle or scripted models;
only the environment is a double (tests/tasks/fakes.py), so they need no MariaDB or sandbox.
"""

from __future__ import annotations

import dataclasses
import io
import json
import shutil
from pathlib import Path

import pytest
from rich.console import Console
from stateflow.tasks.bash.benchmark import INTERCODE_BASH
from stateflow.tasks.harness.identity import EpisodeIdentity
from stateflow.tasks.harness.records import ResultsFile
from stateflow.tasks.harness.runner import MixedSettingsError, RunSpec, evaluate
from stateflow.tasks.kit.episode_record import EpisodeRecord
from stateflow.tasks.kit.prompts import PROMPTS_DIR
from stateflow.tasks.reports.metrics import load_results, summarize
from stateflow.tasks.sql.benchmark import INTERCODE_SQL

from stateflow import ModelAssignment, ModelProfile
from stateflow.backends.scripted import ScriptedLLM
from tests.tasks.fakes import FakeEnv

_SCORED = {"success": True, "reward_raw": 1.0, "turns": 1, "failed_actions": 0}  # what every record has
ORACLE = {"models": ModelAssignment.of("local"), "models_label": "default=local", "oracle": True}


def _spec(out: Path, **kw) -> RunSpec:
    return RunSpec(
        **({"benchmark": INTERCODE_BASH, "methods": ("stateflow",), "out": out, "tasks": "0:3"} | ORACLE | kw)
    )


def _run(spec: RunSpec, console: Console | None = None, **env_kw):
    return evaluate(spec, progress=False, console=console, env_factory=lambda s: FakeEnv(**env_kw))


def _console() -> tuple[Console, io.StringIO]:
    buf = io.StringIO()
    return Console(file=buf, width=300), buf


def _lines(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]


def test_every_record_carries_its_identity_and_digest(tmp_path):
    s = _run(_spec(tmp_path))
    (ident,) = s.identities.values()
    for r in _lines(tmp_path):
        assert r["identity"] == ident.to_dict() and r["identity_digest"] == ident.digest
        assert EpisodeIdentity(**r["identity"]).digest == r["identity_digest"]
    assert ident.policy == "oracle" and ident.max_turns == 10 and ident.backend == "sandbox"
    assert ident.dataset == "demo" and len(ident.dataset_sha256) == len(ident.flow_sha256) == 64
    run_json = json.loads((tmp_path / "run.json").read_text())
    assert run_json["identities"] == {"stateflow": ident.digest}


def test_dataset_hash_follows_the_task_contents(tmp_path):
    a = _run(_spec(tmp_path / "a")).identities["stateflow"]
    b = _run(_spec(tmp_path / "b"), queries={4: "another question"}).identities["stateflow"]
    assert a.dataset_sha256 != b.dataset_sha256 and a.digest != b.digest
    assert dataclasses.replace(b, dataset_sha256=a.dataset_sha256) == a  # nothing else differs


def test_same_settings_resume_reuses_every_record(tmp_path):
    assert _run(_spec(tmp_path)).finished == 3
    again = _run(_spec(tmp_path, tasks="0:5"))
    assert (again.skipped, again.finished) == (3, 2)
    assert sorted(r["task"] for r in _lines(tmp_path)) == [0, 1, 2, 3, 4]


@pytest.mark.parametrize(
    ("change", "env_kw", "field"),
    [
        ({"max_turns": 4}, {}, "max_turns"),
        ({"grammar": True}, {}, "grammar"),
        ({"dataset": "nl2bash"}, {}, "dataset"),
        ({"backend": "docker"}, {}, "backend"),
        ({}, {"queries": {1: "edited task"}}, "dataset_sha256"),
        (
            {
                "oracle": False,
                "models": ModelAssignment.of(ModelProfile(name="s", model="s", provider="scripted", api_key_env=None)),
                "models_label": "default=s",
                "scripts": {"s": ScriptedLLM(["Action: submit"], cycle=True)},
            },
            {},
            "policy",
        ),
    ],
)
def test_other_settings_are_refused_then_added_only_when_asked(tmp_path, change, env_kw, field):
    _run(_spec(tmp_path))
    before = (tmp_path / "results.jsonl").read_bytes()
    with pytest.raises(MixedSettingsError) as info:
        _run(_spec(tmp_path, **change), **env_kw)
    err = info.value
    assert field in {d.field for d in err.differences} and err.count == 3
    assert f"{field}:" in str(err) and "--mix-settings" in str(err)
    assert (tmp_path / "results.jsonl").read_bytes() == before  # nothing written, nothing lost

    added = _run(_spec(tmp_path, mix_settings=True, **change), **env_kw)
    assert (added.skipped, added.finished) == (0, 3) and len(added.records) == 3
    rows = summarize(load_results([str(tmp_path)]))
    assert sum(r.n for r in rows) == 6 and len(rows) == 2
    if rows[0].group == rows[1].group:  # one group, two settings: the label names what differs
        assert all(field in r.setting for r in rows) and rows[0].setting != rows[1].setting
    else:  # the models column already tells them apart (the oracle is labelled "oracle")
        assert {r.group[2] for r in rows} == {"oracle", "default=s"}


def test_another_method_with_the_same_settings_joins_without_asking(tmp_path):
    _run(_spec(tmp_path))
    s = _run(_spec(tmp_path, methods=("stateflow", "sf_agent")))
    assert (s.skipped, s.finished) == (3, 3)
    assert [r.setting for r in summarize(load_results([str(tmp_path)]))] == ["", ""]


def test_edited_prompt_files_change_the_identity(tmp_path):
    _run(_spec(tmp_path / "out"))
    prompts = tmp_path / "prompts"
    shutil.copytree(PROMPTS_DIR / "bash", prompts)
    (prompts / "system.md").write_text("an edited system prompt\n")
    edited = dataclasses.replace(INTERCODE_BASH, prompts_dir=prompts)  # the benchmark names its prompts
    with pytest.raises(MixedSettingsError, match="prompts_sha256"):
        _run(_spec(tmp_path / "out", benchmark=edited))


def test_records_without_identity_are_other_settings(tmp_path):
    legacy = {"benchmark": "intercode-bash", "method": "stateflow", "models": "oracle", "task": 0, "status": "ok"}
    ResultsFile(tmp_path / "results.jsonl").append(EpisodeRecord.from_dict(legacy | _SCORED))
    with pytest.raises(MixedSettingsError, match="no episode identity") as info:
        _run(_spec(tmp_path))
    assert info.value.legacy == 1
    assert _run(_spec(tmp_path, mix_settings=True)).finished == 3  # the legacy record is never reused


def test_records_of_another_benchmark_are_not_compared(tmp_path):
    other = {"benchmark": "intercode-sql", "method": "stateflow", "models": "x", "task": 0, "identity": {}}
    ResultsFile(tmp_path / "results.jsonl").append(EpisodeRecord.from_dict(other | _SCORED | {"status": "ok"}))
    assert _run(_spec(tmp_path)).finished == 3


def test_duplicate_task_indices_run_once_with_a_note(tmp_path):
    console, buf = _console()
    s = _run(_spec(tmp_path, tasks="1,1,2,1"), console=console)
    assert s.finished == s.planned == 2
    assert sorted(r["task"] for r in _lines(tmp_path)) == [1, 2]
    assert "--tasks repeats 1; each task runs once" in buf.getvalue()


def test_retry_errors_replaces_the_errored_record_everywhere(tmp_path):
    def broken(messages, params):
        raise RuntimeError("model exploded")

    flaky = ModelProfile(name="flaky", model="f", provider="scripted", api_key_env=None)
    base = {"oracle": False, "models": ModelAssignment.of(flaky), "models_label": "default=flaky"}
    first = _run(_spec(tmp_path, scripts={"flaky": ScriptedLLM(broken)}, **base))
    assert [r["status"] for r in first.records] == ["error"] * 3
    # the same identity (scripts are not part of it), now with a model that answers
    good = {"flaky": ScriptedLLM(["Thought: done\nAction: submit"], cycle=True)}
    assert _run(_spec(tmp_path, scripts=good, **base)).finished == 0  # errored episodes count as done...
    retried = _run(_spec(tmp_path, scripts=good, retry_errors=True, **base))
    assert retried.finished == 3  # ...unless asked to retry them
    assert len(_lines(tmp_path)) == 6  # append-only: the old records stay in the file
    assert [(r["task"], r["status"]) for r in retried.records] == [(0, "ok"), (1, "ok"), (2, "ok")]
    loaded = load_results([str(tmp_path)])
    assert len(loaded) == 3 and all(r["success"] for r in loaded)
    (row,) = summarize([EpisodeRecord.from_dict(d) for d in _lines(tmp_path)])  # the raw file: newest record wins
    assert (row.n, row.sr, row.errored) == (3, 100.0, 0)
    again = _run(_spec(tmp_path, scripts=good, retry_errors=True, **base))
    assert (again.skipped, again.finished) == (3, 0)  # nothing errored is left


@pytest.mark.parametrize(
    ("kw", "message"),
    [
        ({"methods": ("no_such_method",)}, "unknown method"),
        ({"tasks": "3:99"}, r"end 99 is outside the dataset \(the dataset has 5 task\(s\): valid indices 0\.\.4"),
        ({"tasks": "7"}, r"index 7 is outside the dataset .*valid indices 0\.\.4"),
        ({"tasks": "2:2"}, "selects no task"),
    ],
)
def test_failed_validation_leaves_no_directory(tmp_path, kw, message):
    out = tmp_path / "new" / "out"
    with pytest.raises(ValueError, match=message):
        _run(_spec(out, **kw))
    assert not (tmp_path / "new").exists()


def test_environment_that_fails_to_open_leaves_no_directory(tmp_path):
    def broken(spec):
        raise RuntimeError("no sandbox here")

    with pytest.raises(RuntimeError, match="no sandbox"):
        evaluate(_spec(tmp_path / "out"), progress=False, env_factory=broken)
    assert not (tmp_path / "out").exists()


def test_run_failing_before_any_record_removes_the_directory_it_created(tmp_path):
    opened: list[int] = []

    def probe_only(spec):  # the probe opens; the worker's environment then fails
        opened.append(1)
        if len(opened) > 1:
            raise RuntimeError("worker environment failed")
        return FakeEnv()

    with pytest.raises(RuntimeError, match="worker environment failed"):
        evaluate(_spec(tmp_path / "out"), progress=False, env_factory=probe_only)
    assert not (tmp_path / "out").exists()
    # a directory that already existed is left alone
    (tmp_path / "kept").mkdir()
    opened.clear()
    with pytest.raises(RuntimeError):
        evaluate(_spec(tmp_path / "kept"), progress=False, env_factory=probe_only)
    assert (tmp_path / "kept").is_dir()


def test_resume_repairs_a_torn_last_line_before_appending(tmp_path):
    """Regression: without the repair the next record is glued onto the torn line."""
    _run(_spec(tmp_path))
    path = tmp_path / "results.jsonl"
    torn = json.dumps(_lines(tmp_path)[0] | {"task": 3})[:40]
    with path.open("ab") as fh:  # what a kill -9 in the middle of a write leaves
        fh.write(torn.encode())
    console, buf = _console()
    s = _run(_spec(tmp_path, tasks="0:5"), console=console)
    assert (s.skipped, s.finished) == (3, 2)
    assert "cut off an incomplete last record" in buf.getvalue()
    loaded = ResultsFile(path).load()
    assert not loaded.torn_tail
    assert sorted(r["task"] for r in loaded.records) == [0, 1, 2, 3, 4]
    assert all(json.loads(line) for line in path.read_text().splitlines())


def test_records_written_before_schema_version_resume_as_finished_episodes(tmp_path, sql_available):
    """The same command run over a results file written by the previous version skips its episodes."""
    before = Path(__file__).parent / "snapshots" / "results_before_schema_version.jsonl"
    out = tmp_path / "out"
    out.mkdir()
    sql_lines = [ln for ln in before.read_text(encoding="utf-8").splitlines() if '"intercode-sql"' in ln]
    (out / "results.jsonl").write_text("".join(ln + "\n" for ln in sql_lines), encoding="utf-8")
    # The records' prompts_sha256 covers the prompt folder as it was then: oneshot.md came later
    # (a new file is a new setting), so the folder is rebuilt as it was for the same command.
    prompts = tmp_path / "prompts"
    shutil.copytree(INTERCODE_SQL.prompts_dir, prompts)
    (prompts / "oneshot.md").unlink()
    bench = dataclasses.replace(INTERCODE_SQL, prompts_dir=prompts)
    spec = RunSpec(benchmark=bench, methods=("stateflow", "try_again"), out=out, tasks="0", **ORACLE)
    s = evaluate(spec, progress=False)
    assert (s.planned, s.skipped, s.finished) == (2, 2, 0)
    assert [r.schema_version for r in s.records] == [0, 0]
    assert (out / "results.jsonl").read_text(encoding="utf-8").splitlines() == sql_lines  # nothing rewritten

"""Golds that do not reproduce: the oracle replayed K times, each replay in fresh environments."""

from __future__ import annotations

import itertools
from dataclasses import dataclass

from stateflow.tasks.bash.benchmark import INTERCODE_BASH
from stateflow.tasks.harness.repeats import run_repeats
from stateflow.tasks.harness.runner import RunSpec
from stateflow.tasks.kit.episode_record import EpisodeRecord
from stateflow.tasks.reports.gold_check import GoldReplay, gold_note, gold_replays, unstable_golds

from stateflow.cli.main import main
from tests.tasks.fakes import FakeEnv
from tests.tasks.test_runner import ORACLE_SPEC


def _rec(task, reward, repeat, *, policy="oracle", method="stateflow"):
    identity = {"policy": policy, "method": method, **({"repeat": repeat} if repeat is not None else {})}
    return EpisodeRecord(
        benchmark="intercode-bash",
        dataset="nl2bash",
        method=method,
        models="oracle" if policy == "oracle" else "default=m",
        task=task,
        context="fs_1",
        status="ok",
        success=reward == 1.0,
        reward_raw=reward,
        turns=1,
        failed_actions=0,
        identity=identity,
        identity_digest=f"{policy}-{method}-{repeat}",
    )


def test_unstable_golds_are_the_tasks_whose_reward_differs_between_replays():
    records = [
        _rec(30, 1.0, 0),
        _rec(30, 0.92, 1),
        _rec(31, 1.0, 0),
        _rec(31, 1.0, 1),
        _rec(32, 1.0, None),  # replayed once (no repeats): nothing to compare
        _rec(30, 0.5, 0, policy="llm"),  # a model's episode is not a gold replay
    ]
    replays = gold_replays(records)
    assert [(g.task, g.rewards) for g in replays] == [(30, (1.0, 0.92)), (31, (1.0, 1.0))]
    assert [g.text() for g in unstable_golds(records)] == ["task 30 (fs_1): rewards 1.00, 0.92"]
    note = gold_note(replays, "intercode-bash", "nl2bash", range(0, 40))
    assert "of the 2 task(s) replayed 2 times in fresh environments, 1 scored differently" in note
    assert "task 30 (fs_1): rewards 1.00, 0.92" in note and "counted as recorded" in note
    assert gold_note(replays, "intercode-bash", "nl2bash", [31]).startswith("Gold check: every gold of the 1 task")
    assert gold_note(replays, "intercode-bash", "nl2bash", [5]) == ""  # not replayed: nothing claimed
    assert gold_note(replays, "intercode-sql", "nl2bash", [30]) == ""


@dataclass
class _FlakyEnv(FakeEnv):
    """Task 2's gold pays 1.0 in one environment and 0.92 in the next (a per-instance coin)."""

    serial: int = 0


def test_each_replay_runs_in_environments_of_its_own_and_finds_a_flaky_gold(tmp_path):
    serials = itertools.count()
    opened: list[_FlakyEnv] = []

    def fresh(_spec):
        n = next(serials)
        # a replay opens two environments (a probe, then the worker): the coin flips per replay's pair
        env = _FlakyEnv(n=4, rewards={2: 1.0 if (n // 2) % 2 else 0.92}, serial=n)
        opened.append(env)
        return env

    spec = RunSpec(INTERCODE_BASH, ("react",), out=tmp_path, dataset="demo", tasks="0:4", **ORACLE_SPEC)
    summaries = run_repeats(spec, 2, env_factory=fresh, progress=False)
    records = [r for s in summaries for r in s.records]
    assert len(records) == 8 and {r.identity["repeat"] for r in records} == {0, 1}
    assert all("seed" not in r.identity for r in records)  # a gold replay has no sampler seed
    # each replay opened its own environments (a probe and a worker each): none is shared
    assert len(opened) == 4 and all(e.closed for e in opened)
    (flaky,) = unstable_golds(records)
    assert flaky.task == 2 and sorted(flaky.rewards) == [0.92, 1.0]


def test_oracle_replays_on_the_real_bash_sandbox_report_every_demo_gold_stable(tmp_path, bash_available, capsys):
    out = tmp_path / "gold"
    args = ["run", "intercode-bash", "--policy", "oracle", "--tasks", "0:6", "--out", str(out), "--no-progress"]
    assert main([*args, "--repeats", "2"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "gold check: 6 task(s) replayed 2 times in fresh environments; every gold scored the same" in text
    assert main(["report", str(out), "--out", str(tmp_path / "rep")]) == 0
    assert "gold check: 6 task(s) replayed 2 times" in " ".join(capsys.readouterr().out.split())


def test_the_paper_section_names_a_gold_that_did_not_reproduce():
    from stateflow.tasks.harness.paper import PairOutcome, PaperModel
    from stateflow.tasks.reports.paper_report import results_section

    from stateflow import ModelAssignment
    from tests.tasks.test_paper import BASH, _record

    bench = BASH
    model = PaperModel("x", ModelAssignment.of("local"), "default=x")
    records = [
        _record(m, t, True).model_copy(update={"benchmark": bench.name, "dataset": bench.dataset})
        for m in bench.all_methods
        for t in (29, 30)
    ]
    outcome = PairOutcome(bench, model, None, "complete", records, tasks_total=2)
    gold = [GoldReplay(bench.name, bench.dataset, 30, "fs_1", (1.0, 0.92))]
    section = results_section([outcome], command="c", tasks="dev", date="d", images=[], gold=gold)
    assert "1 scored differently between replays (task 30 (fs_1): rewards 1.00, 0.92)" in section
    assert "Gold check" not in results_section([outcome], command="c", tasks="dev", date="d", images=[])

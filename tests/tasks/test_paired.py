"""Paired comparison (won / lost, exact McNemar test) and `stateflow compare` on results files."""

from __future__ import annotations

import itertools
import json
import math

import pytest
from stateflow.tasks.harness.archive import RecordArchive
from stateflow.tasks.harness.records import ResultsFile
from stateflow.tasks.kit.episode_record import EpisodeRecord
from stateflow.tasks.reports.paired import compare, side_records, sign_test_p

from stateflow.cli.main import main
from stateflow.errors import ConfigError


def _rec(task: int, success: bool, *, method: str = "a", hardness: str = "easy", digest: str = "d", **kw):
    return EpisodeRecord(
        benchmark="intercode-sql",
        dataset="spider",
        method=method,
        models="default=local",
        task=task,
        hardness=hardness,
        status="ok",
        success=success,
        reward_raw=1.0 if success else kw.pop("reward", 0.0),
        turns=1,
        failed_actions=0,
        identity_digest=f"{digest}-{method}",
        **{"query": f"question {task}", "gold": f"SELECT {task}", "last_action": f"SELECT {method}{task}", **kw},
    )


@pytest.mark.parametrize(("won", "lost"), [(0, 0), (1, 0), (8, 2), (2, 8), (13, 2), (5, 5), (3, 4), (0, 12)])
def test_sign_test_matches_the_binomial_by_brute_force(won, lost):
    n = won + lost
    if n == 0:
        assert sign_test_p(won, lost) == 1.0
        return
    # Every sequence of n fair coins: the share of splits at least as uneven as the observed one.
    extreme = abs(won - lost)
    at_least = sum(1 for flips in itertools.product((0, 1), repeat=n) if abs(2 * sum(flips) - n) >= extreme)
    assert math.isclose(sign_test_p(won, lost), at_least / 2**n)


def test_sign_test_known_values_and_bad_counts():
    assert sign_test_p(8, 2) == 0.109375  # the levers table's "8 / 2 (p = 0.11)"
    assert sign_test_p(30, 2) < 1e-6
    assert sign_test_p(3, 3) == 1.0
    with pytest.raises(ValueError, match="counts must be >= 0"):
        sign_test_p(-1, 2)


def test_compare_counts_only_common_tasks_and_splits_by_hardness():
    base = [
        _rec(0, True),
        _rec(1, False),
        _rec(2, True, hardness="hard"),
        _rec(3, False, hardness="extra"),
        _rec(9, True),
    ]
    cand = [
        _rec(0, True, method="b"),
        _rec(1, True, method="b", hardness="medium"),
        _rec(2, False, method="b", hardness="hard"),
        _rec(3, False, method="b", hardness="extra", reward=0.5),
        _rec(7, True, method="b"),
    ]
    c = compare(base, cand, labels=("A", "B"))
    assert c.tasks == (0, 1, 2, 3)
    assert (c.baseline_solved, c.candidate_solved, c.won_tasks, c.lost_tasks) == (2, 2, (1,), (2,))
    assert c.same_reward == 1  # task 0 only: task 3 failed on both sides, with different rewards
    assert (c.only_baseline, c.only_candidate) == (1, 1)
    assert list(c.by_hardness) == ["easy", "hard", "extra"]  # Spider's order, from the baseline's labels
    assert (c.by_hardness["easy"].tasks, c.by_hardness["easy"].candidate_solved) == (2, 2)
    assert (c.success("baseline"), c.success("candidate"), c.p_value) == (50.0, 50.0, 1.0)


def test_a_side_is_one_method_of_one_setting():
    records = [_rec(0, True), _rec(1, False), _rec(0, True, method="b")]
    assert [r.task for r in side_records(records, "a", "runs/x:a")] == [0, 1]
    with pytest.raises(ConfigError, match="runs/x holds 2 methods \\(a, b\\); name one as PATH:METHOD"):
        side_records(records, None, "runs/x")
    with pytest.raises(ConfigError, match="no episodes of method 'c'; recorded: a, b"):
        side_records(records, "c", "runs/x:c")
    mixed = [
        _rec(0, True, finished_at="2026-11-24T10:00:00+00:00"),
        _rec(0, False, digest="other", finished_at="2026-11-25T09:00:00+00:00"),
        _rec(1, True, digest="other", finished_at="2026-11-25T10:00:00+00:00"),
    ]
    with pytest.raises(ConfigError, match="method 'a' was recorded with 2 settings") as err:
        side_records(mixed, "a", "runs/x:a")
    # Each setting is listed, newest first, so the user can pick one.
    assert str(err.value).index("other-a: 2 episode(s), last finished 2026-11-25T10") < str(err.value).index(
        "d-a: 1 episode(s), last finished 2026-11-24T10"
    )
    assert [(r.task, r.success) for r in side_records(mixed, "a", "runs/x:a@oth", "oth")] == [(0, False), (1, True)]
    assert [r.task for r in side_records(mixed, "a", "runs/x:a@d", "d")] == [0]
    with pytest.raises(ConfigError, match="setting 'zz' matches none of the settings of method 'a'"):
        side_records(mixed, "a", "runs/x:a@zz", "zz")
    with pytest.raises(ConfigError, match="setting '' matches 2 of the settings of method 'a'"):
        side_records(mixed, "a", "runs/x:a@", "")
    with pytest.raises(ConfigError, match="runs/empty: no episodes recorded"):
        side_records([], None, "runs/empty")


def test_compare_command_reads_results_dirs_and_archives(tmp_path, capsys):
    ResultsFile(tmp_path / "run" / "results.jsonl").extend(
        [_rec(t, t % 2 == 0, wall_s=2.0, prompt_tokens=100) for t in range(6)]
        + [_rec(t, t < 5, method="b", wall_s=4.0, prompt_tokens=300) for t in range(6)]
    )
    RecordArchive(tmp_path / "archive.jsonl").merge([_rec(t, True, method="b") for t in range(4)])

    def run(*args: str) -> tuple[int, str]:
        code = main(["compare", *args])
        got = capsys.readouterr()
        return code, " ".join((got.out + got.err).split())

    code, out = run(f"{tmp_path}/run:a", f"{tmp_path}/run:b", "--list")
    assert code == 0, out
    assert "6 common tasks" in out and "50.0" in out and "83.3" in out
    assert "95 % CI (Wilson) │ 18.8-81.2 │ 43.6-97.0" in out  # 3 of 6 and 5 of 6
    assert (
        "candidate won 2, lost 0 (exact McNemar test on the discordant tasks: p = 0.5); same reward on 4 of 6 tasks"
        in out
    )
    assert "won: 1, 3" in out and "lost: -" in out
    assert "100" in out and "300" in out and "2.0" in out and "4.0" in out

    code, out = run(f"{tmp_path}/run:a", f"{tmp_path}/run:b", "--show")
    assert code == 0, out
    assert "won 1 (easy): question 1 gold: SELECT 1 baseline: SELECT a1 candidate: SELECT b1" in out
    assert "won 3" in out and "lost" not in out.split("won 1")[1]

    code, out = run(f"{tmp_path}/run:a", str(tmp_path / "archive.jsonl"))
    assert code == 0, out
    assert "4 common tasks" in out and "not compared: 2 task(s) only the baseline finished" in out

    # A re-run under a new setting joins the archive; @SETTING picks one of the two.
    RecordArchive(tmp_path / "archive.jsonl").merge([_rec(t, t == 0, method="b", digest="new") for t in range(3)])
    code, out = run(f"{tmp_path}/run:a", f"{tmp_path}/archive.jsonl:b")
    assert code == 1 and "2 settings" in out and "new-b: 3 episode(s)" in out and "PATH:METHOD@SETTING" in out
    code, out = run(f"{tmp_path}/run:a", f"{tmp_path}/archive.jsonl:b@new")
    assert code == 0, out
    assert "3 common tasks" in out and "candidate won 0, lost 1" in out
    code, out = run(f"{tmp_path}/run:a", f"{tmp_path}/archive.jsonl:b@")
    assert code == 1 and "no results there" in out

    code, out = run(f"{tmp_path}/run", f"{tmp_path}/run:b")
    assert code == 1 and "holds 2 methods (a, b); name one as PATH:METHOD" in out
    code, out = run(f"{tmp_path}/run:a", f"{tmp_path}/nowhere:b")
    assert code == 1 and "nowhere:b: no results there" in out
    bash = [_rec(t, True).model_copy(update={"benchmark": "intercode-bash"}) for t in range(3)]
    ResultsFile(tmp_path / "bash" / "results.jsonl").extend(bash)
    code, out = run(f"{tmp_path}/run:a", f"{tmp_path}/bash")
    assert code == 1 and "share no task (benchmark, dataset and task index must match)" in out


def test_archive_command_keeps_a_runs_records_without_traces(tmp_path, capsys):
    ResultsFile(tmp_path / "run" / "results.jsonl").extend(
        [_rec(t, t % 2 == 0, history=[{"role": "user", "content": "x" * 500}]) for t in range(3)]
    )
    target = tmp_path / "docs" / "levers.jsonl"
    assert main(["archive", str(tmp_path / "run"), "--to", str(target)]) == 0
    assert "3 record(s) added or updated, 3 in all" in capsys.readouterr().out
    kept = RecordArchive(target).load()
    assert [(r.task, r.success, r.history) for r in kept] == [(0, True, []), (1, False, []), (2, True, [])]
    assert main(["archive", str(tmp_path / "run"), "--to", str(target)]) == 0
    assert "0 record(s) added or updated, 3 in all" in capsys.readouterr().out
    assert main(["archive", str(tmp_path / "nothing"), "--to", str(target)]) == 1
    assert "no results here" in capsys.readouterr().err

    # a directory holding two benchmarks and two methods: keep one of each
    mixed = [
        _rec(t, True, method=m, digest=b).model_copy(update={"benchmark": b})  # one setting per benchmark
        for t in range(2)
        for m in "ab"
        for b in ("intercode-sql", "intercode-bash")
    ]
    ResultsFile(tmp_path / "mixed" / "results.jsonl").extend(mixed)
    bash = tmp_path / "bash.jsonl"
    args = ["archive", str(tmp_path / "mixed"), "--to", str(bash), "--benchmark", "intercode-bash", "--method", "b"]
    assert main(args) == 0
    assert {(r.benchmark, r.method) for r in RecordArchive(bash).load()} == {("intercode-bash", "b")}
    assert main([*args[:4], "--benchmark", "nl2sql"]) == 1
    err = " ".join(capsys.readouterr().err.split())
    assert "--benchmark nl2sql: no such episodes in" in err and "recorded: intercode-bash, intercode-sql" in err
    assert main([*args[:4], "--method", "zz", "--method", "a"]) == 1
    assert "--method zz: no such episodes" in " ".join(capsys.readouterr().err.split())


def test_report_on_archive_files_writes_beside_them_without_clobbering(tmp_path, capsys):
    # Two archives share a folder; each report gets its own folder, none lands among the records.
    folder = tmp_path / "paper" / "intercode-sql"
    RecordArchive(folder / "local.jsonl").merge([_rec(t, t < 3) for t in range(4)])
    RecordArchive(folder / "local-small.jsonl").merge([_rec(t, t < 1) for t in range(4)])
    for name in ("local", "local-small"):
        assert main(["report", str(folder / f"{name}.jsonl")]) == 0, capsys.readouterr()
    assert sorted(p.name for p in folder.iterdir()) == [
        "local-report",
        "local-small-report",
        "local-small.jsonl",
        "local.jsonl",
    ]
    srs = [
        json.loads((folder / f"{n}-report" / "metrics.json").read_text())["overall"][0]["sr"]
        for n in ("local", "local-small")
    ]
    assert srs == [75.0, 25.0]
    # A run directory's results.jsonl still reports into its run directory.
    ResultsFile(tmp_path / "run" / "results.jsonl").extend([_rec(0, True)])
    assert main(["report", str(tmp_path / "run" / "results.jsonl")]) == 0
    assert (tmp_path / "run" / "metrics.json").exists()


def test_report_command_prints_each_success_rate_with_its_wilson_interval(tmp_path, capsys):
    ResultsFile(tmp_path / "run" / "results.jsonl").extend(
        [_rec(t, t % 2 == 0) for t in range(6)] + [_rec(t, t < 5, method="b") for t in range(6)]
    )
    assert main(["report", str(tmp_path / "run"), "--out", str(tmp_path / "rep")]) == 0
    out = capsys.readouterr().out
    assert "95 % CI" in out
    assert [line.count("18.8-81.2") for line in out.splitlines() if "│ a " in line] == [1]
    assert [line.count("43.6-97.0") for line in out.splitlines() if "│ b " in line] == [1]
    overall = json.loads((tmp_path / "rep" / "metrics.json").read_text())["overall"]
    assert [(round(r["sr_low"], 1), round(r["sr_high"], 1)) for r in overall] == [(18.8, 81.2), (43.6, 97.0)]

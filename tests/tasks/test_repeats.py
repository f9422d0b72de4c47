"""`stateflow run --repeats K`: distinct seeds reach the model, each repeat is its own episode identity,
and the report gives pass@1 with its interval, pass@K, pass^K and flips (real SQL environment, a fake
OpenAI-compatible server over HTTP that answers by the request's seed)."""

from __future__ import annotations

import json
import re

import pytest
from stateflow.tasks.harness.identity import EpisodeIdentity, setting_digest
from stateflow.tasks.harness.records import ResultsFile
from stateflow.tasks.harness.repeats import check_repeats, repeat_rows, with_temperature

from stateflow.cli.main import main
from stateflow.errors import ConfigError
from stateflow.profiles import ModelAssignment
from stateflow.testing.fake_openai import FakeOpenAIServer


def _golds() -> dict[str, str]:
    from stateflow.envs.sql import open_sql_env

    env = open_sql_env("demo")
    try:
        return {env.task(i).query: env.task(i).gold for i in range(4)}
    finally:
        env.close()


def test_repeats_run_with_distinct_seeds_and_report_pass_at_k(tmp_path, sql_available, capsys):
    golds = _golds()
    seeds: list[tuple[int, float]] = []

    def answer(model, messages, body):
        # the gold when the seed and the task's position have the same parity: every task flips
        prompt = "\n".join(m["content"] for m in messages)
        index, query = next((i, q) for i, q in enumerate(golds) if q in prompt)
        seeds.append((body.get("seed"), body.get("temperature")))
        sql = golds[query] if (body["seed"] + index) % 2 == 0 else "SELECT 1"
        return f"Action: execute[{sql}]"

    out = tmp_path / "run"
    args = ["run", "intercode-sql", "--method", "oneshot_direct", "--tasks", "0:4", "--out", str(out), "--no-progress"]
    with FakeOpenAIServer(answer) as srv:
        model = ["--model", f"llamacpp:m@{srv.url}"]
        # at temperature 0 the repeats could not differ: refused before any request
        assert main([*args, *model, "--repeats", "3"]) != 0
        assert "temperature 0" in capsys.readouterr().err and srv.requests == []
        assert main([*args, *model, "--repeats", "3", "--temperature", "0.7", "--sampling-seed", "10"]) == 0
        ran = capsys.readouterr()
        assert sorted({s for s, _ in seeds}) == [10, 11, 12] and {t for _, t in seeds} == {0.7}
        # resumed: the same command runs nothing again
        assert main([*args, *model, "--repeats", "3", "--temperature", "0.7", "--sampling-seed", "10"]) == 0
        assert len(seeds) == 12
    capsys.readouterr()
    text = " ".join(ran.out.split())
    assert "3 repeats per task" in text
    records = ResultsFile(out / "results.jsonl").load().records
    assert len(records) == 12 and len({r.identity_digest for r in records}) == 3
    assert sorted({(r.identity["repeat"], r.identity["seed"]) for r in records}) == [(0, 10), (1, 11), (2, 12)]
    (row,) = repeat_rows(records, 3)
    o = row.outcomes
    # tasks 0 and 2 solved at seeds 10 and 12, tasks 1 and 3 at seed 11
    assert (o.tasks, o.pass_1, o.pass_k, o.pass_hat_k, o.flips) == (4, 50.0, 100.0, 0.0, 100.0)
    assert o.pass_1_ci.low < 50.0 < o.pass_1_ci.high
    line = re.search(r"oneshot_direct .*", text)
    assert line and f"│ 4 │ 50.0 │ {o.pass_1_ci.text()} │ 100.0 │ 0.0 │ 100.0" in line.group(0)
    # `stateflow report` prints the same repeats table from the records
    assert main(["report", str(out)]) == 0
    report = " ".join(capsys.readouterr().out.split())
    assert f"│ 4 │ 50.0 │ {o.pass_1_ci.text()} │ 100.0 │ 0.0 │ 100.0" in report
    assert json.loads((out / "run.json").read_text())["repeat"] == 2


def test_an_identity_without_repeat_keeps_its_digest_and_a_repeat_changes_it():
    base = EpisodeIdentity("b", "d", "s", "m", "f", "fs", "p", "llm", "x", "ms", 10, True, "embedded")
    assert "repeat" not in base.to_dict() and "seed" not in base.to_dict()
    # the digest as computed before the repeat fields existed (the archive's digests depend on it)
    assert base.digest == "3ad2b75cc2d13837"
    first = EpisodeIdentity(**{**base.to_dict(), "repeat": 0, "seed": 10})
    second = EpisodeIdentity(**{**base.to_dict(), "repeat": 1, "seed": 11})
    assert len({base.digest, first.digest, second.digest}) == 3
    # what the repeats share: the digest of the same setting without repeats
    assert setting_digest(first.to_dict()) == setting_digest(second.to_dict()) == base.digest


def test_bad_repeat_settings_are_refused_before_anything_runs():
    greedy = ModelAssignment.of("local")
    check_repeats(greedy, 1)  # one plain run: fine at temperature 0
    with pytest.raises(ConfigError, match="temperature 0"):
        check_repeats(greedy, 2)
    check_repeats(with_temperature(greedy, 0.5), 2)
    check_repeats(greedy, 2, oracle=True)  # gold replays: no sampler needed
    with pytest.raises(ConfigError, match="at least 1"):
        check_repeats(greedy, 0)

"""Held-out discipline: runs on the held-out sample are stamped, and each held-out number is listed
with how many recipes of its family were evaluated on the held-out sample before it."""

from __future__ import annotations

from stateflow.tasks.bash.benchmark import INTERCODE_BASH
from stateflow.tasks.harness.runner import RunSpec, evaluate
from stateflow.tasks.kit.episode_record import EpisodeRecord
from stateflow.tasks.kit.samples import sample_of
from stateflow.tasks.reports.heldout import heldout_evaluations, heldout_section

from stateflow import ModelAssignment
from stateflow.backends.scripted import ScriptedLLM
from tests.tasks.fakes import FakeEnv
from tests.tasks.test_archive import _profile


def _rec(method, task, success, when, *, digest=None, sample=None, models="default=local", identity=None, **kw):
    return EpisodeRecord(
        benchmark="intercode-sql",
        dataset="spider",
        method=method,
        models=models,
        task=task,
        status="ok",
        success=success,
        reward_raw=1.0 if success else 0.0,
        turns=1,
        failed_actions=0,
        finished_at=when,
        identity_digest=digest or f"d-{method}",
        identity=identity,
        sample=sample,
        **kw,
    )


HELD = {"spider": frozenset({10, 11, 12, 13})}


def test_recipes_are_counted_per_family_in_the_order_first_run_and_dev_runs_do_not_count():
    records = [
        # a dev run (tasks outside the held-out sample): never counted
        *[_rec("dev_only", t, True, "2026-11-01T00:00:00") for t in (1, 2, 3)],
        # three recipes on the held-out sample; b ran first, then a, then a's edited flow (a new digest)
        *[_rec("a", t, t < 12, f"2026-11-03T00:00:0{t - 10}") for t in HELD["spider"]],
        *[_rec("b", t, True, f"2026-11-02T00:00:0{t - 10}") for t in HELD["spider"]],
        *[_rec("a", t, False, "2026-11-05T00:00:00", digest="d-a-edited") for t in HELD["spider"]],
        # another model is another family: its count starts again
        *[
            _rec("a", t, True, "2026-11-04T00:00:00", digest="d-a-small", models="default=local-small")
            for t in (10, 11)
        ],
        # a stamped record counts whatever its task; one stamped dev does not
        _rec("c", 99, True, "2026-11-06T00:00:00", sample="heldout"),
        _rec("c2", 10, True, "2026-11-07T00:00:00", sample="dev"),
        # the oracle's gold replays evaluate no recipe
        _rec("stateflow", 10, True, "2026-11-08T00:00:00", models="oracle"),
    ]
    rows = [(e.models, e.method, e.recipe, e.n, e.solved, e.before) for e in heldout_evaluations(records, HELD)]
    assert rows == [
        ("default=local", "b", "d-b", 4, 4, 0),
        ("default=local", "a", "d-a", 4, 2, 1),
        ("default=local", "a", "d-a-edited", 4, 0, 2),
        ("default=local", "c", "d-c", 1, 1, 3),
        ("default=local-small", "a", "d-a-small", 2, 2, 0),
    ]
    text = heldout_section(heldout_evaluations(records, HELD), sources=["x.jsonl"], command="stateflow bench heldout")
    assert (
        "| intercode-sql | spider | default=local | `a` | `d-a-edit` | 2026-11-05T00:00 | 4 | 0.0 | 0.0-49.0 | 2 |"
        in text
    )


def test_repeats_of_one_setting_are_one_recipe():
    base = {"benchmark": "intercode-sql", "method": "a", "flow_sha256": "f", "version": 2}
    records = [
        _rec("a", t, r == 0, "2026-11-03T00:00:00", digest=f"rep{r}", identity={**base, "repeat": r, "seed": r})
        for r in (0, 1)
        for t in (10, 11)
    ]
    (only,) = heldout_evaluations(records, HELD)
    assert (only.n, only.solved, only.before) == (4, 2, 0)


def test_a_run_on_the_heldout_sample_stamps_its_records(tmp_path):
    tasks = [FakeEnv(n=120).task(i) for i in range(120)]
    held = sample_of("heldout", "nl2bash", tasks).indices
    spec = RunSpec(
        INTERCODE_BASH,
        ("react",),
        models=ModelAssignment.of(_profile()),
        models_label="default=m",
        out=tmp_path,
        dataset="nl2bash",
        tasks="heldout",
        scripts={"m": ScriptedLLM(["Thought: done.\nAction: submit"], cycle=True)},
    )
    s = evaluate(spec, env_factory=lambda _: FakeEnv(n=120), progress=False)
    assert sorted(r.task for r in s.records) == sorted(held) and {r.sample for r in s.records} == {"heldout"}
    plain = evaluate(
        RunSpec(**{**spec.__dict__, "tasks": "0:2", "out": tmp_path / "plain"}),
        env_factory=lambda _: FakeEnv(n=120),
        progress=False,
    )
    assert {r.sample for r in plain.records} == {None}


def test_unarchived_runs_count_as_earlier_recipes_and_one_naming_an_archived_digest_counts_once(tmp_path):
    import json

    import pytest
    from stateflow.tasks.reports.heldout import load_unarchived

    from stateflow.errors import ConfigError

    ledger = tmp_path / "unarchived.json"
    entry = {"benchmark": "intercode-sql", "dataset": "spider", "models": "default=local", "n": 100, "source": "s"}
    ledger.write_text(
        json.dumps(
            {
                "runs": [
                    {**entry, "method": "x", "finished": "2026-10-01T00:00", "solved": 30, "recipe": "old:x"},
                    {**entry, "method": "b", "finished": "2026-10-02T00:00", "solved": 50, "recipe": "d-b"},
                ]
            }
        )
    )
    records = [_rec("b", t, True, "2026-11-02T00:00:00") for t in HELD["spider"]]
    records += [_rec("a", t, True, "2026-11-03T00:00:00") for t in HELD["spider"]]
    rows = [(e.recipe, e.before, bool(e.source)) for e in heldout_evaluations(records, HELD, load_unarchived(ledger))]
    # b's archived run is its second evaluation: only x came before it; a follows x and b
    assert rows == [("old:x", 0, True), ("d-b", 1, True), ("d-b", 1, False), ("d-a", 2, False)]
    assert load_unarchived(tmp_path / "absent.json") == []
    ledger.write_text(json.dumps({"runs": [{**entry, "method": "x", "finished": "2026-10-01", "solved": 101}]}))
    with pytest.raises(ConfigError, match=r"unarchived.json: runs\[0\]: recipe: Field required"):
        load_unarchived(ledger)
    ledger.write_text(
        json.dumps({"runs": [{**entry, "method": "x", "finished": "2026-10-01", "solved": 101, "recipe": "r"}]})
    )
    with pytest.raises(ConfigError, match=r"runs\[0\]: solved 101 > n 100"):
        load_unarchived(ledger)
    ledger.write_text("{")
    with pytest.raises(ConfigError, match="not JSON"):
        load_unarchived(ledger)

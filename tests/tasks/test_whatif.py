"""``stateflow whatif``: recorded episodes re-run from a state with another model.

The source runs and the replays run the paper's SF_Agent Bash flow in the real bubblewrap
sandbox against a counting fake OpenAI-compatible server: the prefix's replies come from the
records (the server never sees those requests again), and the file the prefix wrote is there
when the changed state reads it (the file system was rebuilt by replaying the prefix's actions).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from stateflow.tasks.bash.benchmark import INTERCODE_BASH
from stateflow.tasks.harness.registry import default_registry
from stateflow.tasks.harness.runner import RunSpec, evaluate
from stateflow.tasks.harness.whatif import plan_whatif, run_whatif
from stateflow.tasks.reports.whatif import whatif_comparison, whatif_tables

from stateflow.backends.call_log import CallLog, RecordedCall, ReplayDiverged
from stateflow.errors import ConfigError
from stateflow.profiles import ModelAssignment, ModelProfile
from stateflow.testing.fake_openai import FakeOpenAIServer

PROBE = "whatif_probe.txt"


def respond(model: str, messages: list[dict[str, Any]], body: dict[str, Any]) -> str:
    """Model "a" writes the probe file, then submits; model "b" reads it first, then submits."""
    said = " ".join(str(m.get("content") or "") for m in messages)
    if model == "b":
        if f"cat {PROBE}" not in said:
            return f"Thought: check the file.\nAction: execute[cat {PROBE}]"
        return "Thought: done.\nAction: submit"
    if f"echo planted > {PROBE}" not in said:
        return f"Thought: write it.\nAction: execute[echo planted > {PROBE}]"
    return "Thought: done.\nAction: submit"


def _profiles(url: str) -> list[ModelProfile]:
    return [
        ModelProfile(name=name, model=name, base_url=url, api_key_env=None, max_retries=0, timeout=30)
        for name in ("a", "b")
    ]


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """Two demo Bash tasks run by SF_Agent on model "a", recorded; the fake server stays up."""
    if __import__("shutil").which("bwrap") is None:
        pytest.skip("bubblewrap is not installed: run scripts/setup.sh")
    out = tmp_path_factory.mktemp("whatif") / "run"
    with FakeOpenAIServer(respond) as srv:
        profiles = _profiles(srv.url)
        spec = RunSpec(
            INTERCODE_BASH,
            ("sf_agent",),
            models=ModelAssignment.of({"default": "a"}, profiles=profiles),
            models_label="default=a",
            out=out,
            dataset="demo",
            tasks="0:2",
        )
        summary = evaluate(spec, progress=False)
        assert summary.finished == 2
        yield out, srv, ModelAssignment.of(None, profiles=profiles), summary.records


def test_records_keep_every_model_call_with_its_state(recorded) -> None:
    _, _, _, records = recorded
    for r in records:
        assert [c["state"] for c in r.calls] == ["Solve", "Verify"]
        assert f"echo planted > {PROBE}" in r.calls[0]["reply"] and "submit" in r.calls[1]["reply"]
        assert r.llm_calls == len(r.calls)


def test_whatif_reuses_the_prefix_replies_and_rebuilds_the_file_system(recorded) -> None:
    out, srv, base, records = recorded
    plan = plan_whatif(out, "Verify", {"Verify": "b"}, registry=default_registry(), base=base)
    assert [e.source.task for e in plan.episodes] == [0, 1] and plan.not_reached == []
    assert all([c.state for c in e.prefix] == ["Solve"] for e in plan.episodes)
    sent_before = len(srv.requests)
    result = run_whatif(plan)
    new_requests = srv.requests[sent_before:]
    # the prefix (Solve's call) was never sent again: every request came from the changed state
    assert [r["model"] for r in new_requests] == ["b", "b"] * 2
    assert result.diverged == []
    for rec in result.after:
        replayed, fresh = rec.calls[:1], rec.calls[1:]
        source = next(r for r in records if r.task == rec.task)
        assert replayed == source.calls[:1]  # the recorded reply, as recorded
        assert [c["profile"] for c in fresh] == ["b", "b"]
        observed = [m["content"] for m in rec.history if m["kind"] == "tool" and m["state"] == "Verify"]
        assert observed and observed[0].strip() == "planted"  # written by the replayed prefix
        assert rec.whatif == {
            "source": source.identity_digest,
            "at": "Verify",
            "change": {"Verify": "b"},
            "replayed_calls": 1,
        }
        assert rec.identity["models"] == "Verify=b,default=a (whatif at Verify)"
    # prefix tokens are counted as recorded; the new ones are b's two calls
    assert sum(result.new_tokens.values()) == sum(
        c["usage"]["prompt_tokens"] + c["usage"]["completion_tokens"] for r in result.after for c in r.calls[1:]
    )
    pair = whatif_comparison(result)
    assert pair.tasks == (0, 1) and pair.won + pair.lost <= 2
    per_task, summary = whatif_tables(result)
    assert per_task.row_count == 2 and summary.row_count == 1
    # the records are ordinary results: a second run finds them and runs nothing
    saved = [json.loads(line) for line in (plan.out / "results.jsonl").read_text().splitlines()]
    assert len(saved) == 2
    again = run_whatif(plan)
    assert len(srv.requests) == sent_before + 4 and len(again.after) == 2


def test_whatif_refuses_what_it_cannot_replay(recorded, tmp_path: Path) -> None:
    out, _, base, _ = recorded
    registry = default_registry()
    with pytest.raises(ConfigError, match=r"no such state.*Solve, Verify"):
        plan_whatif(out, "Verfy", {"Verify": "b"}, registry=registry, base=base)
    with pytest.raises(ConfigError, match="nosuch"):
        plan_whatif(out, "Verify", {"Verify": "nosuch"}, registry=registry, base=base)
    with pytest.raises(ConfigError, match="Verfy"):
        plan_whatif(out, "Verify", {"Verfy": "b"}, registry=registry, base=base)
    with pytest.raises(ConfigError, match="cannot be rebuilt"):  # the run's profile "a" is not known
        plan_whatif(out, "Verify", {"Verify": "local"}, registry=registry)
    lines = (out / "results.jsonl").read_text().splitlines()

    def rewritten(name: str, edit: Any) -> Path:
        folder = tmp_path / name
        folder.mkdir()
        rows = [json.loads(line) for line in lines]
        for row in rows:
            edit(row)
        (folder / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
        return folder

    old = rewritten("old", lambda r: r.update(calls=[]))
    with pytest.raises(ConfigError, match="keep no model calls"):
        plan_whatif(old, "Verify", {"Verify": "b"}, registry=registry, base=base)
    changed = rewritten("changed", lambda r: r["identity"].update(flow_sha256="0" * 64))
    with pytest.raises(ConfigError, match=r"fingerprint 000000000000.*definition changed"):
        plan_whatif(changed, "Verify", {"Verify": "b"}, registry=registry, base=base)
    with pytest.raises(ConfigError, match=r"no results.jsonl"):
        plan_whatif(tmp_path / "nowhere", "Verify", {"Verify": "b"}, registry=registry, base=base)


def test_a_replay_that_asks_another_question_diverges() -> None:
    log = CallLog(replay=[RecordedCall("Solve", "a", "x", {}, "k1"), RecordedCall("Verify", "a", "y", {}, "k2")])
    assert log.take("Solve", "k1").reply == "x"
    with pytest.raises(ReplayDiverged, match=r"call 1.*'Verify'.*'Error'"):
        log.take("Error", "k2")
    with pytest.raises(ReplayDiverged, match="call 1"):
        log.take("Verify", "other")
    assert log.replaying and log.replayed == 1

"""Prompt-cache reuse reported from the model server's own counts: records, metrics and the table."""

from __future__ import annotations

import io

import pytest
from rich.console import Console
from stateflow.tasks.harness.runner import RunSpec, evaluate
from stateflow.tasks.reports.metrics import summarize
from stateflow.tasks.reports.report import metrics_table
from stateflow.tasks.sql.benchmark import INTERCODE_SQL

from stateflow import ModelAssignment, ModelProfile
from stateflow.testing.fake_openai import FakeOpenAIServer


def test_records_and_report_carry_the_servers_cached_counts(tmp_path, sql_available):
    with FakeOpenAIServer(lambda *a: "Action: execute[SELECT 1]", prefix_cache=True) as srv:
        profile = ModelProfile(name="lc", model="m", provider="llamacpp", base_url=srv.url, api_key_env=None)
        spec = RunSpec(
            INTERCODE_SQL,
            ("oneshot_direct_question_last",),
            models=ModelAssignment.of(profile),
            models_label="default=lc",
            out=tmp_path,
            tasks="0,1,2",
            order="context",
        )
        summary = evaluate(spec, progress=False)
    counts = srv.cached_counts
    assert len(counts) == 3 == len(summary.records)  # one call per one-shot episode
    by_task = sorted(summary.records, key=lambda r: r.task)
    assert [(r.prompt_tokens, r.cached_tokens) for r in by_task] == counts  # workers=1: in request order
    assert counts[0][1] == 0 and counts[1][1] > 0  # the first prompt was new, the next shared a prefix
    (row,) = summarize(summary.records)
    sent = sum(p for p, _ in counts)
    assert row.eval_share == pytest.approx((sent - sum(c for _, c in counts)) / sent)
    out = io.StringIO()
    Console(file=out, width=250).print(metrics_table([row]))
    assert "eval/sent" in out.getvalue() and f"{row.eval_share:.2f}" in out.getvalue()

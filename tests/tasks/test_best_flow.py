"""One source of truth for the best SQL flow (issue 42, item 4): the demo, the README and the
paper comparison name the preset :data:`BEST_SQL_SUFFIX` names, and the archive backs the choice."""

from __future__ import annotations

import json
from pathlib import Path

from stateflow.tasks.harness.paper import PAPER_BENCHMARKS
from stateflow.tasks.reports.best_flow import BEST_FLOW_MARKERS, best_flow_section
from stateflow.tasks.reports.doc_sections import replace_section
from stateflow.tasks.sql.benchmark import BEST_SQL_SUFFIX, INTERCODE_SQL, TUNED_SQL_SUFFIX

ROOT = Path(__file__).resolve().parents[2]
ARCHIVE = ROOT / "docs/data/paper/intercode-sql/local.jsonl"


def test_the_best_preset_exists_in_both_views_and_the_old_name_follows_it() -> None:
    assert {f"stateflow{BEST_SQL_SUFFIX}", f"sf_agent{BEST_SQL_SUFFIX}"} <= set(INTERCODE_SQL.methods)
    assert TUNED_SQL_SUFFIX == BEST_SQL_SUFFIX


def test_the_readme_section_is_written_from_the_best_preset() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    rewritten = replace_section(readme, BEST_FLOW_MARKERS, best_flow_section())
    assert rewritten.rstrip("\n") == readme.rstrip("\n"), (
        "README.md's best-flow section is stale: python -m stateflow.tasks.reports.best_flow README.md"
    )
    assert f"sf_agent{BEST_SQL_SUFFIX}" in best_flow_section()
    assert "sf_agent_hint" not in best_flow_section("_vote_question_last")


def test_the_paper_comparison_lists_the_best_preset_first() -> None:
    sql = next(b for b in PAPER_BENCHMARKS if b.name == "intercode-sql")
    assert sql.best_flows[0] == f"sf_agent{BEST_SQL_SUFFIX}"


def test_the_archive_backs_the_choice_among_the_compared_flows() -> None:
    # the archived 1.5B dev-sample records: the best preset has the highest success rate of the
    # comparison's best flows (66 % against sf_agent_hint's 55 %), on the same 100 tasks
    by_method: dict[str, list[dict]] = {}
    for line in ARCHIVE.read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        by_method.setdefault(record["method"], []).append(record)
    sql = next(b for b in PAPER_BENCHMARKS if b.name == "intercode-sql")
    rates = {
        m: sum(bool(r["success"]) for r in by_method[m]) / len(by_method[m]) for m in sql.best_flows if m in by_method
    }
    best = f"sf_agent{BEST_SQL_SUFFIX}"
    assert best in rates and len(rates) >= 2
    assert max(rates, key=rates.__getitem__) == best, rates
    assert {r["task"] for r in by_method[best]} == {r["task"] for r in by_method["sf_agent_hint"]}

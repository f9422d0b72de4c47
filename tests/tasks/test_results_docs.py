"""docs/results.md is the report and docs/results-history.md its appendix: every relative link and
every anchor between them resolves, and the generated sections stay where their commands write them."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from stateflow.tasks.reports.doc_sections import SectionMarkers, check_section
from stateflow.tasks.reports.paper_report import RESULTS_MARKERS

DOCS = Path(__file__).resolve().parents[2] / "docs"
LINK = re.compile(r"\]\(([^)\s]+)\)")


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces as hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def _anchors(path: Path) -> set[str]:
    return {_slug(line.lstrip("#")) for line in path.read_text().splitlines() if re.match(r"#{1,6} ", line)}


@pytest.mark.parametrize("name", ["results.md", "results-history.md"])
def test_every_relative_link_and_anchor_resolves(name):
    doc = DOCS / name
    broken = []
    for target in LINK.findall(doc.read_text()):
        if re.match(r"[a-z]+:", target):
            continue  # an external address
        file, _, anchor = target.partition("#")
        path = (doc.parent / file) if file else doc
        if not path.exists() or (anchor and anchor not in _anchors(path)):
            broken.append(target)
    assert broken == []


def test_the_report_leads_and_the_generated_sections_are_where_their_commands_write():
    report = (DOCS / "results.md").read_text()
    assert len(report) < len((DOCS / "results-history.md").read_text()) / 3  # a page, not the history
    check_section(DOCS / "results.md", RESULTS_MARKERS)  # stateflow bench paper
    check_section(DOCS / "results.md", SectionMarkers("heldout"))  # stateflow bench heldout
    assert "<!-- heldout-begin -->" in report and "<!-- paper-begin -->" in report
    assert "<!-- enforcement:begin -->" in (DOCS / "results-history.md").read_text()  # scripts/enforcement_table.py
    # every section of the history is listed in the report's appendix index
    history = [line for line in (DOCS / "results-history.md").read_text().splitlines() if re.match(r"##+ ", line)]
    for heading in history:
        assert f"(results-history.md#{_slug(heading.lstrip('#'))})" in report, heading

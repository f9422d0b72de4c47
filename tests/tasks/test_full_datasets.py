"""Gold replay of the full InterCode sets through the whole harness (needs ../shared/data).

The oracle policy replays each task's gold command through the StateFlow flow, so any failure
not caused by the gold itself would be a harness bug.
"""

from __future__ import annotations

import pytest

# Gold queries that fail on the server itself (docs/intercode.md): they cannot score 1.
SPIDER_BROKEN_GOLDS = {164, 178, 225, 531, 638, 802}
# NL2Bash golds whose output differs between two runs (upstream has the same problem): 30 walks
# /proc with find, 102 prints the date, 109 shows curl's progress meter or not, 198 shows the load
# average. They may score below 1 on any run; every other task must score 1.
NL2BASH_UNREPEATABLE_GOLDS = {30, 102, 109, 198}


@pytest.mark.slow
def test_oracle_on_all_1034_spider_tasks(full_oracle_run, sql_available, shared_data):
    s = full_oracle_run("intercode-sql", "spider")
    assert s.finished == 1034
    failed = {r["task"] for r in s.records if not r["success"]}
    assert failed == SPIDER_BROKEN_GOLDS
    assert all(r["status"] == "ok" for r in s.records)


@pytest.mark.slow
def test_oracle_on_all_200_nl2bash_tasks(full_oracle_run, bash_available, shared_data):
    s = full_oracle_run("intercode-bash", "nl2bash")
    assert s.finished == 200
    failed = {r["task"] for r in s.records if not r["success"]}
    assert all(r["status"] == "ok" for r in s.records)
    assert failed <= NL2BASH_UNREPEATABLE_GOLDS, sorted(failed - NL2BASH_UNREPEATABLE_GOLDS)

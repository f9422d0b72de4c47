"""scripts/optimize_project.py: a space's cost projected from the archives, before any model runs."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _project(*args: str) -> str:
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "optimize_project.py"), *args],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr[-1500:]
    return done.stdout


def test_the_sql_space_is_priced_from_records_of_the_same_flow_and_stays_within_a_third():
    out = _project("examples/optimize/sql-part4.toml")
    assert "36 candidates" in out
    # the hand-tuned best is found under its recipe spelling by its flow fingerprint
    row = next(
        line for line in out.splitlines() if "`sf_agent_hint+values+question_last+answer_vote | default=local`" in line
    )
    assert row.endswith("| recorded |")
    mixed = next(line for line in out.splitlines() if "answer_vote | default=local-small,Solve=local`" in line)
    assert "mean of the two pure assignments" in mixed
    rungs = re.findall(r"^\| (\d) \| (\d+) \| (\d+) \|", out, flags=re.MULTILINE)
    assert (int(rungs[0][1]), int(rungs[0][2])) == (10, 36) and rungs[-1][1] == "100"
    ratio = float(re.search(r"ratio (\d\.\d\d)\)", out).group(1))
    assert 0 < ratio <= 0.33

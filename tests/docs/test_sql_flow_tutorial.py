"""The SQL tutorial's flow, as the page writes it, solves demo tasks on the embedded 0.5B model
(issue 57, item 17: it scored 0 % because its prompt ended ``execute[<the SELECT>].`` and the
copied period stayed in every statement).

The page's ``# my_flows.py`` snippet is saved as that file and evaluated the way the page's
"Evaluate it" step does, by the command line in a child process started from its directory
(a native crash of the model cannot take the test session down).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

PAGE = Path(__file__).resolve().parents[2] / "docs" / "tutorials" / "sql-flow.md"

pytestmark = pytest.mark.local_model

# Three demo tasks, each answerable with one SELECT over the listed schema. With the page's
# prompt and today's parser the 0.5B model solves task 0 (a count) at temperature 0; before the
# fix it solved none of the three (each statement kept the "]." the model copied, or no action
# was recognised). Measured on the first 13 tasks: see the page's "Evaluate it".
TASKS = "0,3,5"


def _page_module() -> str:
    """The page's ``# my_flows.py`` snippet, as a reader saves it."""
    found = re.search(r"```python\n(# my_flows\.py\n.*?)```", PAGE.read_text(encoding="utf-8"), re.S)
    assert found is not None, f"{PAGE}: no ```python block starting with '# my_flows.py'"
    return found.group(1)


def test_the_tutorials_flow_solves_demo_tasks_on_the_embedded_model(tmp_path, sql_available, local_small_model):
    project = tmp_path / "project"
    project.mkdir()
    (project / "my_flows.py").write_text(_page_module(), encoding="utf-8")
    # a slow shared machine must not turn a long model call into an errored episode
    (project / "models.toml").write_text("[profiles.local-small]\ntimeout = 3000.0\n", encoding="utf-8")
    out = tmp_path / "runs"
    command = ["run", "intercode-sql", "--method", "my_flows:MY_FLOW", "--tasks", TASKS, "--model", "local-small"]
    command += ["--config", "models.toml", "--out", str(out)]
    done = subprocess.run(
        [sys.executable, "-m", "stateflow.cli.main", *command],
        cwd=project,  # the command line finds my_flows.py in the directory it starts in
        capture_output=True,
        text=True,
        timeout=1800,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    records = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert sorted(r["task"] for r in records) == [0, 3, 5]
    assert all(r["status"] == "ok" and r["submitted"] for r in records), [(r["task"], r["error"]) for r in records]
    # what the model wrote after the closing bracket never reaches MariaDB
    statements = [r["last_action"] for r in records if r["last_action"]]
    assert statements and not any(s.rstrip().endswith(("].", "]", "],", "];")) for s in statements), statements
    solved = [r["task"] for r in records if r["success"]]
    assert solved, [(r["task"], r["last_action"], r["reward"]) for r in records]

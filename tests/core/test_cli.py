"""The `stateflow` command: graph, validate, run's argument errors; one-line errors."""

from __future__ import annotations

import subprocess
import sys


def sf(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "stateflow.cli.main", *args], capture_output=True, text=True, timeout=120
    )


def test_graph_mermaid_and_dot():
    p = sf("graph", "intercode-sql", "--format", "mermaid")
    assert p.returncode == 0 and p.stdout.startswith("flowchart TD")
    assert '-->|"3. action failed"| s_Error' in p.stdout
    p = sf("graph", "intercode-bash", "--format", "dot")
    assert p.returncode == 0 and p.stdout.startswith('digraph "intercode-bash"')


def test_graph_png(tmp_path):
    out = tmp_path / "g.png"
    p = sf("graph", "intercode-sql-no-verify", "--format", "png", "--out", str(out))
    if p.returncode != 0 and "Graphviz" in p.stderr:
        import pytest

        pytest.skip("Graphviz is not installed (scripts/setup.sh installs it)")
    assert p.returncode == 0 and out.read_bytes()[:4] == b"\x89PNG"


def test_validate_prints_rules_in_priority_order():
    p = sf("validate", "intercode-sql")
    assert p.returncode == 0
    assert "1. -> End  if submitted" in p.stdout and "valid" in p.stdout


def test_errors_are_one_line_without_traceback(tmp_path):
    p = sf("graph", "no-such-flow")
    assert p.returncode == 1 and "Traceback" not in p.stderr
    assert p.stderr.strip().startswith("error: unknown flow 'no-such-flow'")
    bad = tmp_path / "m.toml"
    bad.write_text("[profiles.x]\nmodle = 1\n")
    p = sf("run", "intercode-sql", "--config", str(bad))
    assert p.returncode == 1 and "unknown key(s) ['modle']" in p.stderr and "Traceback" not in p.stderr
    p = sf("run", "intercode-sql", "--model", "Solve=")
    assert p.returncode == 1 and "expected NAME or STATE=NAME" in p.stderr
    p = sf("run", "intercode-sql", "--method", "reflexion", "--policy", "oracle", "--out", str(tmp_path / "o"))
    assert p.returncode == 1 and "unknown method 'reflexion'" in p.stderr
    p = sf(
        "run",
        "intercode-bash",
        "--data",
        str(tmp_path),
        "--dataset",
        "nl2bash",
        "--policy",
        "oracle",
        "--out",
        str(tmp_path / "b"),
    )
    assert p.returncode == 1 and "error: InterCode bash data not found" in p.stderr and "Traceback" not in p.stderr
    p = sf("--debug", "graph", "no-such-flow")
    assert "Traceback" in p.stderr


def test_run_lists_methods():
    p = sf("run", "intercode-sql", "--list-methods")
    assert p.returncode == 0
    names = [line.split()[0] for line in p.stdout.splitlines()]
    assert {"stateflow", "sf_agent", "react", "react_refined", "plan_solve", "try_again", "stateflow_no_verify"} <= set(
        names
    )

"""docs/checkpoints.md's contract example runs as written."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.core.checkpoint.contract import ROOT


def test_the_contract_example_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    text = (ROOT / "docs" / "checkpoints.md").read_text(encoding="utf-8")
    block = re.search(r"```python\n(.*?)```", text, re.S)
    assert block is not None
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, object] = {}
    exec(compile(block.group(1), "docs/checkpoints.md", "exec"), namespace)
    assert (tmp_path / "runs.db").exists()
    from stateflow.checkpoint import SQLiteCheckpointer

    again = SQLiteCheckpointer(tmp_path / "runs.db")
    assert [c.state for c in again.list("t1")] == ["Solve"]
    again.close()

"""Locating InterCode data."""

from __future__ import annotations

import pytest
from stateflow.envs.datasets import DataNotFoundError, locate_intercode_dir


def test_explicit_directory_never_falls_back(tmp_path):
    with pytest.raises(DataNotFoundError, match="has no 'sql/' directory"):
        locate_intercode_dir(tmp_path)
    (tmp_path / "sql").mkdir()
    assert locate_intercode_dir(tmp_path) == tmp_path


def test_environment_variable_is_searched(tmp_path, monkeypatch):
    (tmp_path / "bash").mkdir()
    monkeypatch.setenv("STATEFLOW_DATA", str(tmp_path))
    assert locate_intercode_dir(need="bash") == tmp_path

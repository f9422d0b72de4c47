"""Clear errors when the sandbox cannot run here (missing tools, no user namespaces)."""

from __future__ import annotations

import subprocess

import pytest
from stateflow.envs.base import EnvironmentError_
from stateflow.envs.bash import sandbox


def test_missing_bwrap_names_the_setup_script(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sandbox.shutil, "which", lambda tool, path=None: None if tool == "bwrap" else "/usr/bin/x")
    with pytest.raises(EnvironmentError_, match=r"`bwrap` is not installed; run scripts/setup_bash\.sh.*docker"):
        sandbox.check_sandbox_support()


def test_no_user_namespaces_points_at_docker(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sandbox.shutil, "which", lambda tool, path=None: f"/usr/bin/{tool}")
    monkeypatch.setattr(sandbox.os, "geteuid", lambda: 1000)
    denied = subprocess.CompletedProcess([], 1, b"", b"unshare: unshare failed: Operation not permitted")
    monkeypatch.setattr(sandbox.subprocess, "run", lambda *a, **k: denied)
    with pytest.raises(EnvironmentError_) as err:
        sandbox.check_sandbox_support()
    text = str(err.value)
    assert "unprivileged user namespaces are unavailable" in text
    assert "Operation not permitted" in text and "backend='docker'" in text and "max_user_namespaces" in text

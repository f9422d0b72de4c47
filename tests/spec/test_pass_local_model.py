"""PASS and in-process scoring on the REAL local-small model (run in a child process).

Skips, naming scripts/setup_local_llm.sh, when llama-cpp-python or the local-small model is absent,
and (for the PASS episode) when no MariaDB server binary is installed.
"""

from __future__ import annotations

import json
import math
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

DRIVER = Path(__file__).with_name("pass_model_driver.py")


def _drive(scenario: str, timeout: int) -> dict:
    proc = subprocess.run([sys.executable, str(DRIVER), scenario], capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, f"driver failed (exit {proc.returncode}):\n{proc.stderr[-4000:]}"
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.local_model
def test_local_scorer_matches_a_full_logits_reference(local_small_model):
    out = _drive("scorer", 600)
    assert all(n > 0 for n in out["lengths"])
    assert out["max_abs_diff"] < 1e-4, out  # same model, tokens and batch layout: the same numbers
    # the second candidate reused the prompt's KV state: only its own tokens (+1) were evaluated
    assert out["evaluated_tokens"] == out["tokens"]
    assert out["template_start"].startswith("<|im_start|>system")  # the GGUF's ChatML template


@pytest.mark.local_model
def test_pass_episode_end_to_end_on_local_model(local_small_model):
    if shutil.which("mariadbd") is None and shutil.which("mysqld") is None:
        pytest.skip("no MariaDB/MySQL server binary: run scripts/setup.sh (installs mariadb-server)")
    out = _drive("pass", 900)
    assert out["error"] is None, out
    spec = out["spec"]
    trace = spec["trace"]
    from stateflow.spec import library_spec

    states = [s["state"] for s in trace["steps"]]
    assert library_spec("pass").dfa.accepts(states), states  # per-turn grammars: a complete valid run
    assert trace["violations"] == [] and out["prompt_tokens"] > 0
    (first, *_) = [s for s in spec["multi_action_steps"] if s["state"] == "Summary"]
    assert len(first["concurrent"]["calls"]) >= 1
    scores = first["summary"]["scores"]
    if first["summary"]["summary"]:  # the model wrote a summary: both candidates were scored
        assert set(scores["scores"]) == {"summary", "raw"}
        assert all(math.isfinite(v) and v < 0 for v in scores["scores"].values())
        best = max(scores["scores"], key=scores["scores"].get)
        assert first["summary"]["kept"] == best
    assert out["reward"] is not None

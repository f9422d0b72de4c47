"""Grammars and a ReAct spec agent on the REAL local model (run in a child process).

Skips, naming scripts/setup_local_llm.sh, when llama-cpp-python or the local-small model is absent.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

DRIVER = Path(__file__).with_name("real_model_driver.py")


def _drive(scenario: str, timeout: int) -> dict:
    proc = subprocess.run([sys.executable, str(DRIVER), scenario], capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, f"driver failed (exit {proc.returncode}):\n{proc.stderr[-4000:]}"
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_every_generated_grammar_is_parsed_by_llama_cpp(local_small_model):
    out = _drive("grammars", 180)
    assert out["control_rejected"], "the grammar check must reject an undefined rule"
    assert out["rejected"] == []
    assert out["grammars_parsed"] > 100


@pytest.mark.local_model
def test_react_spec_agent_end_to_end_on_local_model(local_small_model):
    out = _drive("react", 900)
    mon = out["monitor"]
    # with per-turn grammars the model cannot leave the spec: a complete, accepted run
    assert mon["accepted"], mon
    assert mon["violations"] == 0 and mon["stop_reason"] == "must_stop"
    flow = out["flow"]
    # the imported flow only moves along the automaton; every Action value that counted is allowed
    assert flow["prefix_valid"], flow
    assert flow["error"] is None or "SpecViolationError" in flow["error"], flow
    # every Action value outside the allowed ones was caught as a violation (never coerced)
    invalid = [a for a in flow["actions"] if a not in ("calculate", "finish")]
    assert len(invalid) == len([v for v in flow["violations"] if v.startswith("Action:")]), flow

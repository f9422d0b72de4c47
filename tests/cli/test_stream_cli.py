"""`stateflow run FLOW --task ... --stream`: tokens reach stdout while the model still streams."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from stateflow.testing.fake_openai import FakeOpenAIServer

ROOT = Path(__file__).resolve().parent.parent.parent

FLOWS = """
from stateflow import LLM, Flow, Prompt, State, Transition

ask = State("Ask", Prompt("Say something."), LLM())
done = State("Done", final=True)
FLOW = Flow("talk", initial=ask, transitions=[Transition(ask, done)])
"""


def test_stream_prints_tokens_as_they_come(tmp_path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    (project / "flows.py").write_text(FLOWS)
    words = [f"word{i}" for i in range(30)]
    with FakeOpenAIServer(lambda model, messages, body: " ".join(words), chunk_delay_s=0.1) as srv:
        (project / "models.toml").write_text(
            f'[profiles.srv]\nmodel = "m"\nprovider = "openai"\nbase_url = "{srv.url}"\napi_key_env = ""\n'
            '[models]\ndefault = "srv"\n'
        )
        env = {**os.environ, "PYTHONPATH": f"{project}{os.pathsep}{ROOT}", "PYTHONUNBUFFERED": "1"}
        cmd = [sys.executable, "-m", "stateflow.cli.main", "run", "flows:FLOW", "--task", "hi"]
        proc = subprocess.Popen(
            [*cmd, "--config", "models.toml", "--stream"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
            cwd=project,
        )
        assert proc.stderr is not None
        seen = ""
        while "word2" not in seen:  # read the console until the first tokens arrived
            char = proc.stderr.read(1)
            assert char, seen
            seen += char
        streaming = srv.active  # the model is still streaming its reply while we read it
        out, rest = proc.communicate(timeout=120)
    assert proc.returncode == 0, seen + rest
    assert streaming == 1
    console = seen + rest
    assert "== Ask" in console and "Ask/assistant: word0 word1" in console and "-> Done (always)" in console
    assert "word29" in console and '"exit_state": "Done"' in out

"""`stateflow run FLOW --task ... --thread ID`, `stateflow threads`, `stateflow history` and
`stateflow resume ID --answer ...`: a paused run answered by another process of the real CLI."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from stateflow.testing.fake_openai import FakeOpenAIServer

ROOT = Path(__file__).resolve().parent.parent.parent

FLOWS = """
from stateflow import LLM, Flow, Human, Kind, Prompt, State, Transition, last_matches

draft = State("Draft", Prompt("Draft a note."), LLM())
approve = State("Approve", Human(prompt="Publish? (yes/no)", defer=True, name="editor"))
done = State("Published", final=True)
FLOW = Flow("approval", initial=draft, max_transitions=6, transitions=[
    Transition(draft, approve),
    Transition(approve, done, when=last_matches(r"^yes", kind=Kind.HUMAN)),
    Transition(approve, draft),
])
"""


def _cli(project: Path, store: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": f"{project}{os.pathsep}{ROOT}", "STATEFLOW_CHECKPOINTS": str(store)}
    return subprocess.run(
        [sys.executable, "-m", "stateflow.cli.main", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=project,
        timeout=300,
    )


def test_a_paused_thread_is_listed_answered_and_finished_from_the_command_line(tmp_path) -> None:
    project, store = tmp_path / "project", tmp_path / "threads.db"
    project.mkdir()
    (project / "flows.py").write_text(FLOWS)
    with FakeOpenAIServer(lambda model, messages, body: f"draft {len(messages)}") as srv:
        (project / "models.toml").write_text(
            f'[profiles.srv]\nmodel = "m"\nprovider = "openai"\nbase_url = "{srv.url}"\napi_key_env = ""\n'
            '[models]\ndefault = "srv"\n'
        )
        started = _cli(
            project, store, "run", "flows:FLOW", "--task", "v2", "--thread", "rel-1", "--config", "models.toml"
        )
        assert started.returncode == 0, started.stderr
        assert '"status": "paused"' in started.stdout and "Publish? (yes/no)" in started.stderr
        assert 'stateflow resume rel-1 --answer "..."' in started.stderr
        listed = _cli(project, store, "threads", "--status", "paused")
        assert listed.returncode == 0 and "rel-1" in listed.stdout and "Approve" in listed.stdout
        refused = _cli(project, store, "resume", "rel-1")  # a paused thread needs its answer
        assert refused.returncode == 1 and "waiting for an answer" in refused.stderr
        calls = len(srv.requests)
        # the thread keeps its profile names; a profile defined in a config file needs that file again
        answered = _cli(project, store, "resume", "rel-1", "--answer", "yes", "--config", "models.toml")
        assert answered.returncode == 0, answered.stderr
        assert len(srv.requests) == calls  # the draft is not asked for again
    assert '"status": "finished"' in answered.stdout and '"exit_state": "Published"' in answered.stdout
    steps = _cli(project, store, "history", "rel-1").stdout.splitlines()
    assert [line.split()[1] for line in steps] == ["running", "running", "paused", "running", "finished"]
    again = _cli(project, store, "resume", "rel-1", "--answer", "yes")
    assert again.returncode == 1 and "has finished" in again.stderr
    assert "no thread 'nope'" in _cli(project, store, "resume", "nope").stderr
    assert "choose from" in _cli(project, store, "threads", "--status", "asleep").stderr

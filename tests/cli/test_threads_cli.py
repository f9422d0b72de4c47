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


def test_a_thread_started_from_a_file_path_is_answered_and_forked_from_another_directory(tmp_path) -> None:
    # regressions ([edges] 10, 13): the saved flow reference loaded only from the directory the
    # thread was started in, `path.py:FLOW` was refused, and the advice was Python code
    project, store, elsewhere = tmp_path / "project", tmp_path / "threads.db", tmp_path / "elsewhere"
    project.mkdir()
    elsewhere.mkdir()
    (project / "flows.py").write_text(FLOWS)
    with FakeOpenAIServer(lambda model, messages, body: f"draft {len(messages)}") as srv:
        model = f"openai:m@{srv.url}"
        started = _cli(tmp_path, store, "run", "project/flows.py:FLOW", "--task", "v2", "--thread", "t", "-m", model)
        assert started.returncode == 0, started.stderr
        unanswered = _cli(elsewhere, store, "resume", "t")
        assert unanswered.returncode == 1
        assert "Publish? (yes/no)" in unanswered.stderr and 'stateflow resume t --answer "..."' in unanswered.stderr
        assert "resume('t'" not in unanswered.stderr
        answered = _cli(elsewhere, store, "resume", "t", "--answer", "no", "-m", model)  # back to Draft, paused again
        assert answered.returncode == 0, answered.stderr
        calls = len(srv.requests)
        forked = _cli(elsewhere, store, "fork", "t", "--at", "2", "--answer", "yes", "--new-thread", "t2", "-m", model)
        assert forked.returncode == 0, forked.stderr
        assert len(srv.requests) == calls  # step 2 is the pause: nothing before it is asked again
        assert '"thread": "t2"' in forked.stdout and '"exit_state": "Published"' in forked.stdout
    finished = _cli(elsewhere, store, "resume", "t2")
    assert finished.returncode == 1
    assert "`stateflow history t2`" in finished.stderr and "`stateflow fork t2 --at STEP`" in finished.stderr
    assert "fork('t2'" not in finished.stderr
    listed = _cli(elsewhere, store, "history", "t2").stdout.splitlines()
    assert [line.split()[1] for line in listed][-2:] == ["running", "finished"]
    bad_step = _cli(elsewhere, store, "fork", "t", "--at", "99")
    assert bad_step.returncode == 1 and "99" in bad_step.stderr and "unexpected" not in bad_step.stderr


def test_an_answer_to_a_thread_that_waits_for_none_says_to_resume_without_it(tmp_path) -> None:
    # regression ([edges] 10): "running, not waiting for an answer" did not say what to do instead
    project, store = tmp_path / "project", tmp_path / "threads.db"
    project.mkdir()
    (project / "flows.py").write_text(FLOWS)
    with FakeOpenAIServer(lambda model, messages, body: "x", failures=[400] * 3) as srv:
        failed = _cli(project, store, "run", "flows:FLOW", "--task", "v", "--thread", "f", "-m", f"openai:m@{srv.url}")
    assert failed.returncode != 0
    refused = _cli(project, store, "resume", "f", "--answer", "yes")
    assert refused.returncode == 1
    assert "is failed, not waiting for an answer" in refused.stderr
    assert "continue it with `stateflow resume f` without --answer" in refused.stderr


def test_a_finished_thread_started_from_python_says_finished_before_asking_for_its_flow(tmp_path) -> None:
    # regression ([edges] 14): "not started from the command line: give --flow" came first
    from stateflow import LLM, Flow, State, Transition, run
    from stateflow.checkpoint import SQLiteCheckpointer

    ask = State("Ask", LLM())
    done = State("Done", final=True)
    flow = Flow("py", initial=ask, transitions=[Transition(ask, done)])
    store = tmp_path / "threads.db"
    with FakeOpenAIServer(lambda model, messages, body: "ok") as srv:
        cp = SQLiteCheckpointer(store)
        try:
            assert run(flow, "x", models={"default": f"openai:m@{srv.url}"}, thread_id="p", checkpointer=cp).status == (
                "finished"
            )
        finally:
            cp.close()
    p = _cli(tmp_path, store, "resume", "p")
    assert p.returncode == 1 and "has finished" in p.stderr and "--flow" not in p.stderr
    running_from_python = _cli(tmp_path, store, "fork", "p", "--at", "1")
    assert running_from_python.returncode == 1 and "started from Python" in running_from_python.stderr


def test_a_read_only_store_can_be_listed_and_read(tmp_path) -> None:
    # regression ([edges] 12): `threads` on a read-only store said "attempt to write a readonly
    # database" (or "unable to open database file" in a read-only folder)
    import shutil
    import stat

    project, store = tmp_path / "project", tmp_path / "ro" / "threads.db"
    project.mkdir()
    store.parent.mkdir()
    (project / "flows.py").write_text(FLOWS)
    with FakeOpenAIServer(lambda model, messages, body: "a draft") as srv:
        started = _cli(
            project, store, "run", "flows:FLOW", "--task", "v", "--thread", "ro-1", "-m", f"openai:m@{srv.url}"
        )
    assert started.returncode == 0, started.stderr
    before = {p.name: p.read_bytes() for p in store.parent.iterdir() if p.is_file()}
    for p in store.parent.iterdir():
        p.chmod(stat.S_IRUSR | stat.S_IRGRP | stat.S_IROTH)
    store.parent.chmod(stat.S_IRUSR | stat.S_IXUSR | stat.S_IRGRP | stat.S_IXGRP | stat.S_IROTH | stat.S_IXOTH)
    # root writes anything: as root the command runs in a user namespace of its own, where it is not
    prefix = ["unshare", "-U"] if os.geteuid() == 0 else []
    if prefix and shutil.which("unshare") is None:
        raise AssertionError("running as root without `unshare`: cannot make the store read-only to the command")
    env = {**os.environ, "PYTHONPATH": f"{project}{os.pathsep}{ROOT}"}
    try:
        for args in (["threads"], ["history", "ro-1"]):
            p = subprocess.run(
                [*prefix, sys.executable, "-m", "stateflow.cli.main", *args, "--checkpoints", str(store)],
                capture_output=True,
                text=True,
                env=env,
                cwd=project,
                timeout=120,
            )
            assert p.returncode == 0, p.stderr
            assert "ro-1" in p.stdout or "paused" in p.stdout, p.stdout
    finally:
        store.parent.chmod(0o755)
    assert {p.name: p.read_bytes() for p in store.parent.iterdir() if p.is_file()} == before

"""Execution semantics of BashEnv in the real sandbox (upstream's exec_action and step)."""

from __future__ import annotations

import time

import pytest
from stateflow.envs.base import Environment, EnvironmentError_
from stateflow.envs.bash import BashEnv, open_bash_env

from .conftest import needs_sandbox

pytestmark = needs_sandbox


def test_env_satisfies_the_protocol(demo_env: BashEnv) -> None:
    assert isinstance(demo_env, Environment)
    assert demo_env.name == "intercode-bash"
    assert demo_env.task(0).context == "demo"


def test_reset_returns_the_query_and_empty_info(demo_env: BashEnv) -> None:
    obs, info = demo_env.reset(3)
    assert obs == demo_env.task(3).query and info == {}


def test_each_action_runs_in_a_fresh_shell(demo_env: BashEnv) -> None:
    demo_env.reset(0)
    obs, reward, done, info = demo_env.step("X=42; alias ll=ls; echo $X")
    assert (obs, reward, done, info["action_executed"]) == ("42\n", 0, False, True)
    assert demo_env.step("echo [$X]; type ll")[0].startswith("[]\n")


def test_files_persist_within_an_episode_and_vanish_on_reset(demo_env: BashEnv) -> None:
    demo_env.reset(0)
    demo_env.step("mkdir -p /tmp && echo kept > /tmp/note.txt && rm /demo/README.md")
    assert demo_env.step("cat /tmp/note.txt")[0] == "kept\n"
    demo_env.reset(0)
    obs = demo_env.step("ls /tmp/note.txt; ls /demo/README.md")[0]
    assert obs == "ls: cannot access '/tmp/note.txt': No such file or directory\n/demo/README.md\n"


def test_the_root_is_not_dated_at_the_reset(demo_env: BashEnv) -> None:
    """The gold command runs in a sandbox reset later than the agent's; a listing of / (NL2Bash
    175's gold lists ``.`` when ``which`` finds nothing) must not tell the two apart."""
    demo_env.reset(0)
    first = demo_env.step("stat -c %y /")[0]
    demo_env.step("touch /new.txt")
    assert demo_env.step("stat -c %y /")[0] != first  # a change to / still dates it, as on any disk
    time.sleep(0.05)
    demo_env.reset(0)  # a changed root: a fresh overlay (sandbox) or a fresh container (Docker)
    assert demo_env.step("stat -c %y /")[0] == first


def test_cd_is_emulated(demo_env: BashEnv) -> None:
    demo_env.reset(0)
    assert demo_env.step("cd /demo/docs")[3]["action_executed"]
    assert demo_env.step("pwd")[0] == "/demo/docs\n"
    demo_env.step("cd ../data")
    assert demo_env.step("ls")[0].splitlines() == ["empty.txt", "sales.csv", "users.json"]
    obs, _, _, info = demo_env.step("cd /does/not/exist")
    assert not info["action_executed"] and "No such file" in obs
    assert demo_env.step("pwd")[0] == "/demo/data\n"  # a failed cd keeps the directory
    demo_env.step("cd /")
    assert demo_env.step("pwd")[0] == "/\n"
    demo_env.reset(0)
    assert demo_env.step("pwd")[0] == "/\n"  # reset goes back to /


def test_output_is_stdout_and_stderr_merged_in_order(demo_env: BashEnv) -> None:
    demo_env.reset(0)
    obs, _, _, info = demo_env.step("echo one; echo two >&2; echo three; exit 3")
    assert obs == "one\ntwo\nthree\n"
    assert info["action_executed"] is False  # exit code 3


def test_shlex_quirk_by_default_exact_quoting_on_request(demo_env: BashEnv) -> None:
    demo_env.reset(0)
    assert demo_env.step('echo "a  b"')[0] == "a\n"
    with open_bash_env("demo", exact_quoting=True) as exact:
        exact.reset(0)
        assert exact.step('echo "a  b"')[0] == "a  b\n"
        assert exact.step('echo "unbalanced')[0] != "Malformed command"  # bash reports it instead


def test_exact_quoting_lets_bash_resolve_cd() -> None:
    with open_bash_env("demo", exact_quoting=True) as env:
        env.reset(0)
        assert env.step('cd "/demo/docs"')[0] == ""
        assert env.step("pwd")[0] == "/demo/docs\n"
        obs, _, _, info = env.step("cd .. && ls")  # upstream would track the directory "/demo/docs/.. && ls"
        assert obs.split() == ["README.md", "data", "docs", "logs", "notes"] and info["action_executed"]
        assert env.step("pwd")[0] == "/demo\n"
        obs, _, _, info = env.step("cd /nope")
        assert not info["action_executed"] and "No such file" in obs
        assert env.step("pwd")[0] == "/demo\n"


def test_malformed_command_on_bad_quoting_and_bad_utf8(demo_env: BashEnv) -> None:
    demo_env.reset(0)
    assert demo_env.step('echo "unbalanced')[0:4:3] == ("Malformed command", {"action_executed": False})
    obs, _, _, info = demo_env.step("printf '\\377\\376'")
    assert obs == "Malformed command" and not info["action_executed"]


def test_timeout(fast_env: BashEnv) -> None:
    fast_env.reset(0)
    obs, _, done, info = fast_env.step("sleep 30")
    assert (obs, done, info["action_executed"]) == ("Command timed out", False, False)
    assert fast_env.step("echo alive")[0] == "alive\n"


def test_default_timeout_is_upstreams_ten_seconds() -> None:
    from stateflow.envs.bash import SandboxLimits

    assert SandboxLimits().timeout_s == 10.0


def test_background_job_writing_output_is_waited_for(demo_env: BashEnv) -> None:
    # docker exec returns when the output stream closes, so `x &` still writing is part of the step
    demo_env.reset(0)
    assert demo_env.step("(sleep 0.3; echo late) & echo early")[0] == "early\nlate\n"


def test_skip_and_submit(demo_env: BashEnv) -> None:
    demo_env.reset(0)
    assert demo_env.step("skip") == ("skipped", 0, True, {})
    obs, reward, done, info = demo_env.reset(0)[0], *demo_env.step("submit")[1:]
    # submitting without acting scores the NL query as the observation
    assert done and info["agent_obs"] == obs and info["action_executed"] is True
    assert 0 < reward < 1 and info["corrupt_gold"] is False
    assert set(info) >= {"agent_obs", "eval_obs", "reward", "diff_miss", "diff_extra", "answer_similarity"}


def test_step_before_reset_and_after_close_are_errors() -> None:
    env = open_bash_env("demo")
    try:
        with pytest.raises(EnvironmentError_, match="reset"):
            env.step("ls")
        with pytest.raises(IndexError):
            env.reset(len(env))
    finally:
        env.close()
    env.close()  # idempotent
    with pytest.raises(EnvironmentError_, match="closed"):
        env.reset(0)


def test_wrong_file_changes_lower_the_reward(demo_env: BashEnv) -> None:
    i = next(t.index for t in demo_env.dataset.tasks if t.gold.startswith("sort /demo/notes/words.txt >"))
    demo_env.reset(i)
    demo_env.step("sort -r /demo/notes/words.txt > /demo/notes/sorted.txt")  # right file, wrong content
    _, reward, _, info = demo_env.step("submit")
    assert info["reward"]["file_diff"] == 0.33 and info["reward"]["file_changes"] == 0.0
    assert reward < 1

"""Long and odd actions return an observation, never an exception, and the env stays usable.

Regression tests for issue 13: a ~128 KiB action raised ``Argument list too long`` and a ~208 KiB
one "the sandbox spawner is gone: Message too long", after seconds spent in shlex.split (whose
cost grows quadratically with the action's length).
"""

from __future__ import annotations

import shlex

import pytest
from hypothesis import given
from hypothesis import strategies as st
from stateflow.envs.bash import BashEnv
from stateflow.envs.bash.command import MAX_ACTION_BYTES, SHELL, ActionTooLong, action_argv
from stateflow.envs.bash.rootfs import locate_base_root
from stateflow.envs.bash.sandbox import Sandbox

from .conftest import needs_sandbox

KIB = 1024


def _echo(size: int, char: str = "a") -> str:
    """An ``echo`` action of exactly ``size`` UTF-8 bytes (``char`` is 1 or 2 bytes)."""
    width = len(char.encode())
    body = (size - len("echo ")) // width
    return "echo " + char * body + "a" * (size - len("echo ") - body * width)


def _still_usable(env: BashEnv) -> None:
    obs, _, done, info = env.step("echo ok")
    assert (obs, done, info["action_executed"]) == ("ok\n", False, True)


@needs_sandbox
def test_a_100_kib_action_runs(fast_env: BashEnv) -> None:
    fast_env.reset(0)
    action = _echo(100 * KIB)
    obs, reward, done, info = fast_env.step(action)
    assert (reward, done, info["action_executed"]) == (0, False, True)
    assert obs == action[len("echo ") :] + "\n"
    _still_usable(fast_env)


@needs_sandbox
def test_the_largest_allowed_action_runs_even_as_two_byte_characters(fast_env: BashEnv) -> None:
    # JSON-escaped (\u00e9 for each é) this is ~380 KiB: more than one datagram to the spawner holds
    fast_env.reset(0)
    action = _echo(MAX_ACTION_BYTES, "é")
    assert len(action.encode()) == MAX_ACTION_BYTES
    obs, _, _, info = fast_env.step(action)
    assert info["action_executed"] and obs == action[len("echo ") :] + "\n"
    _still_usable(fast_env)


@needs_sandbox
@pytest.mark.parametrize("size", [MAX_ACTION_BYTES + 1, 300 * KIB, 2048 * KIB])
@pytest.mark.parametrize("exact_quoting", [False, True])
def test_an_over_long_action_is_an_observation(fast_env: BashEnv, size: int, exact_quoting: bool) -> None:
    fast_env.reset(0)
    fast_env.exact_quoting = exact_quoting
    try:
        obs, reward, done, info = fast_env.step(_echo(size))
        assert (reward, done, info["action_executed"]) == (0, False, False)
        assert obs.startswith(f"Action too long: {size} bytes; the limit is {MAX_ACTION_BYTES} bytes")
        _still_usable(fast_env)
        # also as a `cd` (emulated) and quoted (the shlex path)
        assert fast_env.step("cd /" + "a" * size)[0].startswith("Action too long")
        assert fast_env.step('echo "' + "b" * size + '"')[0].startswith("Action too long")
        _still_usable(fast_env)
    finally:
        fast_env.exact_quoting = False


@needs_sandbox
def test_a_lone_surrogate_is_malformed_not_an_exception(fast_env: BashEnv) -> None:
    fast_env.reset(0)
    obs, _, _, info = fast_env.step("echo \ud800")
    assert obs == "Malformed command" and not info["action_executed"]
    _still_usable(fast_env)


@needs_sandbox
def test_the_sandbox_refuses_an_argv_execve_would_refuse() -> None:
    # The sandbox itself, not an environment: the Docker backend has no sandbox to ask.
    with Sandbox([locate_base_root().path]) as box, pytest.raises(ValueError, match="execve allows at most"):
        box.run(["echo", "x" * (128 * KIB)])
    with Sandbox([locate_base_root().path]) as box:
        assert box.run(["echo", "x" * (100 * KIB)]).output == b"x" * (100 * KIB) + b"\n"


def test_the_size_check_comes_before_splitting() -> None:
    with pytest.raises(ActionTooLong) as err:
        action_argv('echo "' + "x" * (4 * MAX_ACTION_BYTES))
    assert err.value.size == 4 * MAX_ACTION_BYTES + 6


# shlex.split is skipped when the action has no `"` or `\`; the result must be the same.
_NO_QUOTES = st.text(alphabet=st.sampled_from(list(" \t\n'#$|&;<>()*?~=%éa-\x0b")), max_size=20)


@given(_NO_QUOTES)
def test_the_fast_split_equals_shlex(action: str) -> None:
    try:
        expected: list[str] | None = shlex.split(f'{SHELL} -c "{action.strip()}"')
    except ValueError:
        expected = None
    assert action_argv(action) == expected

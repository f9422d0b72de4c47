"""Gold replay: executing the gold command and submitting must score 1.

NL2Bash (200 tasks: ~40 s on an idle 2-core machine, up to ~75 s under heavy load) needs
../shared/data; it is marked ``slow`` and ``shared_data`` (CI runs it; ``-m "not slow"`` skips it).
"""

from __future__ import annotations

import pytest

from envs.bash import BashEnv, open_bash_env

from .conftest import needs_sandbox, needs_shared_data

# Tasks whose gold output legitimately differs between two runs (upstream has the same races);
# for them only p1 and p2 are stable:
# * 30 (fs_1 #30) runs `find ${DIRECTORY} -type f` with DIRECTORY unset, i.e. over the whole root
#   including /proc, whose file count changes while find walks it;
# * 102 (fs_2 #42) prints `$(date)`: differs when a second boundary falls between the two runs;
# * 109 (fs_2 #49) is `curl ... -o file` without network: whether curl prints its progress meter
#   before failing depends on timing;
# * 198 (fs_4 #25) prints the 15-minute load average from `w`, which drifts between the runs.
NONDETERMINISTIC = {30, 102, 109, 198}


def _replay(env: BashEnv, i: int) -> tuple[float, dict]:
    env.reset(i)
    env.step(env.task(i).gold)
    _, reward, done, info = env.step("submit")
    assert done
    return reward, info


@needs_sandbox
def test_demo_gold_replay_scores_one_everywhere(demo_env: BashEnv) -> None:
    rewards = {i: _replay(demo_env, i)[0] for i in range(len(demo_env))}
    assert rewards == dict.fromkeys(rewards, 1.0)


@pytest.mark.slow
@pytest.mark.shared_data
@needs_sandbox
@needs_shared_data
def test_nl2bash_gold_replay() -> None:
    failures = {}
    with open_bash_env("nl2bash") as env:
        assert len(env) == 200
        for i in range(len(env)):
            reward, info = _replay(env, i)
            if i in NONDETERMINISTIC:
                assert info["reward"]["file_diff"] == info["reward"]["file_changes"] == 0.33
            elif reward != 1.0:
                failures[i] = (env.task(i).gold, info["reward"], info["diff_miss"], info["diff_extra"])
    scored_one = 200 - len(failures) - len(NONDETERMINISTIC)
    print(f"\nNL2Bash gold replay: {scored_one} of 200 scored 1; nondeterministic: {sorted(NONDETERMINISTIC)}")
    assert not failures

"""Gold replay: executing the gold command and submitting must score 1.

NL2Bash (200 tasks in 4 threads: ~20 s on this 2-core machine under load) needs ../shared/data;
it is marked ``slow`` and ``shared_data`` (CI runs it; ``-m "not slow"`` skips it).
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest
from stateflow.envs.bash import BashEnv, open_bash_env

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


def _replay_part(indices: list[int]) -> dict[int, tuple[float, dict, str]]:
    with open_bash_env("nl2bash") as env:
        assert len(env) == 200
        return {i: (*_replay(env, i), env.task(i).gold) for i in indices}


@pytest.mark.slow
@pytest.mark.shared_data
@needs_sandbox
@needs_shared_data
def test_nl2bash_gold_replay() -> None:
    # four environments in threads (as the runner uses them): ~3x faster than one, since a
    # sandboxed command mostly waits on namespace set-up and teardown rather than using CPU
    with ThreadPoolExecutor(max_workers=4) as pool:
        parts = pool.map(_replay_part, [list(range(k, 200, 4)) for k in range(4)])
    results = {i: r for part in parts for i, r in part.items()}
    assert sorted(results) == list(range(200))
    failures = {}
    for i, (reward, info, gold) in sorted(results.items()):
        if i in NONDETERMINISTIC:
            assert info["reward"]["file_diff"] == info["reward"]["file_changes"] == 0.33
        elif reward != 1.0:
            failures[i] = (gold, info["reward"], info["diff_miss"], info["diff_extra"])
    ones = sum(1 for reward, _, _ in results.values() if reward == 1.0)
    print(f"\nNL2Bash gold replay: {ones} of 200 scored 1; allowed to vary: {sorted(NONDETERMINISTIC)}")
    assert not failures

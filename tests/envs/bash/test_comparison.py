"""What the Bash reward compared, as a record keeps it: built from the reward's own values, and
bounded in size."""

from __future__ import annotations

import json

from stateflow.envs.bash.comparison import MAX_CHANGES, MAX_PATH, BashComparison
from stateflow.envs.bash.reward import bash_reward, content_targets


def _of(agent, gold, same, agent_obs="3\n", gold_obs="3\n") -> tuple[BashComparison, float]:
    scored = bash_reward(agent, gold, same, agent_obs, gold_obs)
    comparison = BashComparison.of(
        agent=agent,
        gold=gold,
        same=same,
        diff_score=scored.file_diff,
        content_score=scored.file_changes,
        answer_score=scored.answer_similarity_score,
        similarity=scored.similarity,
        corrupt_gold=False,
    )
    return comparison, scored.reward


def test_the_comparison_holds_what_the_reward_was_computed_from():
    agent = [("demo/a.txt", "??"), ("demo/b.txt", "M"), ("demo/c.txt", "D")]
    gold = [("demo/a.txt", "??"), ("demo/b.txt", "D"), ("demo/d.txt", "??")]
    same = {c: c[0] == "demo/a.txt" for c in content_targets(agent, gold)}
    c, reward = _of(agent, gold, same, agent_obs="done", gold_obs="all done")
    assert [(x.path, x.status) for x in c.missing] == [("demo/b.txt", "D"), ("demo/d.txt", "??")]
    assert [(x.path, x.status) for x in c.extra] == [("demo/b.txt", "M"), ("demo/c.txt", "D")]
    assert [(x.path, x.same) for x in c.content] == [("demo/a.txt", True)]
    assert 0 < c.similarity < 1 and c.diff_score < 0.33
    assert round(0.01 + c.diff_score + c.content_score + c.answer_score, 2) == round(reward, 2)


def test_a_command_that_touches_thousands_of_files_leaves_a_bounded_record():
    agent = [(f"demo/f{i:04d}", "D") for i in range(3 * MAX_CHANGES)]
    long_path = "demo/" + "x" * (2 * MAX_PATH)
    gold = [(long_path, "??")]
    c, _ = _of(agent, gold, {})
    assert len(c.agent_changes) == len(c.extra) == MAX_CHANGES
    assert [x.path for x in c.extra] == sorted(p for p, _ in agent)[:MAX_CHANGES]  # the first by path
    assert c.omitted == 2 * (3 * MAX_CHANGES - MAX_CHANGES)
    (cut,) = c.missing
    assert len(cut.path) == MAX_PATH and cut.path.endswith("…") and long_path.startswith(cut.path[:-1])
    assert len(json.dumps(c.model_dump())) < 20_000

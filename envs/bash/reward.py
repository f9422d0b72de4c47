"""The pure parts of InterCode's bash reward: ``0.01 + p1 + p2 + p3``.

* p1 (file-system diff): ``round(0.33 * (1 - erf(|miss| + |extra|)), 2)`` over the
  ``(path, status)`` pairs parsed from ``git status --short`` in the agent's and the gold's
  sandbox;
* p2 (changed content): share of the paths both sides added/left untracked/copied whose hash
  command output is identical, ``round(0.33 * same / n, 2)`` (0.33 when there are none);
* p3 (answer): ``round(0.33 * cosine, 2)`` of scikit-learn ``TfidfVectorizer()`` vectors fitted on
  the two observations; on any exception (empty vocabulary, a non-string) 1 if equal else 0.

The sum is computed in upstream's order, so a perfect answer is exactly ``1.0``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "CONTENT_CHECKED_STATUSES",
    "BashReward",
    "answer_similarity",
    "bash_reward",
    "content_score",
    "content_targets",
    "diff_score",
    "parse_git_status",
]

CONTENT_CHECKED_STATUSES = ("A", "??", "C")
Change = tuple[str, str]  # (path, status), upstream's order


def parse_git_status(output: str) -> list[Change]:
    """Pairs ``(path, status)`` from ``git status --short`` output, split on any whitespace.

    Like upstream, a path with a space (git prints it quoted) breaks the pairing. Upstream
    raises on an odd token count; we drop the unpaired last token instead.
    """
    tokens = output.split()
    return [(tokens[i + 1], tokens[i]) for i in range(0, len(tokens) - 1, 2)]


def diff_score(agent: Iterable[Change], gold: Iterable[Change]) -> tuple[float, list[Change], list[Change]]:
    """p1 and the ``(miss, extra)`` lists (``set(gold) - set(agent)``, ``set(agent) - set(gold)``)."""
    agent_set, gold_set = set(agent), set(gold)
    miss, extra = list(gold_set - agent_set), list(agent_set - gold_set)
    return round(0.33 * (1 - math.erf(len(miss) + len(extra))), 2), miss, extra


def content_targets(agent: Iterable[Change], gold: Iterable[Change]) -> list[Change]:
    """Changes both sides made whose status is one of :data:`CONTENT_CHECKED_STATUSES`."""
    return [c for c in set(agent) & set(gold) if c[1] in CONTENT_CHECKED_STATUSES]


def content_score(same: int, total: int) -> float:
    """p2 from the number of identical hashes among ``total`` checked paths."""
    return 0.33 if total == 0 else round(0.33 * (same / total), 2)


def answer_similarity(agent_obs: Any, gold_obs: Any) -> float:
    """TF-IDF cosine of the two observations, exactly as upstream computes it."""
    from sklearn.feature_extraction.text import TfidfVectorizer  # heavy import, needed only at scoring

    try:
        tfidf = TfidfVectorizer().fit_transform([agent_obs, gold_obs])
        return float((tfidf * tfidf.T).toarray()[0][1])
    except Exception:  # upstream's bare except: empty vocabulary, None, ...
        return 1.0 if agent_obs == gold_obs else 0.0


@dataclass
class BashReward:
    """A scored submission; ``info()`` gives upstream's info entries."""

    reward: float
    file_diff: float
    file_changes: float
    answer_similarity_score: float
    similarity: float
    miss: list[Change] = field(default_factory=list)
    extra: list[Change] = field(default_factory=list)
    same: dict[str, Any] | None = None

    def info(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "diff_miss": self.miss,
            "diff_extra": self.extra,
            "reward": {
                "file_diff": self.file_diff,
                "file_changes": self.file_changes,
                "answer_similarity": self.answer_similarity_score,
            },
            "answer_similarity": self.similarity,
        }
        if self.same is not None:
            out["diff_same"] = self.same
        return out


def bash_reward(
    agent_status: Sequence[Change],
    gold_status: Sequence[Change],
    same_hashes: dict[Change, bool],
    agent_obs: Any,
    gold_obs: Any,
) -> BashReward:
    """Combine the three parts.

    Args:
        agent_status, gold_status: parsed ``git status --short`` of each side.
        same_hashes: for every path of :func:`content_targets`, whether both hash outputs match.
        agent_obs: the agent's last observation; gold_obs: the gold command's output (None if corrupt).
    """
    p1, miss, extra = diff_score(agent_status, gold_status)
    targets = content_targets(agent_status, gold_status)
    same_count = sum(1 for t in targets if same_hashes[t])
    p2 = content_score(same_count, len(targets))
    similarity = answer_similarity(agent_obs, gold_obs)
    p3 = round(0.33 * similarity, 2)
    reward = 0.01
    reward += p1
    reward += p2
    reward += p3
    same = {"files": targets, "correct": same_count, "total": len(targets)} if targets else None
    return BashReward(reward, p1, p2, p3, similarity, miss, extra, same)

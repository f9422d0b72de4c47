"""What the Bash reward compared, as a typed, size-bounded record an episode keeps.

The reward (:mod:`stateflow.envs.bash.reward`) is three numbers; to read *why* a submission
scored 0.4 one needs what they were computed from: the ``git status`` changes of the agent's and
the gold's file systems, the changes only one side made, which changed files had the same
content on both sides, and how close the two outputs were. :class:`BashComparison` holds exactly
that, built from the same values the reward used (it never recomputes anything), so the episode
page shows the comparison the score came from.

Size: a command can touch thousands of files (``find / -delete``) and a path can be long, while a
result record should stay a few kilobytes. Each list keeps at most :data:`MAX_CHANGES` entries
(sorted, so the kept ones do not depend on set order) and each path at most :data:`MAX_PATH`
characters; ``omitted`` counts the entries left out.

>>> c = BashComparison.of(
...     agent=[("demo/a", "??")], gold=[("demo/a", "??"), ("demo/b", "D")],
...     same={("demo/a", "??"): True}, diff_score=0.0, content_score=0.33,
...     answer_score=0.33, similarity=1.0, corrupt_gold=False)
>>> [(m.path, m.status) for m in c.missing], c.extra, [x.same for x in c.content], c.omitted
([('demo/b', 'D')], [], [True], 0)
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from pydantic import BaseModel, ConfigDict

__all__ = ["MAX_CHANGES", "MAX_PATH", "BashComparison", "ContentCheck", "FileChange"]

MAX_CHANGES = 50
"""Entries kept per list of a :class:`BashComparison`."""
MAX_PATH = 300
"""Characters kept of a path (longer ones end in ``…``)."""

_Change = tuple[str, str]


class FileChange(BaseModel):
    """One line of ``git status --short``: a path and its two-letter status (``??``, ``M``, ``D`` ...)."""

    model_config = ConfigDict(frozen=True, strict=True, extra="allow")

    path: str
    status: str


class ContentCheck(FileChange):
    """A path both sides added (or left untracked, or copied): were the two files' hashes equal?"""

    same: bool


class BashComparison(BaseModel):
    """The inputs and parts of one Bash reward (see the module docstring).

    Attributes:
        agent_changes, gold_changes: the changes ``git status`` listed in the agent's and the
            gold's sandbox (upstream's p1 compares them as sets).
        missing: changes only the gold made; extra: changes only the agent made.
        content: the paths whose content was compared (p2), and whether it was the same.
        diff_score, content_score, answer_score: the reward's three parts (p1, p2, p3; the
            reward is ``0.01 + p1 + p2 + p3``).
        similarity: the TF-IDF cosine of the two outputs that p3 scales.
        corrupt_gold: the gold command's output could not be decoded (p3 then compares None).
        omitted: list entries left out by the size bound, over all lists.
    """

    model_config = ConfigDict(frozen=True, strict=True, extra="allow")

    agent_changes: list[FileChange]
    gold_changes: list[FileChange]
    missing: list[FileChange]
    extra: list[FileChange]
    content: list[ContentCheck]
    diff_score: float
    content_score: float
    answer_score: float
    similarity: float
    corrupt_gold: bool = False
    omitted: int = 0

    @classmethod
    def of(
        cls,
        *,
        agent: Iterable[_Change],
        gold: Iterable[_Change],
        same: Mapping[_Change, bool],
        diff_score: float,
        content_score: float,
        answer_score: float,
        similarity: float,
        corrupt_gold: bool,
    ) -> BashComparison:
        """The record of one scoring, from the values the reward was computed with.

        Args:
            agent, gold: the parsed ``git status`` of each side, as ``(path, status)``.
            same: for each content-checked change, whether both hashes matched.
            diff_score, content_score, answer_score, similarity: the parts as the reward computed them.
            corrupt_gold: the gold output was undecodable.
        """
        agent_set, gold_set = set(agent), set(gold)
        omitted = 0

        def bounded(changes: Iterable[_Change]) -> list[FileChange]:
            nonlocal omitted
            ordered = sorted(changes)
            omitted += max(0, len(ordered) - MAX_CHANGES)
            return [FileChange(path=_cut(p), status=_cut(s)) for p, s in ordered[:MAX_CHANGES]]

        checked = sorted(same.items())
        omitted += max(0, len(checked) - MAX_CHANGES)
        return cls(
            agent_changes=bounded(agent_set),
            gold_changes=bounded(gold_set),
            missing=bounded(gold_set - agent_set),
            extra=bounded(agent_set - gold_set),
            content=[ContentCheck(path=_cut(p), status=_cut(s), same=ok) for (p, s), ok in checked[:MAX_CHANGES]],
            diff_score=float(diff_score),
            content_score=float(content_score),
            answer_score=float(answer_score),
            similarity=float(similarity),
            corrupt_gold=corrupt_gold,
            omitted=omitted,
        )


def _cut(text: str) -> str:
    return text if len(text) <= MAX_PATH else text[: MAX_PATH - 1] + "…"

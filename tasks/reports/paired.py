"""Paired comparison of two methods on the tasks both finished: won / lost and the exact McNemar test.

Two success rates measured on different tasks, or on a sample of 100, differ by several points by
chance alone. What a change is worth shows on the tasks both runs finished: how many the
candidate solves that the baseline does not (*won*), how many the other way (*lost*), and how
likely a split at least that uneven is if neither is better: the exact two-sided McNemar test
(:func:`~stateflow.tasks.kit.stats.mcnemar_exact_p`), which is the binomial test of ``won`` out of the
discordant ``won + lost`` tasks at 1/2 (the same number as the exact sign test on those tasks,
which older reports called it; :func:`sign_test_p` keeps that name). Tasks both solve or both fail
carry no information about the difference.

:func:`compare` takes two lists of records (one method and one setting each, see
:func:`side_records`) and returns a :class:`PairedComparison`; ``stateflow compare`` prints it.

>>> sign_test_p(8, 2)
0.109375
>>> sign_test_p(0, 0)
1.0
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from stateflow.tasks.harness.records import LEGACY_IDENTITY
from stateflow.tasks.kit.episode_record import EpisodeRecord
from stateflow.tasks.kit.stats import Interval, mcnemar_exact_p, wilson_interval

from stateflow.errors import ConfigError

__all__ = ["HardnessSplit", "PairedComparison", "compare", "side_records", "sign_test_p"]


# Spider's hardness levels, easiest first (other labels follow, alphabetically).
_HARDNESS = ("easy", "medium", "hard", "extra")


def sign_test_p(won: int, lost: int) -> float:
    """The exact two-sided McNemar test on ``won`` / ``lost`` discordant tasks (the exact sign test on
    them): P(a split at least as uneven | no difference). See :func:`~stateflow.tasks.kit.stats.mcnemar_exact_p`.

    Raises:
        ValueError: a negative count.
    """
    return mcnemar_exact_p(won, lost)


@dataclass(frozen=True)
class HardnessSplit:
    """Success of both sides on the common tasks of one hardness level (``tasks`` of them)."""

    tasks: int
    baseline_solved: int
    candidate_solved: int


@dataclass(frozen=True)
class PairedComparison:
    """``candidate`` against ``baseline`` on the tasks both finished.

    Attributes:
        baseline, candidate: labels of the two sides (``method`` or ``path:method``).
        tasks: the common task indices, ascending.
        baseline_solved, candidate_solved: tasks each side solved among them.
        won: tasks the candidate solved and the baseline did not (their indices in ``won_tasks``).
        lost: the other way round (``lost_tasks``).
        same_reward: tasks on which both got exactly the same reward.
        only_baseline, only_candidate: tasks only one side finished (not compared).
        by_hardness: per hardness level, when the records have one (Spider's easy...extra).
        mean_*: per-task means over the common tasks, baseline then candidate.
    """

    baseline: str
    candidate: str
    tasks: tuple[int, ...]
    baseline_solved: int
    candidate_solved: int
    won_tasks: tuple[int, ...]
    lost_tasks: tuple[int, ...]
    same_reward: int
    only_baseline: int
    only_candidate: int
    by_hardness: dict[str, HardnessSplit] = field(default_factory=dict)
    mean_prompt_tokens: tuple[float, float] = (0.0, 0.0)
    mean_completion_tokens: tuple[float, float] = (0.0, 0.0)
    mean_wall_s: tuple[float, float] = (0.0, 0.0)

    @property
    def won(self) -> int:
        return len(self.won_tasks)

    @property
    def lost(self) -> int:
        return len(self.lost_tasks)

    @property
    def p_value(self) -> float:
        """The exact two-sided McNemar test on ``won`` / ``lost`` (:func:`sign_test_p`)."""
        return sign_test_p(self.won, self.lost)

    def interval(self, side: str) -> Interval | None:
        """The 95 % Wilson interval of :meth:`success` (``None`` without common tasks)."""
        solved = self.baseline_solved if side == "baseline" else self.candidate_solved
        return wilson_interval(solved, len(self.tasks)) if self.tasks else None

    def success(self, side: str) -> float:
        """Success % of ``"baseline"`` or ``"candidate"`` on the common tasks."""
        solved = self.baseline_solved if side == "baseline" else self.candidate_solved
        return 100.0 * solved / len(self.tasks) if self.tasks else 0.0


def side_records(
    records: Iterable[EpisodeRecord], method: str | None, where: str, setting: str | None = None
) -> list[EpisodeRecord]:
    """The records of one side: ``method`` (or the only method present), one setting, one record per task.

    Args:
        records: newest record per episode (as :func:`~stateflow.tasks.reports.metrics.load_results` gives).
        method: the method to take; ``None`` when the records hold exactly one.
        where: the side as the user wrote it, for error messages.
        setting: the start of an episode-identity digest: keep only that setting's records
            (an archive keeps the records of a method's earlier settings after a re-run).

    Raises:
        ConfigError: no records, an unknown method (the error lists the ones present), no method
            named while several are present, a ``setting`` that matches none or several of the
            method's settings, or records of one method made with several settings and no
            ``setting`` chosen (a task would count twice; the error lists each setting).
    """
    records = list(records)
    methods = sorted({r.method for r in records})
    if not records:
        raise ConfigError(f"{where}: no episodes recorded")
    if method is None:
        if len(methods) > 1:
            raise ConfigError(f"{where} holds {len(methods)} methods ({', '.join(methods)}); name one as PATH:METHOD")
        method = methods[0]
    mine = [r for r in records if r.method == method]
    if not mine:
        raise ConfigError(f"{where}: no episodes of method {method!r}; recorded: {', '.join(methods)}")
    by_setting: dict[str, list[EpisodeRecord]] = {}
    for r in mine:
        by_setting.setdefault(r.identity_digest or LEGACY_IDENTITY, []).append(r)
    if setting is not None:
        chosen = [d for d in by_setting if d.startswith(setting)]
        if len(chosen) != 1:
            found = "matches none" if not chosen else f"matches {len(chosen)}"
            raise ConfigError(
                f"{where}: setting {setting!r} {found} of the settings of method {method!r}:{_settings(by_setting)}"
            )
        return by_setting[chosen[0]]
    if len(by_setting) > 1:
        raise ConfigError(
            f"{where}: method {method!r} was recorded with {len(by_setting)} settings (episode identities); "
            f"name one as PATH:METHOD@SETTING (its first characters will do):{_settings(by_setting)}"
        )
    return mine


def _settings(by_setting: dict[str, list[EpisodeRecord]]) -> str:
    """One line per setting, newest first: digest, record count, the last episode's end."""
    last = {digest: max(r.finished_at for r in rs) for digest, rs in by_setting.items()}  # "" sorts oldest
    return "".join(
        f"\n  {digest}: {len(by_setting[digest])} episode(s), last finished {last[digest] or '?'}"
        for digest in sorted(last, key=lambda d: last[d], reverse=True)
    )


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else 0.0


def compare(
    baseline: Sequence[EpisodeRecord],
    candidate: Sequence[EpisodeRecord],
    *,
    labels: tuple[str, str] = ("baseline", "candidate"),
) -> PairedComparison:
    """Compare ``candidate`` with ``baseline`` on the tasks both have a record for.

    Each side must hold one record per task (:func:`side_records` makes sure). Tasks are matched
    by benchmark, dataset and task index, so sides of different benchmarks share no task.
    """
    a = {(r.benchmark, r.dataset, r.task): r for r in baseline}
    b = {(r.benchmark, r.dataset, r.task): r for r in candidate}
    common = sorted(a.keys() & b.keys(), key=lambda k: (k[0], k[1], k[2]))
    won = tuple(k[2] for k in common if b[k].success and not a[k].success)
    lost = tuple(k[2] for k in common if a[k].success and not b[k].success)
    by_hardness: dict[str, HardnessSplit] = {}
    levels = {a[k].hardness for k in common if a[k].hardness}
    for level in sorted(levels, key=lambda h: (_HARDNESS.index(h) if h in _HARDNESS else len(_HARDNESS), h)):
        keys = [k for k in common if a[k].hardness == level]
        by_hardness[level] = HardnessSplit(len(keys), sum(a[k].success for k in keys), sum(b[k].success for k in keys))
    pair = [(a[k], b[k]) for k in common]
    return PairedComparison(
        baseline=labels[0],
        candidate=labels[1],
        tasks=tuple(k[2] for k in common),
        baseline_solved=sum(x.success for x, _ in pair),
        candidate_solved=sum(y.success for _, y in pair),
        won_tasks=won,
        lost_tasks=lost,
        same_reward=sum(x.reward_raw == y.reward_raw for x, y in pair),
        only_baseline=len(a.keys() - b.keys()),
        only_candidate=len(b.keys() - a.keys()),
        by_hardness=by_hardness,
        mean_prompt_tokens=(_mean([x.prompt_tokens for x, _ in pair]), _mean([y.prompt_tokens for _, y in pair])),
        mean_completion_tokens=(
            _mean([x.completion_tokens for x, _ in pair]),
            _mean([y.completion_tokens for _, y in pair]),
        ),
        mean_wall_s=(_mean([x.wall_s for x, _ in pair]), _mean([y.wall_s for _, y in pair])),
    )

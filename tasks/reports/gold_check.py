"""Golds that do not reproduce: the oracle replayed K times in fresh environments.

The oracle policy (``stateflow run --policy oracle``) replays each task's gold answer; it should
score 1 every time. A gold whose reward changes from one fresh environment to the next (NL2Bash
``fs_1`` task 30 scores 0.92 in about half of fresh replays: its ``find`` runs with an unset
variable and walks ``/proc``) makes every method's score on that task partly luck. So
``stateflow run ... --policy oracle --repeats K`` replays every gold K times, each replay in
environments opened for it alone (:func:`~stateflow.tasks.harness.repeats.run_repeats` runs one
:func:`~stateflow.tasks.harness.runner.evaluate` per replay), and :func:`unstable_golds` lists the tasks
whose gold reward differs between replays. Archived (``stateflow archive ... --to
docs/data/gold/<benchmark>.jsonl``), those records let the paper report mark such tasks
(:func:`gold_note`): they stay counted as recorded, and the note names them and their rewards.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from stateflow.tasks.harness.records import latest_records
from stateflow.tasks.kit.episode_record import EpisodeRecord

__all__ = ["GoldReplay", "gold_note", "gold_replays", "unstable_golds"]


@dataclass(frozen=True)
class GoldReplay:
    """One task's gold replayed ``len(rewards)`` times (rewards in replay order)."""

    benchmark: str
    dataset: str
    task: int
    context: str | None
    rewards: tuple[float, ...]

    @property
    def stable(self) -> bool:
        return len(set(self.rewards)) == 1

    def text(self) -> str:
        """``task 30 (fs_1): rewards 1.00, 0.92``."""
        where = f" ({self.context})" if self.context else ""
        return f"task {self.task}{where}: rewards {', '.join(f'{x:.2f}' for x in self.rewards)}"


def gold_replays(records: Iterable[EpisodeRecord]) -> list[GoldReplay]:
    """Every task the oracle replayed more than once (records of ``--policy oracle --repeats K``).

    Replays of several oracle methods of one task pool (the gold is the same); records without a
    ``repeat`` identity field, or of a model policy, are ignored.
    """
    rewards: dict[tuple[str, str, int], dict[tuple[str, int], float]] = defaultdict(dict)
    context: dict[tuple[str, str, int], str | None] = {}
    for r in latest_records(records):
        ident = r.identity or {}
        if ident.get("policy") != "oracle" or not isinstance(ident.get("repeat"), int):
            continue
        key = (r.benchmark, r.dataset, r.task)
        rewards[key][(r.method, ident["repeat"])] = r.reward_raw
        context[key] = r.context
    return [
        GoldReplay(b, d, t, context[(b, d, t)], tuple(v for _, v in sorted(runs.items())))
        for (b, d, t), runs in sorted(rewards.items())
        if len(runs) > 1
    ]


def unstable_golds(records: Iterable[EpisodeRecord]) -> list[GoldReplay]:
    """The tasks whose gold reward differs between replays."""
    return [g for g in gold_replays(records) if not g.stable]


def gold_note(replays: Sequence[GoldReplay], benchmark: str, dataset: str, tasks: Iterable[int]) -> str:
    """One paragraph for a report of ``benchmark``/``dataset`` over ``tasks``: which of them have a
    gold that did not reproduce and how they were counted; "" when no replay covers these tasks."""
    mine = {g.task: g for g in replays if g.benchmark == benchmark and g.dataset == dataset}
    wanted = sorted(set(tasks))
    checked = [t for t in wanted if t in mine]
    if not checked:
        return ""
    bad = [mine[t] for t in checked if not mine[t].stable]
    runs = sorted({len(mine[t].rewards) for t in checked})
    times = "/".join(map(str, runs))
    if not bad:
        return (
            f"Gold check: every gold of the {len(checked)} task(s) checked reproduced in {times} fresh oracle replays."
        )
    return (
        f"Gold check: of the {len(checked)} task(s) replayed {times} times in fresh environments, "
        f"{len(bad)} scored differently between replays ({'; '.join(g.text() for g in bad)}). They are counted "
        "as recorded in every row (a method's success there is partly luck); the tables do not drop them."
    )

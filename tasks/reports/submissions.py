"""Whether a method's episodes ever submit an answer, and the warning when they never do.

A flow that never reaches the environment's submit action is scored on the last observation
and recorded as status ``ok``, reward 0: a wiring mistake in a new flow looks like a weak model.
``stateflow run`` and ``stateflow report`` print :func:`never_submitted_warnings` so it does not.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from stateflow.tasks.harness.records import latest_records
from stateflow.tasks.kit.episode_record import EpisodeRecord

__all__ = ["NeverSubmitted", "never_submitted", "never_submitted_warnings"]


@dataclass(frozen=True)
class NeverSubmitted:
    """A (benchmark, method, models) cell whose finished episodes all ended without a submit.

    Attributes:
        benchmark: the benchmark's name.
        method: the method (a built-in name or ``module:attribute``).
        models: the models label of the records.
        episodes: how many finished (status ``ok``) episodes the cell has.
    """

    benchmark: str
    method: str
    models: str
    episodes: int

    def warning(self) -> str:
        """One line saying what happened and how to check the flow's wiring without a model."""
        return (
            f"method {self.method!r} ({self.benchmark}, models {self.models}) never submitted an answer in "
            f"{self.episodes} finished episode(s): each was scored on its last observation. If its flow cannot "
            f"reach the submit action, check the wiring without a model: "
            f"stateflow run {self.benchmark} --method {self.method} --policy oracle --tasks 0:3 --out runs/wiring"
        )


def never_submitted(records: Iterable[EpisodeRecord]) -> list[NeverSubmitted]:
    """The cells whose finished episodes (newest record per episode) include no submit.

    Errored and timed-out episodes are left out: they are reported as errors already, and a
    cell with no finished episode is not flagged.
    """
    cells: dict[tuple[str, str, str], list[bool]] = {}
    for r in latest_records(records):
        if r.status == "ok":
            cells.setdefault((r.benchmark, r.method, r.models), []).append(r.submitted)
    return [NeverSubmitted(b, m, mo, len(s)) for (b, m, mo), s in sorted(cells.items()) if not any(s)]


def never_submitted_warnings(records: Iterable[EpisodeRecord]) -> list[str]:
    """:meth:`NeverSubmitted.warning` for every cell :func:`never_submitted` finds."""
    return [cell.warning() for cell in never_submitted(records)]

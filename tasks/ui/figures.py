"""What the overview sums: each episode's few figures, and the running sums of an overview row.

:class:`EpisodeFigures` is the part of a record the overview needs; :class:`CellTotals` adds them
up per row (benchmark, method, models and identity: :data:`CellKey`). The summary
(:mod:`stateflow.tasks.ui.summary`) keeps both on disk, so a first page reads sums instead of
records; :func:`stateflow.tasks.ui.overview.cells_of_totals` turns sums into the overview's rows.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from stateflow.tasks.harness.records import LEGACY_IDENTITY
from stateflow.tasks.kit.episode_record import EpisodeRecord

__all__ = ["CellKey", "CellTotals", "EpisodeFigures", "cell_key", "totals_of"]


@dataclass(frozen=True, slots=True)
class EpisodeFigures:
    """What the overview sums of one episode (its record without everything else).

    :mod:`stateflow.tasks.ui.summary` keeps these on disk, so a first page reads them instead of
    10,000 records. ``state_tokens`` is prompt + completion tokens per state, in the record's order.
    """

    identity_digest: str | None
    task: int
    benchmark: str
    method: str
    models: str
    success: bool
    reward_raw: float
    prompt_tokens: int
    completion_tokens: int
    cached_tokens: int
    cost: float
    wall_s: float
    ok: bool
    path: tuple[str, ...]
    state_tokens: tuple[tuple[str, float], ...]

    @property
    def key_digest(self) -> str:
        """The digest part of the episode's key (:func:`stateflow.tasks.harness.records.record_key`)."""
        return self.identity_digest or f"{LEGACY_IDENTITY}:{self.benchmark}/{self.method}/{self.models}"

    @classmethod
    def of(cls, r: EpisodeRecord) -> EpisodeFigures:
        return cls(
            r.identity_digest,
            r.task,
            r.benchmark,
            r.method,
            r.models,
            r.success,
            r.reward_raw,
            r.prompt_tokens,
            r.completion_tokens,
            r.cached_tokens,
            r.cost,
            r.wall_s,
            r.status == "ok",
            tuple(r.path),
            tuple((s, _tokens(u)) for s, u in r.usage_by_state.items()),
        )


def _tokens(usage: Any) -> float:
    """Prompt + completion tokens of a usage entry (a record's trace is data: non-numbers count 0)."""
    if not isinstance(usage, dict):
        return 0.0
    vals = (usage.get("prompt_tokens", 0), usage.get("completion_tokens", 0))
    return float(sum(v for v in vals if isinstance(v, int | float) and not isinstance(v, bool)))


CellKey = tuple[str, str, str, str]
"""benchmark, method, models, identity digest (``""`` for records without one): one overview row."""


@dataclass
class CellTotals:
    """Running sums of one overview row's episodes (what a persisted summary keeps per row)."""

    key_digest: str
    n: int = 0
    solved: int = 0
    reward: float = 0.0
    prompt_tokens: float = 0.0
    completion_tokens: float = 0.0
    cached_tokens: float = 0.0
    cost: float = 0.0
    seconds: float = 0.0
    errored: int = 0
    states: dict[str, float] = field(default_factory=dict)

    def add(self, f: EpisodeFigures) -> None:
        self.n += 1
        self.solved += f.success
        self.reward += max(f.reward_raw, 0.0)
        self.prompt_tokens += f.prompt_tokens
        self.completion_tokens += f.completion_tokens
        self.cached_tokens += f.cached_tokens
        self.cost += f.cost
        self.seconds += f.wall_s
        self.errored += not f.ok
        for state in f.path:
            self.states.setdefault(state, 0.0)
        for state, tokens in f.state_tokens:
            self.states[state] = self.states.get(state, 0.0) + tokens

    def remove(self, f: EpisodeFigures) -> None:
        """Take an episode's figures off the sums (a re-run replaced its record); a state no
        longer holding tokens stays listed (the overview shows only states with tokens)."""
        self.n -= 1
        self.solved -= f.success
        self.reward -= max(f.reward_raw, 0.0)
        self.prompt_tokens -= f.prompt_tokens
        self.completion_tokens -= f.completion_tokens
        self.cached_tokens -= f.cached_tokens
        self.cost -= f.cost
        self.seconds -= f.wall_s
        self.errored -= not f.ok
        for state, tokens in f.state_tokens:
            self.states[state] = self.states.get(state, 0.0) - tokens

    def merge(self, other: CellTotals) -> None:
        """Add another source's sums of the same row (their episodes are distinct)."""
        for name in ("n", "solved", "reward", "prompt_tokens", "completion_tokens", "cached_tokens", "cost"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.seconds += other.seconds
        self.errored += other.errored
        for state, tokens in other.states.items():
            self.states[state] = self.states.get(state, 0.0) + tokens


def cell_key(f: EpisodeFigures) -> CellKey:
    return f.benchmark, f.method, f.models, f.identity_digest or ""


def totals_of(figures: Iterable[EpisodeFigures]) -> dict[CellKey, CellTotals]:
    """Each overview row's sums over ``figures`` (newest per episode, in the order they were written)."""
    out: dict[CellKey, CellTotals] = {}
    for f in figures:
        key = cell_key(f)
        totals = out.get(key)
        if totals is None:
            totals = out[key] = CellTotals(f.key_digest)
        totals.add(f)
    return out

"""What a search found: one record per candidate, per rung, and the whole summary (``OUT/optimize.json``)."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field

__all__ = ["CandidateResult", "OptimizeSummary", "RewriteResult", "RungLog"]


@dataclass
class CandidateResult:
    """One candidate as far as the search took it (rates in %, costs per task)."""

    key: str
    method: str
    models: str
    n: int = 0
    solved: int = 0
    success: float = 0.0
    ci_low: float = 0.0
    ci_high: float = 0.0
    prompt_tokens: float = 0.0
    seconds: float = 0.0
    model_seconds: float = 0.0
    cost: float = 0.0
    spent: float = 0.0
    rung: int = -1
    dropped: str = ""
    on_front: bool = False


@dataclass
class RungLog:
    """A rung: how many tasks, and each candidate's verdict."""

    tasks: int
    verdicts: dict[str, str] = field(default_factory=dict)


@dataclass
class RewriteResult:
    """The pick's state rewritten from its failures, run on the pick's tasks.

    Attributes:
        key: the rewritten candidate's key; state, sha256, text: what was rewritten into what.
        won, lost: tasks only the rewritten flow solved, and only the pick; p_value: exact McNemar.
        adopted: it solved more than the pick, so it became the pick (and went to held-out).
    """

    key: str
    state: str
    sha256: str
    text: str
    won: int
    lost: int
    p_value: float
    adopted: bool


@dataclass
class OptimizeSummary:
    """What a search found and spent (``OUT/optimize.json``).

    Attributes:
        spent: budget spent by the search, in ``unit``; exhaustive: what running every candidate
            on the whole pool would cost at each one's measured cost per episode.
        stop: ``complete``, ``budget`` or ``interrupted``.
        pick: the chosen candidate's key; heldout: its held-out result (``None``: not run).
    """

    space: str
    benchmark: str
    unit: str
    budget: float
    pool: int
    candidates: list[CandidateResult]
    rungs: list[RungLog]
    spent: float
    exhaustive: float
    stop: str
    pick: str | None = None
    heldout: CandidateResult | None = None
    skipped_sets: int = 0
    duplicates: int = 0
    rewrite: RewriteResult | None = None

    @property
    def ratio(self) -> float:
        """Spent over the exhaustive cost (0 when nothing was measured)."""
        return self.spent / self.exhaustive if self.exhaustive else 0.0

    def to_json(self) -> str:
        return json.dumps(asdict(self) | {"ratio": self.ratio}, indent=2)

    @classmethod
    def from_json(cls, text: str) -> OptimizeSummary:
        """The summary :meth:`to_json` wrote (``ratio`` is recomputed, not read).

        Raises:
            ValueError: not JSON, or not a summary (a missing or unknown field, named).
        """
        try:
            data = json.loads(text)
            data.pop("ratio", None)
            data["candidates"] = [CandidateResult(**c) for c in data["candidates"]]
            data["rungs"] = [RungLog(**r) for r in data["rungs"]]
            if data.get("heldout") is not None:
                data["heldout"] = CandidateResult(**data["heldout"])
            if data.get("rewrite") is not None:
                data["rewrite"] = RewriteResult(**data["rewrite"])
            return cls(**data)
        except (json.JSONDecodeError, KeyError, TypeError, AttributeError) as err:
            raise ValueError(f"not an optimize summary: {type(err).__name__}: {err}") from None

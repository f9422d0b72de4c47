"""The paper's metrics over episode records.

Per group of records (e.g. one method with one model on one benchmark):

* ``sr``: success rate in % (reward == 1);
* ``reward``: mean reward clipped at 0 (as the reference runner), ``reward_raw`` unclipped;
* ``turns``: mean environment interactions per task;
* ``error_rate``: % of actions that failed (not executed, or malformed replies);
* ``cost``: total dollars; ``p_tokens`` / ``c_tokens``: mean prompt / completion tokens per task;
* ``errored``: episodes that ended in an exception (model unreachable, timeout...).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["GROUP_KEYS", "Row", "load_results", "summarize", "tokens_by_state"]

GROUP_KEYS = ("benchmark", "method", "models")


@dataclass(frozen=True)
class Row:
    """Metrics of one group."""

    group: tuple[str, ...]
    n: int
    sr: float
    reward: float
    reward_raw: float
    turns: float
    error_rate: float
    cost: float
    p_tokens: float
    c_tokens: float
    errored: int

    def as_dict(self, keys: Sequence[str]) -> dict[str, Any]:
        return dict(zip(keys, self.group, strict=True)) | {
            "n": self.n,
            "sr": self.sr,
            "reward": self.reward,
            "reward_raw": self.reward_raw,
            "turns": self.turns,
            "error_rate": self.error_rate,
            "cost": self.cost,
            "p_tokens": self.p_tokens,
            "c_tokens": self.c_tokens,
            "errored": self.errored,
        }


def _row(group: tuple[str, ...], rs: list[dict[str, Any]]) -> Row:
    n = len(rs)
    actions = sum(r["turns"] for r in rs)
    failed = sum(r["failed_actions"] for r in rs)
    return Row(
        group=group,
        n=n,
        sr=100.0 * sum(bool(r["success"]) for r in rs) / n,
        reward=sum(r["reward"] for r in rs) / n,
        reward_raw=sum(r["reward_raw"] for r in rs) / n,
        turns=actions / n,
        error_rate=100.0 * failed / actions if actions else 0.0,
        cost=sum(r["cost"] for r in rs),
        p_tokens=sum(r["prompt_tokens"] for r in rs) / n,
        c_tokens=sum(r["completion_tokens"] for r in rs) / n,
        errored=sum(r["status"] != "ok" for r in rs),
    )


def summarize(records: Iterable[dict[str, Any]], keys: Sequence[str] = GROUP_KEYS) -> list[Row]:
    """One :class:`Row` per distinct value of ``keys`` (e.g. add ``"hardness"``), sorted."""
    groups: dict[tuple[str, ...], list[dict[str, Any]]] = defaultdict(list)
    for r in records:
        groups[tuple(str(r.get(k)) for k in keys)].append(r)
    return [_row(g, rs) for g, rs in sorted(groups.items())]


def tokens_by_state(
    records: Iterable[dict[str, Any]], keys: Sequence[str] = GROUP_KEYS
) -> dict[tuple[str, ...], dict[str, dict[str, float]]]:
    """Mean prompt and completion tokens per task, per state, per group."""
    sums: dict[tuple[str, ...], dict[str, list[float]]] = defaultdict(lambda: defaultdict(lambda: [0.0, 0.0]))
    counts: dict[tuple[str, ...], int] = defaultdict(int)
    for r in records:
        g = tuple(str(r.get(k)) for k in keys)
        counts[g] += 1
        for state, u in r.get("usage_by_state", {}).items():
            sums[g][state][0] += u["prompt_tokens"]
            sums[g][state][1] += u["completion_tokens"]
    return {
        g: {s: {"prompt": p / counts[g], "completion": c / counts[g]} for s, (p, c) in states.items()}
        for g, states in sums.items()
    }


def load_results(dirs: Iterable[str]) -> list[dict[str, Any]]:
    """All records of ``DIR/results.jsonl`` for each directory (or a results file given directly).

    Raises:
        FileNotFoundError: a directory holds no results file.
    """
    from pathlib import Path

    from tasks.records import ResultsFile

    out: list[dict[str, Any]] = []
    for d in dirs:
        p = Path(d)
        path = p if p.is_file() else p / "results.jsonl"
        if not path.exists():
            raise FileNotFoundError(f"{path}: no results here (run `stateflow run ... --out {d}` first)")
        out.extend(ResultsFile(path).load().records)
    return out

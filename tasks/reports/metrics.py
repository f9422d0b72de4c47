"""The paper's metrics over episode records.

Per group of records (e.g. one method with one model on one benchmark):

* ``sr``: success rate in % (reward == 1), with ``sr_ci``, its 95 % Wilson interval
  (:func:`~stateflow.tasks.kit.stats.wilson_interval`) over the group's tasks;
* ``reward``: mean of ``reward_raw`` clipped at 0 (as the reference runner), ``reward_raw``
  the unclipped mean; both are computed here from each record's ``reward_raw``;
* ``turns``: mean environment interactions per task;
* ``error_rate``: % of actions that failed (not executed, or malformed replies);
* ``cost``: total dollars; ``p_tokens`` / ``c_tokens``: mean prompt / completion tokens per task;
* ``errored``: episodes that ended in an exception (model unreachable, timeout...);
* ``eval_share``: prompt tokens the model server evaluated divided by the prompt tokens sent,
  from the server's own counts (``usage.prompt_tokens_details.cached_tokens``: tokens whose
  state came from its prompt cache); 1 means no reuse, lower is better. ``None`` for a group that
  sent no prompt tokens.

Each episode counts once: only the newest record per identity and task is used (the results
file is append-only, see :func:`stateflow.tasks.harness.records.latest_records`). Records of one group made with
different settings (another dataset, turn limit, flow...) form separate rows; their ``setting``
names the identity fields that tell them apart.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from stateflow.tasks.harness.records import latest_records
from stateflow.tasks.kit.episode_record import EpisodeRecord
from stateflow.tasks.kit.stats import Interval, wilson_interval

__all__ = [
    "GROUP_KEYS",
    "Row",
    "evaluated_share",
    "group_records",
    "load_results",
    "setting_labels",
    "summarize",
    "tokens_by_state",
]

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
    setting: str = ""
    solved: int = 0
    eval_share: float | None = None

    @property
    def sr_ci(self) -> Interval:
        """The 95 % Wilson interval of ``sr`` (``solved`` of ``n``)."""
        return wilson_interval(self.solved, self.n)

    def as_dict(self, keys: Sequence[str]) -> dict[str, Any]:
        """The row as a flat dict: the group keys, ``setting``, then the metrics."""
        return dict(zip(keys, self.group, strict=True)) | {
            "setting": self.setting,
            "n": self.n,
            "sr": self.sr,
            "sr_low": self.sr_ci.low,
            "sr_high": self.sr_ci.high,
            "reward": self.reward,
            "reward_raw": self.reward_raw,
            "turns": self.turns,
            "error_rate": self.error_rate,
            "cost": self.cost,
            "p_tokens": self.p_tokens,
            "c_tokens": self.c_tokens,
            "errored": self.errored,
            "eval_share": self.eval_share,
        }


def _row(group: tuple[str, ...], rs: list[EpisodeRecord], setting: str) -> Row:
    n = len(rs)
    actions = sum(r.turns for r in rs)
    failed = sum(r.failed_actions for r in rs)
    return Row(
        eval_share=evaluated_share(rs),
        group=group,
        n=n,
        sr=100.0 * sum(r.success for r in rs) / n,
        solved=sum(r.success for r in rs),
        reward=sum(max(r.reward_raw, 0.0) for r in rs) / n,
        reward_raw=sum(r.reward_raw for r in rs) / n,
        turns=actions / n,
        error_rate=100.0 * failed / actions if actions else 0.0,
        cost=sum(r.cost for r in rs),
        p_tokens=sum(r.prompt_tokens for r in rs) / n,
        c_tokens=sum(r.completion_tokens for r in rs) / n,
        errored=sum(r.status != "ok" for r in rs),
        setting=setting,
    )


def evaluated_share(records: Iterable[EpisodeRecord]) -> float | None:
    """Evaluated ÷ sent prompt tokens over ``records`` (``None`` when they sent none).

    Evaluated tokens are the sent ones minus those the server reported as cached
    (``cached_tokens``); a server that reports no cache counts every token as evaluated.
    """
    sent = cached = 0
    for r in records:
        sent += r.prompt_tokens
        cached += min(r.cached_tokens, r.prompt_tokens)  # a hostile server cannot push the share below 0
    return (sent - cached) / sent if sent else None


def _identity(r: EpisodeRecord) -> dict[str, Any]:
    return r.identity or {}


def _short(field: str, value: Any) -> str:
    text = str(value)
    return text[:8] if field.endswith("_sha256") else text


def setting_labels(identities: Sequence[dict[str, Any]]) -> list[str]:
    """A short label per identity naming only the fields that differ among them.

    ``[{"max_turns": 10, ...}, {"max_turns": 3, ...}]`` gives ``["max_turns=10", "max_turns=3"]``;
    a single identity (nothing to tell apart) gives ``[""]``. An empty identity (records from
    before identities were stored) is labelled ``"no identity"``, and a lone identity next to
    it ``"with identity"``.
    """
    if len(identities) < 2:
        return [""] * len(identities)
    known = [ident for ident in identities if ident]
    fields = sorted({k for ident in known for k in ident})
    varying = [f for f in fields if len({repr(ident.get(f)) for ident in known}) > 1]
    return [
        "no identity"
        if not ident
        else (", ".join(f"{f}={_short(f, ident.get(f))}" for f in varying) or "with identity")
        for ident in identities
    ]


def group_records(
    records: Iterable[EpisodeRecord], keys: Sequence[str]
) -> list[tuple[tuple[str, ...], str, list[EpisodeRecord]]]:
    """``(group, setting label, records)`` per group and identity, newest record per episode.

    ``keys`` name record fields (e.g. ``method``, ``hardness``); a field a record lacks groups as ``"None"``.
    """
    groups: dict[tuple[str, ...], dict[str, list[EpisodeRecord]]] = defaultdict(lambda: defaultdict(list))
    for r in latest_records(records):
        digest = r.identity_digest or ""
        groups[tuple(str(getattr(r, k, None)) for k in keys)][digest].append(r)
    out: list[tuple[tuple[str, ...], str, list[EpisodeRecord]]] = []
    for g, by_identity in sorted(groups.items()):
        digests = sorted(by_identity)
        labels = setting_labels([_identity(by_identity[d][0]) for d in digests])
        out += sorted(
            ((g, label, by_identity[d]) for d, label in zip(digests, labels, strict=True)), key=lambda t: t[1]
        )
    return out


def summarize(records: Iterable[EpisodeRecord], keys: Sequence[str] = GROUP_KEYS) -> list[Row]:
    """One :class:`Row` per distinct value of ``keys`` (e.g. add ``"hardness"``) and setting, sorted.

    Only the newest record of each identity and task counts. Rows of one group made with
    different identities are kept apart and labelled by :func:`setting_labels`.
    """
    return [_row(g, rs, label) for g, label, rs in group_records(records, keys)]


def tokens_by_state(
    records: Iterable[EpisodeRecord], keys: Sequence[str] = GROUP_KEYS
) -> dict[tuple[str, ...], dict[str, dict[str, float]]]:
    """Mean prompt and completion tokens per task, per state, per group.

    A group made with several settings yields one entry per setting, keyed by the group's
    values plus the setting label (see :func:`summarize`).
    """
    out: dict[tuple[str, ...], dict[str, dict[str, float]]] = {}
    for g, label, rs in group_records(records, keys):
        sums: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0])
        for r in rs:
            for state, u in r.usage_by_state.items():
                sums[state][0] += u["prompt_tokens"]
                sums[state][1] += u["completion_tokens"]
        if sums:
            n = len(rs)
            out[(*g, label) if label else g] = {s: {"prompt": p / n, "completion": c / n} for s, (p, c) in sums.items()}
    return out


def load_results(dirs: Iterable[str]) -> list[EpisodeRecord]:
    """The records of ``DIR/results.jsonl`` for each directory (or a results file given directly).

    Only the newest record of each identity and task is returned (re-run episodes replace their
    older records), in the order they were written.

    Raises:
        FileNotFoundError: a directory holds no results file.
        InvalidRecordError: a line is not a valid record (names the file, line and field).
    """
    from pathlib import Path

    from stateflow.tasks.harness.records import ResultsFile, check_results_file

    out: list[EpisodeRecord] = []
    for d in dirs:
        p = Path(d)
        path = p if p.is_file() else p / "results.jsonl"
        if not path.exists():
            raise FileNotFoundError(f"{path}: no results here (run `stateflow run ... --out {d}` first)")
        check_results_file(path)
        out.extend(ResultsFile(path).load().records)
    return latest_records(out)

"""A spec checked on archived runs: how often each method's recorded paths break it (issue 60).

Each run record (a JSON object per line, as ``stateflow run`` writes ``results.jsonl``) keeps the
path of states it visited (``"path"``), how it stopped (``"stop_reason"``) and which method ran it
(``"method"``). :func:`check_paths` reads every path with the spec's automaton, as
:func:`~stateflow.spec.verify.verify` reads a flow's paths: a path breaks the spec when the
automaton cannot read one of its states, or when the run ended in a final state
(``stop_reason == "final"``) where the spec may not stop. A run stopped otherwise (the bound, an
error) only has to be a valid prefix. A record with a state the spec neither declares nor maps
is *not applicable* (another method's states), counted apart, never read as a violation.

Example:
    >>> from stateflow.spec import AgentSpec
    >>> spec = AgentSpec.from_text("(define no-end-from-a (:states A B End) (:behavior (until (or A B) (next B End))))")
    >>> runs = [PathRecord("m", ("A", "B", "End"), True), PathRecord("m", ("A", "End"), True),
    ...         PathRecord("m", ("A", "A"), False), PathRecord("other", ("X", "End"), True)]
    >>> [(r.group, r.checked, r.violations, r.skipped) for r in check_paths(runs, spec)]
    [('m', 3, 1, 0), ('other', 0, 0, 1)]
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from stateflow.errors import ConfigError
from stateflow.spec.compiled import AgentSpec

__all__ = ["PathCheck", "PathRecord", "check_paths", "read_path_records", "wilson_interval"]


@dataclass(frozen=True)
class PathRecord:
    """One archived run's path.

    Attributes:
        group: what the runs are grouped by (the method).
        path: the states visited.
        complete: the run ended in a final state (``stop_reason == "final"``).
    """

    group: str
    path: tuple[str, ...]
    complete: bool


@dataclass(frozen=True)
class PathCheck:
    """The spec on one group's runs.

    Attributes:
        group: the method.
        checked: runs whose every state the spec reads.
        violations: of those, runs that break the spec.
        skipped: runs with a state the spec does not read (not applicable).
        example: the shortest violating path seen, if any.
    """

    group: str
    checked: int
    violations: int
    skipped: int
    example: tuple[str, ...] | None = None

    @property
    def rate(self) -> float | None:
        """Violations per checked run (``None`` when none was checked)."""
        return self.violations / self.checked if self.checked else None

    @property
    def interval(self) -> tuple[float, float] | None:
        """The rate's 95 % Wilson interval."""
        return wilson_interval(self.violations, self.checked) if self.checked else None


def wilson_interval(successes: int, n: int, z: float = 1.959964) -> tuple[float, float]:
    """The Wilson score interval of a proportion (95 % by default).

    >>> [round(x, 3) for x in wilson_interval(5, 100)]
    [0.022, 0.112]

    Raises:
        ValueError: ``n`` below 1 or ``successes`` outside ``0..n``.
    """
    if n < 1 or not 0 <= successes <= n:
        raise ValueError(f"wilson_interval: need 0 <= successes <= n and n >= 1, got {successes}/{n}")
    p = successes / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)


def read_path_records(source: str | Path, *, group_by: str = "method") -> list[PathRecord]:
    """The paths of a results file (JSON lines), or of every ``*.jsonl`` file in a directory.

    Raises:
        ConfigError: no such file or directory, a directory without ``.jsonl`` files, a line that
            is not JSON or lacks a ``"path"`` list (named by file and line).
    """
    where = Path(source)
    if where.is_dir():
        files = sorted(where.rglob("*.jsonl"))
        if not files:
            raise ConfigError(f"--records {where}: no .jsonl results files in this directory")
    elif where.is_file():
        files = [where]
    else:
        raise ConfigError(f"--records {where}: no such file or directory")
    out: list[PathRecord] = []
    for file in files:
        try:
            lines = file.read_text(encoding="utf-8").splitlines()
        except UnicodeDecodeError as err:
            raise ConfigError(f"{file}: not UTF-8 text ({err.reason})") from None
        for number, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as err:
                raise ConfigError(f"{file}:{number}: not a JSON record ({err.msg})") from None
            path = record.get("path") if isinstance(record, dict) else None
            if not isinstance(path, list) or not all(isinstance(s, str) for s in path):
                raise ConfigError(f'{file}:{number}: a run record needs a "path" list of state names')
            group = str(record.get(group_by, "?"))
            out.append(PathRecord(group, tuple(path), record.get("stop_reason") == "final"))
    return out


def check_paths(
    records: Iterable[PathRecord], spec: AgentSpec, *, alphabet: Mapping[str, str | None] | None = None
) -> list[PathCheck]:
    """The spec on every recorded path, per group (in order of first appearance).

    Args:
        records: the runs.
        spec: the compiled spec.
        alphabet: ``state -> spec symbol`` (``None`` hides it), as for
            :func:`~stateflow.spec.verify.verify`; other states are read under their own name.
    """
    dfa, declared, given = spec.dfa, set(spec.spec.state_names), dict(alphabet or {})
    tally: dict[str, list] = {}
    for rec in records:
        row = tally.setdefault(rec.group, [0, 0, 0, None])
        symbols = []
        readable = True
        for name in rec.path:
            symbol = given.get(name, name)
            if symbol is not None and symbol not in declared:
                readable = False
                break
            symbols.append(symbol)
        if not readable:
            row[2] += 1
            continue
        row[0] += 1
        q: int | None = dfa.start
        cut = None
        for i, symbol in enumerate(symbols):
            if symbol is None:
                continue
            q = dfa.step(q, symbol)  # type: ignore[arg-type]
            if q is None:
                cut = i + 1
                break
        if cut is None and rec.complete and q is not None and not dfa.may_stop(q):
            cut = len(rec.path)
        if cut is not None:
            row[1] += 1
            shown = rec.path[:cut]
            if row[3] is None or len(shown) < len(row[3]):
                row[3] = shown
    return [PathCheck(group, c, v, s, ex) for group, (c, v, s, ex) in tally.items()]

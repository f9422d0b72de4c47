"""The overview's summary of a results file, kept on disk between runs so a first page is cheap.

The overview (and the live pages' change check) needs only sums per overview row: episodes,
successes, reward, tokens, cost, seconds, errors and tokens per state. :class:`SourceSummary`
keeps those sums (:class:`~stateflow.tasks.ui.overview.CellTotals`, a few hundred bytes per row)
and, to keep them right when a re-run episode replaces its older record, each episode's figures
(:class:`~stateflow.tasks.ui.overview.EpisodeFigures`). Both are persisted in a summary
directory (``stateflow ui`` uses ``<cache dir>/ui``), in two files: the *head* (the sums, the
identities, the problems, and what the file looked like) and the *rows* (the figures, by
column). Opening a directory of 10,000 episodes a second time reads the head only (a few KB);
the rows are read when the file has grown, and the full index
(:class:`~stateflow.tasks.ui.index.SourceIndex`) is built only when a page needs records.

A persisted summary is trusted only for the file it was made from: the same path and inode, a
size at least the bytes it covered, and the same last 4 KB before that point (a SHA-256); the
modification time must match too, or that hash is checked again. A file that grew is read from
where the summary ended (a run in progress appends); one that shrank, was replaced or rewritten
is summarised again from the start. A summary file that cannot be read (corrupt, another format,
another file's, rows that do not match the head) is ignored and rewritten; one that cannot be
written (a read-only cache) only costs the next start its speed.

Lines are read by :func:`~stateflow.tasks.ui.lines.parse_line`, as the full index reads them,
so both count the same records and report the same problems.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from stateflow.tasks.harness.records import record_key
from stateflow.tasks.ui.lines import Problem, Stamp, parse_line
from stateflow.tasks.ui.overview import CellKey, CellTotals, EpisodeFigures, cell_key, totals_of

__all__ = ["FORMAT", "SourceSummary", "summary_file"]

FORMAT = 1
"""Version of the persisted summary's layout (another version is ignored and rewritten)."""
_TAIL = 4096  # bytes before the summarised end whose hash must match for the summary to extend
_CHUNK = 4 << 20
_FIGURES = [f.name for f in fields(EpisodeFigures)]


def summary_file(directory: Path, source: Path) -> Path:
    """Where the summary head of ``source`` (a resolved path) is kept in ``directory``; the rows
    go next to it (``.rows.json``)."""
    return directory / f"{hashlib.sha256(str(source).encode()).hexdigest()[:32]}.json"


@dataclass
class SourceSummary:
    """The summary of one results or archive file (see the module docstring).

    Attributes:
        path, root, given_file: as on :class:`~stateflow.tasks.ui.index.SourceIndex`.
        store: the persisted head, or ``None`` to keep the summary in memory only.
        totals: the sums per overview row.
        identities: identity digest -> identity (for the overview's setting labels).
        problems: the lines that are not readable records.
        records: episodes counted (newest record per key).
    """

    path: Path
    root: Path
    given_file: bool = False
    store: Path | None = None
    totals: dict[CellKey, CellTotals] = field(default_factory=dict)
    identities: dict[str, dict[str, Any]] = field(default_factory=dict)
    problems: list[Problem] = field(default_factory=list)
    records: int = 0
    lines: int = 0
    torn_tail: int = 0
    _rows: dict[tuple[str, int], EpisodeFigures] | None = field(default_factory=dict)  # None: on disk only
    _done: int = 0
    _inode: int | None = None
    _mtime_ns: int = 0
    _tail_sha: str = ""
    _started: bool = False

    def refresh(self) -> bool:
        """Bring the summary up to the file (taking the persisted one first, once).

        Returns:
            Whether anything changed since the last call.
        """
        if not self._started:
            self._started = True
            self._load_head()
        try:
            st = self.path.stat()
        except FileNotFoundError:
            changed = bool(self.records or self.problems or self.torn_tail)
            self._reset(None)
            return changed
        if st.st_size == self._done + self.torn_tail and st.st_ino == self._inode and st.st_mtime_ns == self._mtime_ns:
            return False
        same_prefix = st.st_ino == self._inode and st.st_size >= self._done and self._hash_tail() == self._tail_sha
        if not same_prefix or (self._rows is None and not self._load_rows()):
            self._reset(st.st_ino)
        self._read_from_done()
        self._mtime_ns = st.st_mtime_ns
        self._tail_sha = self._hash_tail()
        self._save()
        return True

    def rows(self) -> dict[tuple[str, int], EpisodeFigures]:
        """Each episode's figures (newest per key, in the order written), read from disk if needed."""
        if self._rows is None and not self._load_rows():
            self._reset(None)  # the rows on disk do not match the head: summarise the file again
            self.refresh()
        assert self._rows is not None
        return self._rows

    def stamp(self) -> Stamp:
        return Stamp(self.records, len(self.problems), self._done + self.torn_tail)

    # -- reading the results file ----------------------------------------------------------------
    def _reset(self, inode: int | None) -> None:
        self.totals, self.identities, self.problems, self._rows = {}, {}, [], {}
        self.records = self.lines = self._done = self.torn_tail = self._mtime_ns = 0
        self._tail_sha = ""
        self._inode = inode

    def _read_from_done(self) -> None:
        assert self._rows is not None
        replaced = False
        with self.path.open("rb") as fh:
            fh.seek(self._done)
            pending = b""
            while chunk := fh.read(_CHUNK):
                data = pending + chunk
                start = 0
                while (end := data.find(b"\n", start)) >= 0:
                    replaced |= self._add_line(data[start:end])
                    self._done += end - start + 1
                    start = end + 1
                pending = data[start:]
        self.torn_tail = len(pending)
        if replaced:  # a re-run episode took its older record's place: the sums are made again
            self.totals = totals_of(self._rows.values())
        self.records = len(self._rows)

    def _add_line(self, line: bytes) -> bool:
        """Count one line; whether its record replaced an older one of the same episode."""
        assert self._rows is not None
        self.lines += 1
        parsed = parse_line(line, self.path, self.lines, self.identities)
        if parsed is None:
            return False
        if isinstance(parsed, Problem):
            self.problems.append(parsed)
            return False
        key = record_key(parsed[0])
        figures = EpisodeFigures.of(parsed[0])
        replaced = self._rows.pop(key, None) is not None  # newest wins, placed where it was written
        self._rows[key] = figures
        if not replaced:
            totals = self.totals.get(cell_key(figures))
            if totals is None:
                totals = self.totals[cell_key(figures)] = CellTotals(figures.key_digest)
            totals.add(figures)
        return replaced

    def _hash_tail(self) -> str:
        """SHA-256 of the last :data:`_TAIL` bytes before the summarised end."""
        start = max(0, self._done - _TAIL)
        try:
            with self.path.open("rb") as fh:
                fh.seek(start)
                return hashlib.sha256(fh.read(self._done - start)).hexdigest()
        except OSError:
            return ""

    # -- persistence ---------------------------------------------------------------------------------
    def _rows_file(self) -> Path | None:
        return None if self.store is None else self.store.with_suffix(".rows.json")

    def _load_head(self) -> None:
        """Take the persisted head if it is one of this file in this format (else start empty)."""
        if self.store is None:
            return
        try:
            data = json.loads(self.store.read_bytes())
            if not isinstance(data, dict) or data.get("format") != FORMAT or data.get("path") != str(self.path):
                return
            head = (data["inode"], data["done"], data["lines"], data["mtime_ns"], data["records"])
            if not all(isinstance(v, int) and not isinstance(v, bool) for v in head):
                return
            totals = {_cell_key(t[0]): _totals(t[1]) for t in data["totals"]}
            problems = [Problem(str(self.path), int(p[0]), _kind(p[1]), str(p[2]), str(p[3])) for p in data["problems"]]
            identities, tail = data["identities"], data["tail_sha"]
            if not isinstance(identities, dict) or not isinstance(tail, str):
                return
        except (OSError, ValueError, TypeError, KeyError, IndexError):
            return  # unreadable or not ours: summarised again and rewritten
        self.totals, self.identities, self.problems, self._tail_sha = totals, identities, problems, tail
        self._inode, self._done, self.lines, self._mtime_ns, self.records = head
        self._rows = None  # read only if the file grew

    def _load_rows(self) -> bool:
        """Read the persisted figures; False when they are missing or do not match the head."""
        path = self._rows_file()
        if path is None:
            return False
        try:
            data = json.loads(path.read_bytes())
            if data.get("format") != FORMAT or data.get("done") != self._done:
                return False
            columns = [data["columns"][name] for name in _FIGURES]
            rows = [EpisodeFigures(*values) for values in zip(*columns, strict=True)]
            _check(rows)
        except (OSError, ValueError, TypeError, KeyError, AttributeError):
            return False
        self._rows = {(r.key_digest, r.task): r for r in rows}
        return len(self._rows) == self.records

    def _save(self) -> None:
        rows_file = self._rows_file()
        if self.store is None or rows_file is None or self._rows is None:
            return
        rows = list(self._rows.values())
        columns = {name: [getattr(r, name) for r in rows] for name in _FIGURES}
        head = {
            "format": FORMAT,
            "path": str(self.path),
            "inode": self._inode,
            "done": self._done,
            "lines": self.lines,
            "mtime_ns": self._mtime_ns,
            "tail_sha": self._tail_sha,
            "records": self.records,
            "identities": self.identities,
            "problems": [[p.line, p.kind, p.message, p.summary] for p in self.problems],
            "totals": [[list(k), _totals_list(t)] for k, t in self.totals.items()],
        }
        # rows first: a head is only ever next to the rows it was made with (or newer ones)
        _write_json(rows_file, {"format": FORMAT, "done": self._done, "columns": columns})
        _write_json(self.store, head)


def _write_json(path: Path, data: Any) -> None:
    """Write ``data`` to ``path`` atomically; a cache that cannot be written is skipped."""
    tmp = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".summary-")
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(data, fh, ensure_ascii=False, separators=(",", ":"), default=str)
        os.replace(tmp, path)
    except OSError:  # a read-only cache: the next start summarises the file again
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)


_TOTALS_NUMBERS = ("n", "solved", "reward", "prompt_tokens", "completion_tokens", "cached_tokens", "cost", "seconds")


def _totals_list(t: CellTotals) -> list[Any]:
    return [t.key_digest, *(getattr(t, name) for name in _TOTALS_NUMBERS), t.errored, list(t.states.items())]


def _number(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError("not a number")
    return value


def _totals(raw: Any) -> CellTotals:
    digest, *numbers, errored, states = raw
    if not isinstance(digest, str) or len(numbers) != len(_TOTALS_NUMBERS) or not isinstance(errored, int):
        raise TypeError("not a row's sums")
    t = CellTotals(digest, errored=errored, states={str(s): _number(v) for s, v in states})
    for name, value in zip(_TOTALS_NUMBERS, numbers, strict=True):
        setattr(t, name, _number(value))
    return t


def _cell_key(raw: Any) -> CellKey:
    if not isinstance(raw, list) or len(raw) != 4 or not all(isinstance(x, str) for x in raw):
        raise TypeError("not a row key")
    return raw[0], raw[1], raw[2], raw[3]


def _kind(raw: Any) -> Any:
    if raw not in ("corrupt", "newer-schema", "invalid"):
        raise ValueError("not a problem kind")
    return raw


def _check(rows: list[EpisodeFigures]) -> None:
    """Type-check figures read back from disk (JSON lists become the tuples the figures hold)."""
    for r in rows:
        if not (
            (r.identity_digest is None or isinstance(r.identity_digest, str))
            and isinstance(r.task, int)
            and isinstance(r.success, bool)
            and isinstance(r.ok, bool)
            and isinstance(r.path, list)
            and isinstance(r.state_tokens, list)
        ):
            raise TypeError("a summary row of the wrong types")
        object.__setattr__(r, "path", tuple(str(s) for s in r.path))
        object.__setattr__(r, "state_tokens", tuple((str(s), _number(v)) for s, v in r.state_tokens))
        for name in ("reward_raw", "cost", "wall_s", "prompt_tokens", "completion_tokens", "cached_tokens"):
            _number(getattr(r, name))

"""The overview's summary of a results file, kept on disk between runs so a first page is cheap.

The overview (and the live pages' change check) needs only sums per overview row: episodes,
successes, reward, tokens, cost, seconds, errors and tokens per state. :class:`SourceSummary`
keeps those sums (:class:`~stateflow.tasks.ui.overview.CellTotals`, a few hundred bytes per row),
the byte offset of each episode's counted record (a re-run episode replaces its older record:
that one line is read back and its figures taken off the sums) and each episode's figures
(:class:`~stateflow.tasks.ui.overview.EpisodeFigures`, needed only when two sources hold the same
row). They are persisted in a summary directory (``stateflow ui`` uses ``<cache dir>/ui``), in
two files: the *head* (the sums, the offsets, the identities, the problems, and what the file
looked like) and the *rows* (the figures, by column, written when the file is summarised from
its start; records appended later are read again from the file when the rows are needed).
Opening a directory of 10,000 episodes a second time reads the head only; a file that grew is
read from where the summary ended (a re-run episode costs one more line, its older record's);
the full index (:class:`~stateflow.tasks.ui.index.SourceIndex`) is built only when a page needs
records.

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
import itertools
import json
import os
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from stateflow.tasks.harness.records import record_key
from stateflow.tasks.ui.figures import CellKey, CellTotals, EpisodeFigures, cell_key
from stateflow.tasks.ui.lines import Problem, Stamp, parse_line

__all__ = ["FORMAT", "SourceSummary", "summary_file"]

FORMAT = 2
"""Version of the persisted summary's layout (another version is ignored and rewritten)."""
_TAIL = 4096  # bytes before the summarised end whose hash must match for the summary to extend
_CHUNK = 4 << 20  # bytes read at a time: bounds memory whatever the file's size
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
    lines: int = 0
    torn_tail: int = 0
    # each counted episode's key -> the byte offset of its record's line: a re-run episode's older
    # figures are read back from there (one line) and taken off its row's sums
    _keys: dict[tuple[str, int], int] = field(default_factory=dict)
    _rows: dict[tuple[str, int], EpisodeFigures] | None = field(default_factory=dict)  # None: on disk only
    _rows_dirty: bool = False  # rows changed other than by appending: the rows file is rewritten
    _generation: str = ""  # made at each summary from scratch; a rows file of another one is not used
    _done: int = 0
    _inode: int | None = None
    _mtime_ns: int = 0
    _tail_sha: str = ""
    _started: bool = False

    @property
    def records(self) -> int:
        """Episodes counted (newest record per key)."""
        return len(self._keys)

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
            changed = bool(self._keys or self.problems or self.torn_tail)
            self._reset(None)
            return changed
        if st.st_size == self._done + self.torn_tail and st.st_ino == self._inode and st.st_mtime_ns == self._mtime_ns:
            return False
        if st.st_ino != self._inode or st.st_size < self._done or self._hash_tail() != self._tail_sha:
            self._reset(st.st_ino)
        self._read_from_done()
        self._mtime_ns = st.st_mtime_ns
        self._tail_sha = self._hash_tail()
        self._save()
        return True

    def rows(self) -> dict[tuple[str, int], EpisodeFigures]:
        """Each episode's figures (newest per key, in the order written), read from disk if needed."""
        if self._rows is None:
            self._rows = self._rows_at(self._done)
            if self._rows is None:  # no usable rows on disk: summarise the file again
                self._reset(self._inode)
                self._read_from_done()
                self._save()
        assert self._rows is not None
        return self._rows

    def stamp(self) -> Stamp:
        return Stamp(self.records, len(self.problems), self._done + self.torn_tail)

    # -- reading the results file ----------------------------------------------------------------
    def _reset(self, inode: int | None) -> None:
        self.totals, self.identities, self.problems, self._keys, self._rows = {}, {}, [], {}, {}
        self.lines = self._done = self.torn_tail = self._mtime_ns = 0
        self._tail_sha = ""
        self._generation = os.urandom(8).hex()
        self._rows_dirty = True
        self._inode = inode

    def _lines_from(self, start: int, stop: int | None = None) -> Iterator[tuple[bytes, int]]:
        """``(line, offset after it)`` of each complete line from byte ``start`` (to ``stop``; without
        one, the bytes after the last newline are left in ``torn_tail``)."""
        with self.path.open("rb") as fh:
            fh.seek(start)
            pos, pending = start, b""
            while chunk := fh.read(_CHUNK if stop is None else min(_CHUNK, stop - pos - len(pending))):
                data = pending + chunk
                begin = 0
                while (end := data.find(b"\n", begin)) >= 0:
                    pos += end - begin + 1
                    yield data[begin:end], pos
                    begin = end + 1
                pending = data[begin:]
                if stop is not None and pos + len(pending) >= stop:
                    break
        if stop is None:  # a last line without its newline: being written, or torn by a crash
            self.torn_tail = len(pending)

    def _read_from_done(self) -> None:
        """Count the lines after the summarised end; the last line without a newline waits.

        A re-run episode takes its older record's place: the older figures are read back from
        their line (its offset is kept) and taken off the row's sums, so the cost of an appended
        record does not depend on the file's size (sums of fractions may differ from a fresh
        summary's in the last bits: they are added and subtracted in another order)."""
        for line, after in self._lines_from(self._done):
            self.lines += 1
            self._done = after
            parsed = parse_line(line, self.path, self.lines, self.identities, light=True)
            if isinstance(parsed, Problem):
                self.problems.append(parsed)
                continue
            if parsed is None:
                continue
            key = record_key(parsed[0])
            figures = EpisodeFigures.of(parsed[0])
            if key in self._keys:
                older = self._figures_at(self._keys[key])
                if older is None:  # the older line is not what it was: summarise the file again
                    self._reset(self._inode)
                    self._read_from_done()
                    return
                totals = self.totals.get(cell_key(older))
                if totals is not None:
                    totals.remove(older)
                    if totals.n <= 0:
                        del self.totals[cell_key(older)]
            self._keys.pop(key, None)  # the newest record is the last one (as the rows' order)
            self._keys[key] = after - len(line) - 1
            totals = self.totals.get(cell_key(figures))
            if totals is None:
                totals = self.totals[cell_key(figures)] = CellTotals(figures.key_digest)
            totals.add(figures)
            if self._rows is not None:
                self._rows.pop(key, None)
                self._rows[key] = figures

    def _figures_at(self, offset: int) -> EpisodeFigures | None:
        """The figures of the record whose line starts at byte ``offset`` (``None``: no record there)."""
        try:
            with self.path.open("rb") as fh:
                fh.seek(offset)
                line = fh.readline()
        except OSError:
            return None
        parsed = parse_line(line.rstrip(b"\n"), self.path, 0, {}, light=True)
        return EpisodeFigures.of(parsed[0]) if isinstance(parsed, tuple) else None

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
            head = (data["inode"], data["done"], data["lines"], data["mtime_ns"])
            if not all(isinstance(v, int) and not isinstance(v, bool) for v in head):
                return
            totals = {_cell_key(t[0]): _totals(t[1]) for t in data["totals"]}
            problems = [Problem(str(self.path), int(p[0]), _kind(p[1]), str(p[2]), str(p[3])) for p in data["problems"]]
            keys = {(str(d), int(t)): int(at) for d, pairs in data["keys"] for t, at in pairs}
            identities, tail, generation = data["identities"], data["tail_sha"], data["generation"]
            if not all(isinstance(x, dict) for x in (identities, *identities.values())):
                return
            if not isinstance(tail, str) or not isinstance(generation, str):
                return
        except (OSError, ValueError, TypeError, KeyError, IndexError, AttributeError):
            return  # unreadable or not ours: summarised again and rewritten
        self.totals, self.identities, self.problems, self._keys = totals, identities, problems, keys
        self._tail_sha, self._generation, self._rows, self._rows_dirty = tail, generation, None, False
        self._inode, self._done, self.lines, self._mtime_ns = head

    def _rows_at(self, position: int) -> dict[tuple[str, int], EpisodeFigures] | None:
        """The figures as of byte ``position``: the persisted rows, then the records written after
        them (rows are not rewritten for every appended record); None when unusable."""
        path = self._rows_file()
        if path is None:
            return None
        try:
            data = json.loads(path.read_bytes())
            done = data["done"]
            if data["format"] != FORMAT or data["generation"] != self._generation or not 0 <= done <= position:
                return None
            listed = [EpisodeFigures(*values) for values in zip(*_columns(data["columns"]), strict=True)]
        except (OSError, ValueError, TypeError, KeyError, AttributeError):
            return None
        rows = {(r.key_digest, r.task): r for r in listed}
        scratch: dict[str, dict[str, Any]] = {}
        for line, _ in self._lines_from(done, position):
            parsed = parse_line(line, self.path, 0, scratch, light=True)
            if isinstance(parsed, tuple):
                key = record_key(parsed[0])
                rows.pop(key, None)
                rows[key] = EpisodeFigures.of(parsed[0])
        return rows

    def _save(self) -> None:
        rows_file = self._rows_file()
        if self.store is None or rows_file is None:
            return
        if self._rows is not None and self._rows_dirty:
            rows = list(self._rows.values())
            columns = {name: [getattr(r, name) for r in rows] for name in _FIGURES}
            data = {"format": FORMAT, "generation": self._generation, "done": self._done, "columns": columns}
            if not _write_json(rows_file, data):  # rows first: a head never outlives the rows it needs
                return
            self._rows_dirty = False
        by_digest: dict[str, list[tuple[int, int]]] = {}
        for (digest, task), at in self._keys.items():
            by_digest.setdefault(digest, []).append((task, at))
        head = {
            "format": FORMAT,
            "path": str(self.path),
            "generation": self._generation,
            "inode": self._inode,
            "done": self._done,
            "lines": self.lines,
            "mtime_ns": self._mtime_ns,
            "tail_sha": self._tail_sha,
            "identities": self.identities,
            "problems": [[p.line, p.kind, p.message, p.summary] for p in self.problems],
            "totals": [[list(k), _totals_list(t)] for k, t in self.totals.items()],
            "keys": list(by_digest.items()),
        }
        _write_json(self.store, head)


def _write_json(path: Path, data: Any) -> bool:
    """Write ``data`` to ``path`` atomically; False (nothing written) when the cache cannot be written."""
    tmp = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".summary-")
        with os.fdopen(fd, "w", encoding="utf-8") as fh:  # dumps: json.dump does not use the C encoder
            fh.write(json.dumps(data, ensure_ascii=False, separators=(",", ":"), default=str))
        os.replace(tmp, path)
        return True
    except OSError:  # a read-only cache: the next start summarises the file again
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)
        return False


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


_NUMBER = {int, float}
_COLUMN_TYPES: dict[str, set[type]] = {
    "identity_digest": {str, type(None)},
    "task": {int},
    "benchmark": {str},
    "method": {str},
    "models": {str},
    "success": {bool},
    "reward_raw": _NUMBER,
    "prompt_tokens": {int},
    "completion_tokens": {int},
    "cached_tokens": {int},
    "cost": _NUMBER,
    "wall_s": _NUMBER,
    "ok": {bool},
    "path": {list},
    "state_tokens": {list},
}


def _columns(raw: Any) -> list[list[Any]]:
    """The persisted figures' columns in :class:`EpisodeFigures` order, every value type-checked
    (by column: a rows file is read whole, and this keeps reading it a matter of milliseconds).

    Raises:
        TypeError, KeyError: not columns of this layout.
    """
    out = []
    for name in _FIGURES:
        col = raw[name]
        if not isinstance(col, list) or not set(map(type, col)) <= _COLUMN_TYPES[name]:
            raise TypeError(f"summary column {name} holds values of the wrong type")
        out.append(col)
    paths, states = out[-2], out[-1]
    if not set(map(type, itertools.chain.from_iterable(paths))) <= {str}:
        raise TypeError("summary column path holds values of the wrong type")
    pairs = list(itertools.chain.from_iterable(states))
    if not set(map(type, pairs)) <= {list} or not all(len(p) == 2 for p in pairs):
        raise TypeError("summary column state_tokens holds values of the wrong type")
    if not set(map(type, (p[0] for p in pairs))) <= {str} or not set(map(type, (p[1] for p in pairs))) <= _NUMBER:
        raise TypeError("summary column state_tokens holds values of the wrong type")
    out[-2] = [tuple(p) for p in paths]
    out[-1] = [tuple((s, v) for s, v in row) for row in states]
    return out

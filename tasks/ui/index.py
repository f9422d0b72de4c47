"""The UI's data layer: an index of the episodes in results directories and archive files.

A results file of 10,000 episodes holds 100 MB or more of traces; a page listing them needs none
of it. :class:`SourceIndex` reads a file once, line by line, and keeps for each complete line its
byte offset and length plus the record *without* its trace (``history``, ``transitions`` and
``eval`` emptied, as :func:`stateflow.tasks.harness.archive.compact` does): about 1-2 KB per episode, so
metrics, filters and the paired comparison run on the index alone. An episode's trace is read
from disk when its page is opened (:meth:`RunIndex.load`), by seeking to its offset.

The files may be written while they are read (a run in progress appends one line per episode):
:meth:`SourceIndex.refresh` reads only the bytes added since the last look, and a last line
without its newline is left for the next refresh (it is being written, or was torn by a crash).
A file that shrank or was replaced (archives are rewritten by a rename) is indexed again from the
start.

Lines that are not records never stop the UI: a corrupt line, a record of a newer schema or an
invalid record becomes a :class:`Problem` naming the file and line, shown on the pages.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from stateflow.tasks.harness.records import record_key
from stateflow.tasks.kit.episode_record import SCHEMA_VERSION, EpisodeRecord, InvalidRecordError

from stateflow.errors import ConfigError

__all__ = ["EpisodeRef", "IndexedEpisode", "Problem", "RunIndex", "SourceIndex", "Stamp"]

# Fields a list never shows; read from disk only for an episode's own page.
_TRACE_FIELDS = ("history", "transitions", "eval", "bash_comparison")
_CHUNK = 4 << 20  # bytes read at a time while indexing: bounds memory whatever the file's size

ProblemKind = Literal["corrupt", "newer-schema", "invalid"]


@dataclass(frozen=True)
class Problem:
    """A line of a source that is not a readable record (shown on the pages, never fatal).

    Attributes:
        source: the file.
        line: its 1-based line number.
        kind: ``corrupt`` (not JSON), ``newer-schema`` (written by a newer StateFlow) or
            ``invalid`` (JSON, but not a valid record).
        message: what is wrong, as the record reader says it.
        summary: ``method / task`` when the line names them (so a newer record is recognisable).
    """

    source: str
    line: int
    kind: ProblemKind
    message: str
    summary: str = ""


@dataclass(frozen=True)
class EpisodeRef:
    """Where an episode's line is: source number, byte offset and length, line number."""

    source: int
    offset: int
    length: int
    line: int


@dataclass(frozen=True)
class IndexedEpisode:
    """One episode in the index: where its line is, and its record without the trace.

    ``record.history``, ``record.transitions`` and ``record.eval`` are empty here; ``has_vote``
    tells whether a vote ran in the episode.
    """

    ref: EpisodeRef
    record: EpisodeRecord
    has_vote: bool

    @property
    def key(self) -> tuple[str, int]:
        return record_key(self.record)


@dataclass(frozen=True)
class Stamp:
    """What a source looked like at its last refresh (the live pages poll for a change)."""

    records: int
    problems: int
    size: int


@dataclass
class SourceIndex:
    """The index of one results or archive file (see the module docstring).

    Attributes:
        number: the source's position among the UI's sources (part of every episode reference).
        path: the file (it may not exist yet: a run that has not finished an episode).
        root: the directory the user named (``path``'s parent when a file was named).
        given_file: the user named the file itself (then only that file is served, not its folder).
    """

    number: int
    path: Path
    root: Path
    given_file: bool = False
    episodes: dict[tuple[str, int], IndexedEpisode] = field(default_factory=dict)
    problems: list[Problem] = field(default_factory=list)
    lines: int = 0
    torn_tail: int = 0  # bytes after the last newline: a record being written, or torn by a crash
    _done: int = 0  # bytes indexed: up to and including the last newline seen
    _inode: int | None = None
    _identities: dict[str, dict[str, Any]] = field(default_factory=dict)

    def refresh(self) -> bool:
        """Index what was appended since the last call; re-index a file that shrank or was replaced.

        Returns:
            Whether anything changed.
        """
        try:
            st = self.path.stat()
        except FileNotFoundError:
            changed = bool(self.episodes or self.problems or self.torn_tail)
            self._reset(None)
            return changed
        if st.st_ino != self._inode or st.st_size < self._done:
            self._reset(st.st_ino)
        if st.st_size == self._done + self.torn_tail:
            return False
        with self.path.open("rb") as fh:
            fh.seek(self._done)
            pending = b""
            while chunk := fh.read(_CHUNK):
                data = pending + chunk
                start = 0
                while (end := data.find(b"\n", start)) >= 0:
                    self._index_line(data[start:end], self._done, end - start)
                    self._done += end - start + 1
                    start = end + 1
                pending = data[start:]
        self.torn_tail = len(pending)
        return True

    def _reset(self, inode: int | None) -> None:
        self.episodes, self.problems, self._identities = {}, [], {}
        self.lines = self._done = self.torn_tail = 0
        self._inode = inode

    def _index_line(self, line: bytes, offset: int, length: int) -> None:
        self.lines += 1
        if not line.strip():
            return
        where = f"{self.path}:{self.lines}"
        small, has_vote = _without_trace(line)
        if small is None:  # the fast cut did not apply: parse the whole line
            try:
                data = json.loads(line)
            except (json.JSONDecodeError, UnicodeDecodeError) as err:
                msg = err.msg if isinstance(err, json.JSONDecodeError) else str(err)
                self.problems.append(Problem(str(self.path), self.lines, "corrupt", f"not a JSON record ({msg})"))
                return
            if not isinstance(data, dict):
                self.problems.append(Problem(str(self.path), self.lines, "invalid", "not a JSON object"))
                return
            history = data.get("history")
            has_vote = isinstance(history, list) and any(
                isinstance(m, dict) and isinstance(m.get("meta"), dict) and "vote" in m["meta"] for m in history
            )
            small = {k: v for k, v in data.items() if k not in _TRACE_FIELDS}
        # Records of one setting carry the same identity (~40 fields): keep one copy of it.
        digest, identity = small.get("identity_digest"), small.get("identity")
        shared = self._identities.get(digest) if isinstance(digest, str) else None
        if shared is not None and shared == identity:
            small["identity"] = None
        try:
            record = EpisodeRecord.from_dict(small, where=where)
        except InvalidRecordError as err:
            version = small.get("schema_version", 0)
            newer = isinstance(version, int) and version > SCHEMA_VERSION
            summary = f"{small.get('method', '?')} / task {small.get('task', '?')}"
            kind: ProblemKind = "newer-schema" if newer else "invalid"
            self.problems.append(Problem(str(self.path), self.lines, kind, "; ".join(err.problems), summary))
            return
        if shared is not None and small["identity"] is None:
            record = record.model_copy(update={"identity": shared})
        elif isinstance(digest, str) and record.identity is not None:
            self._identities[digest] = record.identity
        ep = IndexedEpisode(EpisodeRef(self.number, offset, length, self.lines), record, has_vote)
        # newest record per key wins, placed where it was written (as latest_records orders them)
        self.episodes.pop(ep.key, None)
        self.episodes[ep.key] = ep

    def stamp(self) -> Stamp:
        return Stamp(len(self.episodes), len(self.problems), self._done + self.torn_tail)


# The results file writes a record's fields in EpisodeRecord's order, in which the trace is one
# stretch: `, "transitions": [...], "history": [...], "eval": {...}` right before `, "verdict": `.
# Cutting it out before parsing skips most of each line (10-100 KB of messages in a real run).
# A quote inside a JSON string is always escaped, so these byte patterns can only be keys; a line
# where either occurs more than once (a nested key of that name, or two records run together by
# a torn write) is parsed whole instead, as is any line the cut leaves unparsable.
_TRACE_START = b', "transitions": ['
_TRACE_END = b', "verdict": '
_TRACE_INNER = (b', "history": [', b', "eval": {')


def _without_trace(line: bytes) -> tuple[dict[str, Any] | None, bool]:
    """(the record of ``line`` without its trace, whether a vote ran), or ``(None, False)``
    when the fast cut does not apply (see above)."""
    if line.count(_TRACE_START) != 1 or line.count(_TRACE_END) != 1:
        return None, False
    start, end = line.find(_TRACE_START), line.find(_TRACE_END)
    trace = line[start:end]
    if end < start or not all(part in trace for part in _TRACE_INNER):
        return None, False
    try:
        data = json.loads(line[:start] + line[end:])
    except ValueError:
        return None, False
    if not isinstance(data, dict) or any(k in data for k in _TRACE_FIELDS):
        return None, False
    return data, b'"vote": {' in trace


def _source_path(given: Path) -> tuple[Path, Path]:
    """(results or archive file, root directory) for a path the user named."""
    if given.is_dir():
        return given / "results.jsonl", given
    return given, given.parent


class RunIndex:
    """The UI's sources: results directories and archive/results files, indexed and kept fresh.

    Thread-safe: the server answers requests from several threads, each refreshing first.
    """

    def __init__(self, paths: list[str | os.PathLike[str]]):
        """Index ``paths`` (directories holding ``results.jsonl``, or results / archive files).

        Raises:
            ConfigError: no path given, or a path that does not exist (a directory without
                results yet is fine: a run may be about to write there).
        """
        if not paths:
            raise ConfigError("give at least one results directory or archive file")
        sources = []
        for i, p in enumerate(paths):
            given = Path(p)
            if not given.exists():
                raise ConfigError(f"{given}: no such directory or file (give a results directory or a .jsonl file)")
            file, root = _source_path(given.resolve())
            sources.append(SourceIndex(i, file, root, given_file=file.parent == root and not given.is_dir()))
        self.sources: tuple[SourceIndex, ...] = tuple(sources)
        self._lock = threading.Lock()
        self.refresh()

    def refresh(self) -> bool:
        """Read what every source gained since the last call; whether anything changed."""
        with self._lock:
            return any([s.refresh() for s in self.sources])  # a list: refresh every source

    def episodes(self) -> Iterator[IndexedEpisode]:
        """Every indexed episode (newest record per key), source by source, in file order."""
        with self._lock:
            snapshot = [list(s.episodes.values()) for s in self.sources]
        for eps in snapshot:
            yield from eps

    def problems(self) -> list[Problem]:
        with self._lock:
            return [p for s in self.sources for p in s.problems]

    def find(self, source: int, digest: str, task: int) -> IndexedEpisode | None:
        """The indexed episode of ``source`` with that identity digest and task, if any."""
        if not 0 <= source < len(self.sources):
            return None
        with self._lock:
            return self.sources[source].episodes.get((digest, task))

    def find_any(self, digest: str, task: int) -> IndexedEpisode | None:
        """The episode with that identity digest and task in the first source holding one."""
        with self._lock:
            return next((ep for s in self.sources if (ep := s.episodes.get((digest, task))) is not None), None)

    def load(self, ep: IndexedEpisode) -> EpisodeRecord:
        """The full record of ``ep`` (its trace included), read from its offset.

        Raises:
            ConfigError: the line changed since it was indexed (the file was replaced); the
                caller refreshes and looks the episode up again.
        """
        src = self.sources[ep.ref.source]
        with src.path.open("rb") as fh:
            fh.seek(ep.ref.offset)
            line = fh.read(ep.ref.length)
        try:
            record = EpisodeRecord.from_dict(json.loads(line), where=f"{src.path}:{ep.ref.line}")
        except (json.JSONDecodeError, UnicodeDecodeError, InvalidRecordError) as err:
            raise ConfigError(
                f"{src.path}:{ep.ref.line}: the record cannot be read ({err}); if the file changed since it was "
                "indexed, reload the page"
            ) from err
        if record_key(record) != ep.key:
            raise ConfigError(f"{src.path}:{ep.ref.line} changed since it was indexed; reload the page")
        return record

    def stamps(self) -> list[Stamp]:
        with self._lock:
            return [s.stamp() for s in self.sources]

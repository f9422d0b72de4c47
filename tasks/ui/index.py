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

:class:`RunIndex` builds this index only when a page needs records (tasks, an episode, side by
side, a paired comparison); the overview and the live pages' change check read each source's
summary (:mod:`stateflow.tasks.ui.summary`), which a second start reads from disk.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from stateflow.tasks.harness.records import check_results_file, record_key
from stateflow.tasks.kit.episode_record import EpisodeRecord, InvalidRecordError
from stateflow.tasks.ui.figures import CellKey, CellTotals, EpisodeFigures
from stateflow.tasks.ui.lines import Problem, Stamp, parse_line
from stateflow.tasks.ui.overview import Cell, cells_of, cells_of_totals
from stateflow.tasks.ui.summary import SourceSummary, summary_file

from stateflow.errors import ConfigError

__all__ = ["EpisodeRef", "IndexedEpisode", "Problem", "RunIndex", "SourceIndex", "Stamp"]

_CHUNK = 4 << 20  # bytes read at a time while indexing: bounds memory whatever the file's size


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
        parsed = parse_line(line, self.path, self.lines, self._identities)
        if parsed is None:
            return
        if isinstance(parsed, Problem):
            self.problems.append(parsed)
            return
        record, has_vote = parsed
        ep = IndexedEpisode(EpisodeRef(self.number, offset, length, self.lines), record, has_vote)
        # newest record per key wins, placed where it was written (as latest_records orders them)
        self.episodes.pop(ep.key, None)
        self.episodes[ep.key] = ep

    def stamp(self) -> Stamp:
        return Stamp(len(self.episodes), len(self.problems), self._done + self.torn_tail)


def _source_path(given: Path) -> tuple[Path, Path]:
    """(results or archive file, root directory) for a path the user named."""
    if given.is_dir():
        return given / "results.jsonl", given
    return given, given.parent


class RunIndex:
    """The UI's sources: results directories and archive/results files, indexed and kept fresh.

    Two levels per source, each read only when a page needs it: the *summary*
    (:class:`~stateflow.tasks.ui.summary.SourceSummary`: the overview's figures per episode,
    persisted in ``summaries`` when given) and the full *index* of trace-less records
    (:class:`SourceIndex`, built on the first call that needs records: :meth:`episodes`,
    :meth:`find`...). The overview and the live pages' stamps use the summary only, so a first
    page over 10,000 episodes reads one small file instead of the records.

    Thread-safe: the server answers requests from several threads, each refreshing first.
    """

    def __init__(self, paths: list[str | os.PathLike[str]], *, summaries: Path | None = None):
        """Name the sources (nothing is read yet but a persisted summary, on the first refresh).

        Args:
            paths: directories holding ``results.jsonl``, or results / archive files.
            summaries: a directory to keep each source's summary in between runs (``stateflow ui``
                uses ``<cache dir>/ui``); ``None`` keeps them in memory only.

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
            if not given.is_dir():
                check_results_file(file)  # a text file would otherwise be served as "0 episodes"
            sources.append(SourceIndex(i, file, root, given_file=file.parent == root and not given.is_dir()))
        self.sources: tuple[SourceIndex, ...] = tuple(sources)
        self.summaries: tuple[SourceSummary, ...] = tuple(
            SourceSummary(s.path, s.root, s.given_file, None if summaries is None else summary_file(summaries, s.path))
            for s in sources
        )
        self._built = self._summarised = False
        self._lock = threading.Lock()

    def refresh_summaries(self) -> bool:
        """Bring every source's summary up to its file; whether anything changed."""
        with self._lock:
            self._summarised = True
            return any([s.refresh() for s in self.summaries])  # a list: refresh every source

    def _ensure_summarised(self) -> None:
        if not self._summarised:
            self.refresh_summaries()

    def refresh(self) -> bool:
        """Read what every source gained since the last call (building the full index the first
        time) and refresh the summaries; whether anything changed."""
        with self._lock:
            self._built = self._summarised = True
            changed = [s.refresh() for s in self.sources]
            return any([s.refresh() for s in self.summaries] + changed)

    def _ensure_built(self) -> None:
        if not self._built:
            self.refresh()

    def cells(self) -> list[Cell]:
        """The overview's rows over every source, from the summaries.

        Each source's sums are added up; only when two sources hold the same row (the same
        episodes may be in both, e.g. a results directory and an archive made from it) are
        the episodes' figures read, so that each episode counts once (the last source's record).
        """
        self._ensure_summarised()
        with self._lock:
            identities = {d: i for s in self.summaries for d, i in s.identities.items()}
            keys = [k for s in self.summaries for k in s.totals]
            if len(keys) == len(set(keys)):
                merged: dict[CellKey, CellTotals] = {}
                for s in self.summaries:
                    for key, t in s.totals.items():
                        merged[key] = replace(t, states=dict(t.states))
                return cells_of_totals(merged, identities)
            newest: dict[tuple[str, int], EpisodeFigures] = {}
            for s in self.summaries:
                for key, f in s.rows().items():
                    newest.pop(key, None)
                    newest[key] = f
        return cells_of(newest.values(), identities)

    def episodes(self) -> Iterator[IndexedEpisode]:
        """Every indexed episode (newest record per key), source by source, in file order."""
        self._ensure_built()
        with self._lock:
            snapshot = [list(s.episodes.values()) for s in self.sources]
        for eps in snapshot:
            yield from eps

    def problems(self) -> list[Problem]:
        """The lines that are not readable records (as the summaries found them)."""
        self._ensure_summarised()
        with self._lock:
            return [p for s in self.summaries for p in s.problems]

    def find(self, source: int, digest: str, task: int) -> IndexedEpisode | None:
        """The indexed episode of ``source`` with that identity digest and task, if any."""
        if not 0 <= source < len(self.sources):
            return None
        self._ensure_built()
        with self._lock:
            return self.sources[source].episodes.get((digest, task))

    def find_any(self, digest: str, task: int) -> IndexedEpisode | None:
        """The episode with that identity digest and task in the first source holding one."""
        self._ensure_built()
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
        """What each source looked like at its summary's last refresh."""
        self._ensure_summarised()
        with self._lock:
            return [s.stamp() for s in self.summaries]

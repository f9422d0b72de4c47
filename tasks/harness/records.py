"""The results file: one JSON line per finished episode, safe against crashes.

The file is append-only. Re-running an episode (``--retry-errors``) appends a new record for the
same key instead of rewriting the file, and every reader keeps only the newest record per key
(:func:`latest_records`): the key is the episode identity's digest plus the task index (see
:mod:`stateflow.tasks.harness.identity`).

Each record is written with a single ``write`` on a file opened with ``O_APPEND`` and then
``fsync``-ed, so a ``kill -9`` leaves at most one torn last line. Loading tolerates exactly that:
a final line without its newline (or not valid JSON) is reported and cut off before new records
are appended, and every complete line is kept. A corrupt line in the *middle* is an error naming
the file and line, because silently skipping it would lose a finished task; so is a complete line
that is not a valid :class:`~stateflow.tasks.kit.episode_record.EpisodeRecord` (the error names the
file, line and field). Loading never changes the file except for cutting a torn last line.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from stateflow.tasks.kit.episode_record import EpisodeRecord

from stateflow.errors import ConfigError, StateFlowError

__all__ = ["LEGACY_IDENTITY", "LoadReport", "ResultsFile", "check_results_file", "latest_records", "record_key"]

# Records written before identities were stored have none; they are keyed apart from every
# identity, so they never count as a finished episode of a new run.
LEGACY_IDENTITY = "legacy"


def record_key(record: EpisodeRecord) -> tuple[str, int]:
    """What identifies an episode: its identity digest and task index.

    A record without an identity (an older file) gets ``("legacy:<benchmark>/<method>/<models>",
    task)``, so legacy records of one cell still replace each other.
    """
    digest = record.identity_digest or f"{LEGACY_IDENTITY}:{record.benchmark}/{record.method}/{record.models}"
    return digest, record.task


def latest_records(records: Iterable[EpisodeRecord]) -> list[EpisodeRecord]:
    """The newest record of each key (the last one in file order), in the order they were written.

    The results file is append-only, so a re-run episode leaves its older record in place; this
    is how every reader (resume, metrics, reports) counts each episode once.
    """
    newest: dict[tuple[str, int], tuple[int, EpisodeRecord]] = {}
    for pos, r in enumerate(records):
        newest[record_key(r)] = (pos, r)
    return [r for _, r in sorted(newest.values(), key=lambda item: item[0])]


_SNIFF_BYTES = 1 << 20  # a record line is far shorter; a file with no newline in 1 MiB is no results file


def check_results_file(path: str | os.PathLike[str]) -> None:
    """Refuse a file that is not a results (or archive) file, before anything reads it as one.

    Looks only at the first non-empty line: it must be UTF-8 JSON holding an object. An empty
    file passes (a run may be about to write it); a bad line further down is left to the reader,
    which names its line.

    Raises:
        ConfigError: ``path`` is a directory, unreadable, not UTF-8 or not JSON lines, naming it.
    """
    where = Path(path)
    hint = "give a results directory of `stateflow run` (its --out) or its results.jsonl"
    if where.is_dir():
        raise ConfigError(f"{where}: is a directory, not a results file; {hint}")
    try:
        with where.open("rb") as fh:
            head = fh.read(_SNIFF_BYTES)
    except OSError as err:
        raise ConfigError(f"{where}: cannot be read ({err.strerror or err}); {hint}") from None
    first = next((line for line in head.split(b"\n") if line.strip()), None)
    if first is None:
        return
    try:
        data = json.loads(first.decode("utf-8"))
    except UnicodeDecodeError:
        raise ConfigError(f"{where}: not a results file (not UTF-8 text); {hint}") from None
    except json.JSONDecodeError:
        raise ConfigError(f"{where}: not a results file (line 1 is not a JSON record); {hint}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{where}: not a results file (line 1 is JSON but not a record); {hint}")


@dataclass
class LoadReport:
    """What :meth:`ResultsFile.load` read: every complete record, and whether the last line was torn."""

    records: list[EpisodeRecord]
    torn_tail: bool


class ResultsFile:
    """Append-only JSONL of episode records."""

    def __init__(self, path: str | os.PathLike[str]):
        self.path = Path(path)
        self._lock = threading.Lock()

    def load(self, *, repair: bool = False) -> LoadReport:
        """Read every complete record; with ``repair``, cut a torn last line off the file.

        Raises:
            StateFlowError: a complete line is not JSON (names the file and line).
            InvalidRecordError: a complete line is not a valid record (names file, line and field).
        """
        if not self.path.exists():
            return LoadReport([], False)
        raw = self.path.read_bytes()
        cut = raw.rfind(b"\n") + 1  # records end with a newline: anything after the last one is torn
        records: list[EpisodeRecord] = []
        for lineno, line in enumerate(raw[:cut].split(b"\n")[:-1], 1):
            if not line.strip():
                continue
            try:
                data = json.loads(line)
            except (json.JSONDecodeError, UnicodeDecodeError) as err:
                if not records:  # nothing read yet: most likely not a results file at all
                    check_results_file(self.path)
                why = err.msg if isinstance(err, json.JSONDecodeError) else "not UTF-8"
                raise StateFlowError(
                    f"{self.path}:{lineno}: corrupt result record ({why}); fix or remove that line"
                ) from err
            records.append(EpisodeRecord.from_dict(data, where=f"{self.path}:{lineno}"))
        torn = cut < len(raw)
        if torn and repair:
            with self.path.open("r+b") as fh:
                fh.truncate(cut)
        return LoadReport(records, torn)

    def append(self, record: EpisodeRecord) -> None:
        """Append one record atomically (one write, then fsync)."""
        # A model reply decoded from JSON may hold a lone UTF-16 surrogate, which UTF-8 cannot
        # encode; it can only sit inside a JSON string here, where backslashreplace's "\udXXX"
        # is the JSON escape of that same code unit, so the line stays valid UTF-8 and reads
        # back unchanged. Values JSON has no type for (paths, dates) are stored as their text.
        text = json.dumps(record.to_dict(), ensure_ascii=False, default=str) + "\n"
        data = text.encode("utf-8", errors="backslashreplace")
        with self._lock:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                written = os.write(fd, data)
                if written != len(data):  # e.g. disk full: stop; the half line is a torn tail load(repair) cuts
                    raise OSError(f"short write to {self.path} ({written} of {len(data)} bytes)")
                os.fsync(fd)
            finally:
                os.close(fd)

    def extend(self, records: Iterable[EpisodeRecord]) -> None:
        for r in records:
            self.append(r)

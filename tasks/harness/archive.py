"""The record archive: a committed copy of a run's records, without their traces.

A results directory (``runs/...``) is scratch space: it lives on the machine that ran the
episodes and is lost with it. The numbers published in ``docs/results.md`` must not be. So the
paper comparison also keeps every record it reports in an archive file under ``docs/data/``
(:func:`stateflow.tasks.harness.paper.run_paper`), one JSON-lines file per (benchmark, model), committed
with the docs. An archived record is the episode record with its trace dropped
(:func:`compact`): ``history``, ``transitions`` and ``eval`` are emptied, which makes a record
about 1-2 KB instead of 10-100 KB; everything metrics, reports and resume read is kept (reward,
tokens per state and model, wall time, status, the episode identity), and so is the last
command executed (``last_action``), so a failure can still be read.

The archive is read the way a results file is (:class:`~stateflow.tasks.harness.records.ResultsFile`,
newest record per key), and the runner treats an archived record of the same episode identity
as recorded (``RunSpec.archive``): a fresh clone re-running the comparison runs only what the
archive does not hold, and ``--no-run`` rebuilds the tables from the archive alone.

Writes are whole-file and atomic (a temporary file renamed over the old one), sorted by
benchmark, method, task and identity, so a commit's diff shows exactly the episodes that
changed. Records of other settings already in the archive are kept: a run with ``--methods X``
must not drop the other methods. A merge is a read-modify-write, so it holds an exclusive
``flock`` on the archive's directory while it reads and writes: two runs with different
``--out`` directories (say one per core, each running some of the methods) share one archive,
and without the lock the later write would drop the records the earlier one added.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path

from stateflow.tasks.harness.records import ResultsFile, latest_records, record_key
from stateflow.tasks.kit.episode_record import EpisodeRecord

__all__ = ["RecordArchive", "compact"]

# The trace fields: what an episode did, step by step. Reports and resume never read them.
# ``bash_comparison`` goes with ``eval``: it explains a score from the outputs the archive drops.
_TRACE_FIELDS: dict[str, object] = {"history": [], "transitions": [], "eval": {}, "bash_comparison": None}


def compact(record: EpisodeRecord) -> EpisodeRecord:
    """``record`` without its trace (``history``, ``transitions``, ``eval`` emptied,
    ``bash_comparison`` dropped); every other field kept."""
    return record.model_copy(update=_TRACE_FIELDS)


class RecordArchive:
    """One archive file (JSON lines of compact :class:`EpisodeRecord`)."""

    def __init__(self, path: str | os.PathLike[str]):
        self.path = Path(path)

    def load(self) -> list[EpisodeRecord]:
        """The newest archived record of each episode key (none when the file does not exist).

        Raises:
            StateFlowError, InvalidRecordError: a line is not a valid record (names file and line).
        """
        return latest_records(ResultsFile(self.path).load().records)

    def merge(self, records: Iterable[EpisodeRecord]) -> int:
        """Put ``records`` (compacted) into the archive, replacing archived records of the same key.

        Blocks while another process merges into an archive of the same directory.

        Returns:
            How many archived records were added or changed.
        """
        with self.locked():
            kept = {record_key(r): r for r in self.load()}
            changed = 0
            for r in records:
                small = compact(r)
                key = record_key(small)
                if kept.get(key) != small:
                    kept[key] = small
                    changed += 1
            if changed:
                self._write(sorted(kept.values(), key=_order))
        return changed

    @contextlib.contextmanager
    def locked(self) -> Iterator[None]:
        """Hold the exclusive lock of the archive's directory (created if missing), waiting for it.

        The lock is on the directory, not on the file: the file is replaced by a rename on every
        write, so a lock on its old inode would not exclude a process that opened the new one.
        """
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path.parent, os.O_RDONLY)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)  # released by the kernel when fd closes, even on a crash
            yield
        finally:
            os.close(fd)

    def _write(self, records: list[EpisodeRecord]) -> None:
        # Write beside the file and rename over it: a crash mid-write leaves the old archive whole.
        fd, tmp = tempfile.mkstemp(prefix=f".{self.path.name}.", dir=self.path.parent)
        try:
            with os.fdopen(fd, "w", encoding="utf-8", errors="backslashreplace") as fh:
                for r in records:
                    fh.write(json.dumps(r.to_dict(), ensure_ascii=False, default=str, sort_keys=True) + "\n")
                fh.flush()
                os.fsync(fh.fileno())
            os.chmod(tmp, 0o644)  # mkstemp's 0600 would hide a committed file from other users
            os.replace(tmp, self.path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise


def _order(r: EpisodeRecord) -> tuple[str, str, int, str]:
    return r.benchmark, r.method, r.task, r.identity_digest or ""

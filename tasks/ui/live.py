"""The live page's feed: the side files of the episodes a run has in flight, tailed and sent as
server-sent events (:mod:`stateflow.tasks.harness.live_file` writes them).

Every side file under ``<source>/live/`` is read from its start (a page opened mid-episode still
sees the episode's first state) and then followed: each complete new line is sent as one event
``{"src": N, "file": NAME, "line": {...}}``; when a file goes away (its record is saved) a
``{"src": N, "file": NAME, "gone": true}`` follows. Files left by a run that was killed (the
process named in the directory's run lock is gone) are announced once with ``"stale": true``:
they will never be recorded, until the next run into that directory sweeps them. A what-if
replay's directory inside a source (``whatif-*``) is followed the same way (its files are named
``whatif-<...>/<file>``), so a replay started from an episode page or by ``stateflow whatif`` is
listed while it runs. A line torn
by a writer still writing it waits for its newline; a line that is not JSON is skipped (the file
is the runner's, but the reader trusts nothing). Reading is bounded: at most :data:`READ_LIMIT` bytes per file and pass.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from stateflow.tasks.harness.live_file import LIVE_DIR
from stateflow.tasks.harness.run_lock import LOCK_NAME

__all__ = ["READ_LIMIT", "LiveFeed", "sse"]

READ_LIMIT = 256 * 1024
_MAX_FILES = 64  # episodes followed per source at once (workers rarely exceed a handful)


def sse(data: dict[str, Any]) -> bytes:
    """One server-sent event carrying ``data`` as JSON (one line: JSON escapes newlines)."""
    return b"data: " + json.dumps(data, ensure_ascii=False).encode() + b"\n\n"


@dataclass
class _Tail:
    offset: int = 0
    pending: bytes = b""
    stale: bool = False


def _writer_alive(root: Path) -> bool:
    """Whether the process named in ``root``'s run lock (:mod:`stateflow.tasks.harness.run_lock`)
    still runs. The lock file is only read: taking the lock, even shared, could make a run that
    starts at that moment fail."""
    try:
        pid = int((root / LOCK_NAME).read_text(encoding="ascii", errors="replace").strip() or "0")
    except (OSError, ValueError):
        return False
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's live process
        return True
    return True


def _writers(root: Path) -> list[tuple[Path, str]]:
    """The directories under ``root`` whose side files the feed follows, with the prefix of their
    files' names: the run's own, and each what-if replay's (``root/whatif-*``, written by
    :func:`~stateflow.tasks.harness.whatif.run_whatif`: ``stateflow whatif`` or a replay started
    from an episode page)."""
    found = [(root, "")]
    try:
        replays = sorted(p for p in root.glob("whatif-*") if p.is_dir())[:_MAX_FILES]
    except OSError:
        replays = []
    return found + [(p, p.name + "/") for p in replays]


@dataclass
class LiveFeed:
    """Follows the side files of ``roots`` (the UI's results directories, by source number).

    Args:
        roots: ``(source number, directory)`` of every source that is a directory.
        poll_s: how often the files are checked.
        heartbeat_s: a comment is sent this often when nothing happens (a closed page is then
            noticed by the failed write, and its thread ends).
    """

    roots: Sequence[tuple[int, Path]]
    poll_s: float = 0.1
    heartbeat_s: float = 10.0
    _tails: dict[tuple[int, str], _Tail] = field(default_factory=dict)

    def poll(self) -> list[dict[str, Any]]:
        """The events since the last call (new lines, files gone)."""
        out: list[dict[str, Any]] = []
        seen: set[tuple[int, str]] = set()
        for src, root in self.roots:
            for folder, prefix in _writers(root):
                try:
                    files = sorted((folder / LIVE_DIR).glob("*.jsonl"))[:_MAX_FILES]
                except OSError:
                    files = []
                alive = _writer_alive(folder) if files else True
                for path in files:
                    name = prefix + path.stem
                    key = (src, name)
                    seen.add(key)
                    tail = self._tails.setdefault(key, _Tail())
                    out.extend({"src": src, "file": name, "line": line} for line in self._read(path, tail))
                    if not alive and not tail.stale:
                        tail.stale = True
                        out.append({"src": src, "file": name, "stale": True})
        for key in [k for k in self._tails if k not in seen]:
            del self._tails[key]
            out.append({"src": key[0], "file": key[1], "gone": True})
        return out

    @staticmethod
    def _read(path: Path, tail: _Tail) -> list[dict[str, Any]]:
        try:
            with path.open("rb") as f:
                f.seek(tail.offset)
                data = f.read(READ_LIMIT)
        except OSError:  # deleted between the listing and the read: "gone" follows next pass
            return []
        tail.offset += len(data)
        data = tail.pending + data
        complete, _, tail.pending = data.rpartition(b"\n")
        lines = []
        for raw in complete.split(b"\n") if complete else []:
            try:
                line = json.loads(raw)
            except ValueError:
                continue
            if isinstance(line, dict):
                lines.append(line)
        return lines

    def events(self, stop: threading.Event) -> Iterator[bytes]:
        """The feed as server-sent events until ``stop`` is set (or the consumer stops)."""
        yield b"retry: 1000\n\n"
        quiet_since = time.monotonic()
        while not stop.is_set():
            batch = self.poll()
            for item in batch:
                yield sse(item)
            if batch:
                quiet_since = time.monotonic()
            elif time.monotonic() - quiet_since >= self.heartbeat_s:
                quiet_since = time.monotonic()
                yield b": still here\n\n"
            stop.wait(self.poll_s)

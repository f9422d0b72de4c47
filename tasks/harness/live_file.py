"""The episodes a run has in progress, as small side files another process can tail.

``stateflow ui`` runs in another process than ``stateflow run``; it learns of finished episodes
from ``results.jsonl``, and of the episodes in flight from here: while an episode runs, the runner
appends its events (:mod:`stateflow.events`: the state entered, each token as it streams, each
step, each transition) as JSON lines to ``OUT/live/<identity digest>-<task>.jsonl``, and deletes
that file right after the episode's record is appended to ``results.jsonl``.

Why a side file, not a socket the runner serves: the runner then never waits for a reader (an
absent, slow or stuck UI costs it nothing: a local append is all it does), nothing listens on a
port, and a UI started in the middle of an episode still sees the episode from its first event.
The records are not touched: what a record holds, and its identity, are the same with or without
this file.

Bounds: a step's text is cut to :data:`TEXT_LIMIT` characters and a file stops growing at
:data:`MAX_BYTES` (one ``truncated`` line says so), so a runaway reply cannot fill the disk. A
write that fails (a full disk, a removed directory) turns the file off for that episode; the run
goes on.

Lines (one JSON object each, ``type`` first): ``episode`` (method, task, query, models, start
time), ``state`` (entered), ``token`` (state, text), ``step`` (state, kind, name, text),
``transition`` (source, target, rule), ``end`` (status), ``truncated``.
"""

from __future__ import annotations

import contextlib
import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from stateflow.events import Event, StateEntered, StepRecorded, TokenDelta, ToolReturned, TransitionTaken

__all__ = ["LIVE_DIR", "MAX_BYTES", "TEXT_LIMIT", "LiveEpisode", "LiveFile", "clear_live", "live_path"]

LIVE_DIR = "live"
MAX_BYTES = 512 * 1024  # per episode: thousands of streamed tokens and a few dozen steps
TEXT_LIMIT = 4000  # characters of one step's text (an observation can be a whole table)


def live_path(out: Path, digest: str, task: int) -> Path:
    """The side file of the episode of identity ``digest`` on ``task`` in results directory ``out``."""
    return out / LIVE_DIR / f"{digest[:16]}-{int(task)}.jsonl"


def clear_live(out: Path) -> None:
    """Delete every side file in ``out`` (a run starting, or ending: none of them is in flight).

    The caller holds the run lock, so no other run is writing them."""
    folder = out / LIVE_DIR
    if not folder.is_dir():
        return
    for f in folder.glob("*.jsonl"):
        with contextlib.suppress(OSError):
            f.unlink()


@dataclass(frozen=True)
class LiveEpisode:
    """What the first line of a side file says about its episode."""

    method: str
    task: int
    query: str
    models: str
    started: float

    def to_dict(self) -> dict[str, Any]:
        return {
            "type": "episode",
            "method": self.method,
            "task": self.task,
            "query": self.query,
            "models": self.models,
            "started": self.started,
        }


class LiveFile:
    """An event sink (``run(on_event=...)``) writing one episode's side file.

    Args:
        path: the file (see :func:`live_path`); its directory is created.
        episode: written as the first line.
    """

    def __init__(self, path: Path, episode: LiveEpisode):
        self.path = path
        self._size = 0
        self._full = False
        self._out: IO[bytes] | None = None
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._out = path.open("wb")
        except OSError:
            return  # no side file for this episode; the episode runs as always
        self._write(episode.to_dict())

    def _write(self, line: dict[str, Any], *, last: bool = False) -> None:
        if self._out is None or (self._full and not last):
            return
        data = (json.dumps(line, ensure_ascii=False, default=str) + "\n").encode()
        try:
            if self._size + len(data) > MAX_BYTES and not last:
                self._full = True
                data = b'{"type": "truncated"}\n'
            self._out.write(data)
            self._out.flush()  # a reader in another process sees each line as soon as it is written
            self._size += len(data)
        except OSError:
            self.close()

    def __call__(self, event: Event) -> None:
        """Record ``event`` (events with nothing to show live are skipped)."""
        line = _line(event)
        if line is not None:
            self._write(line)

    def end(self, status: str) -> None:
        """The episode finished with ``status``; the file is closed (the runner deletes it once
        the record is saved)."""
        self._write({"type": "end", "status": status, "at": time.time()}, last=True)  # a few bytes past the bound
        self.close()

    def close(self) -> None:
        out, self._out = self._out, None
        if out is not None:
            with contextlib.suppress(OSError):
                out.close()


def _line(event: Event) -> dict[str, Any] | None:
    if isinstance(event, TokenDelta):
        return {"type": "token", "state": event.state, "text": event.text}
    if isinstance(event, StateEntered):
        return {"type": "state", "state": event.state, "visit": event.visit, "at": event.at}
    if isinstance(event, TransitionTaken):
        r = event.record
        return {"type": "transition", "source": r.source, "target": r.target, "rule": r.rule}
    if isinstance(event, StepRecorded | ToolReturned):
        step = event.step
        message = step.message
        text = message.content if message is not None else ""
        return {
            "type": "step",
            "state": step.state,
            "output": step.output,
            "name": message.name if message is not None else "",
            "kind": message.kind.value if message is not None else "",
            "text": str(text or "")[:TEXT_LIMIT],
            "streamed": getattr(event, "streamed", False),
        }
    return None

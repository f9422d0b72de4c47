"""Progress lines for long waits, where a person is watching.

A run on the embedded model can be minutes of silence: the model server starts (seconds), then
each state's model call takes seconds to tens of seconds on a laptop's cores.
:func:`stateflow.run` (and ``resume``, ``fork``) and the embedded model's server pool print one
line per step of that wait to standard error, so a person at a terminal sees what is happening:

.. code-block:: text

    stateflow: starting the embedded model local-small (first use in this process)...
    stateflow: embedded model local-small ready after 3.0 s
    stateflow: draft-review: now in Draft (0.0 s so far)
    stateflow: draft-review: Draft replied (142 tokens, 21.4 s)
    stateflow: draft-review: now in Review (21.4 s so far)
    ...
    stateflow: draft-review: finished in Done after 3 states, 58.2 s

When: by default only where a person is watching, i.e. standard error is a terminal. Nothing is
printed when it is a pipe or a file (logs, CI, tests), when ``STATEFLOW_PROGRESS=0`` (or
``off``, ``no``, ``false``), or for ``run(..., progress=False)``; ``STATEFLOW_PROGRESS=1``
forces the lines on. The benchmark runner (``stateflow run BENCHMARK``: its own progress bar,
episodes in parallel), ``stateflow run FLOW --stream`` (it prints every event) and ``stateflow
serve`` (many concurrent runs) turn them off. The lines only observe the run: its result, trace and records, and so an
evaluation's episode identities, are the same with or without them (a model call is made the
same way: progress asks for no streamed tokens).
"""

from __future__ import annotations

import os
import sys
import threading
import time
from typing import TextIO

from stateflow.events import Event, RunFinished, StateEntered, StepRecorded

__all__ = ["ProgressPrinter", "progress_enabled", "say"]

_OFF = {"0", "off", "no", "false"}
_ON = {"1", "on", "yes", "true"}
_PREFIX = "stateflow: "
_print_lock = threading.Lock()


def progress_enabled(stream: TextIO | None = None, setting: bool | None = None) -> bool:
    """Whether progress lines go to ``stream`` (default: ``sys.stderr``).

    Args:
        stream: where the lines would go.
        setting: the caller's explicit choice (``run(progress=...)``); ``None``: decide from
            ``STATEFLOW_PROGRESS``, else from whether ``stream`` is a terminal.
    """
    if setting is not None:
        return setting
    env = os.environ.get("STATEFLOW_PROGRESS", "").strip().lower()
    if env in _OFF:
        return False
    if env in _ON:
        return True
    stream = stream if stream is not None else sys.stderr
    try:
        return bool(stream is not None and stream.isatty())
    except (AttributeError, ValueError):  # a closed or replaced stream
        return False


def say(text: str, stream: TextIO | None = None) -> None:
    """Write one progress line (when :func:`progress_enabled`); a failed write is ignored."""
    stream = stream if stream is not None else sys.stderr
    if not progress_enabled(stream):
        return
    _write(stream, text)


def _write(stream: TextIO, text: str) -> None:
    try:
        with _print_lock:
            stream.write(_PREFIX + text + "\n")
            stream.flush()
    except (OSError, ValueError):  # a closed terminal must not end the run
        pass


class ProgressPrinter:
    """An event sink (``run(on_event=...)``) printing a line per state entered, per model reply
    and at the end (see the module docstring).

    Args:
        flow: the flow's name, at the start of every line.
        stream: where the lines go (default: ``sys.stderr`` at each line).
    """

    def __init__(self, flow: str, stream: TextIO | None = None):
        self.flow = flow
        self.stream = stream
        self.started = time.monotonic()
        self.states = 0

    def _line(self, text: str) -> None:
        _write(self.stream if self.stream is not None else sys.stderr, f"{self.flow}: {text}")

    def __call__(self, event: Event) -> None:
        if isinstance(event, StateEntered):
            self.states += 1
            self._line(f"now in {event.state} ({time.monotonic() - self.started:.1f} s so far)")
        elif isinstance(event, StepRecorded) and event.step.usage is not None:
            u = event.step.usage
            self._line(f"{event.step.state} replied ({u.completion_tokens} tokens, {event.step.latency_s:.1f} s)")
        elif isinstance(event, RunFinished):
            r = event.result
            if r.stop_reason == "final":
                how = f"in {r.exit_state}"
            elif r.stop_reason == "max_transitions":
                how = f"at the transition bound, in {r.exit_state}"
            else:
                how = f"{r.status} in {r.exit_state} ({r.error or r.stop_reason})"
            elapsed = time.monotonic() - self.started
            self._line(f"finished {how} after {self.states} states, {elapsed:.1f} s")

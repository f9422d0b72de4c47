"""Stopping a long run from outside: SIGTERM and SIGINT both mean "finish what is in flight".

The runner treats ``KeyboardInterrupt`` as a request to stop scheduling episodes, let the
running ones finish and be recorded, and exit 130 (a second one aborts). A terminal's Ctrl-C
sends SIGINT, but runs are often started otherwise: a shell script's ``cmd &`` starts it with
SIGINT *ignored* (POSIX job control), and ``kill``, systemd, Slurm and container stops send
SIGTERM, whose default action would kill the run with episodes half done. Inside
:func:`stop_on_signals` both signals raise ``KeyboardInterrupt`` in the main thread instead.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

__all__ = ["stop_on_signals"]

_SIGNALS = (signal.SIGINT, signal.SIGTERM)


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt(f"stopped by {signal.Signals(signum).name}")


@contextmanager
def stop_on_signals() -> Iterator[None]:
    """While inside, SIGINT and SIGTERM raise ``KeyboardInterrupt``; the previous handlers are
    restored on exit. Outside the main thread (where handlers cannot be set) it does nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {s: signal.getsignal(s) for s in _SIGNALS}
    for s in _SIGNALS:
        signal.signal(s, _interrupt)
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)

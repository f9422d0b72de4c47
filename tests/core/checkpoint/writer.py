"""Child process for the kill -9 tests: continues several threads forever, one put at a time.

Usage: ``python -m tests.core.checkpoint.writer BACKEND ADDRESS THREADS``; prints ``ready`` once the
store is open, then round-robins over ``w0 .. w{THREADS-1}``, each time reading the thread's latest
checkpoint and writing the next one (a history growing by two ~300-character messages per step),
exactly as a resumed run would. Killed at a random moment by the test.
"""

from __future__ import annotations

import sys
import time

from stateflow.checkpoint import Checkpoint, ThreadStatus
from tests.core.checkpoint.stores import open_store


def next_checkpoint(thread_id: str, previous: Checkpoint | None) -> Checkpoint:
    step = 0 if previous is None else previous.step + 1
    history = [] if previous is None else list(previous.payload["history"])
    history += [f"{thread_id}/{step}/{k} " + "x" * 300 for k in (0, 1)]
    return Checkpoint(
        thread_id=thread_id,
        step=step,
        flow_name="writer",
        flow_fingerprint="ab" * 32,
        state=f"S{step % 5}",
        status=ThreadStatus.RUNNING,
        payload={"history": history, "vars": {"step": step}},
        created_at=time.time(),
    )


def main(backend: str, address: str, threads: str) -> None:
    store = open_store(backend, address)
    names = [f"w{i}" for i in range(int(threads))]
    print("ready", flush=True)
    while True:
        for name in names:
            store.put(next_checkpoint(name, store.latest(name)))


if __name__ == "__main__":
    main(*sys.argv[1:4])

"""A process that runs (or continues) the durable demo flow in a SQLite-checkpointed thread.

Used by the kill -9 test: ``python -m tests.core.durable.child URL DB VIEW THREAD``. It prints
``ready`` once its imports are done (so the test kills it while it runs, not while it loads),
then runs thread THREAD on task THREAD; an existing thread is continued from its latest checkpoint. It prints
the run's path and exits 0 when the thread finishes.
"""

from __future__ import annotations

import sys

from stateflow.sf_agent import SFAgentView

from stateflow.checkpoint import SQLiteCheckpointer
from stateflow.runtime import run
from tests.core.durable.flows import fake_profile, long_flow


def main(url: str, db: str, view: str, thread: str) -> int:
    print("ready", flush=True)
    cp = SQLiteCheckpointer(db)
    try:
        result = run(
            long_flow(url),
            thread,
            models=fake_profile(url),
            view=SFAgentView() if view == "sf_agent" else None,
            checkpointer=cp,
            thread_id=thread,
            telemetry=False,
        )
    finally:
        cp.close()
    print(" ".join(result.path), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:5]))

"""Processes that run (or continue) the durable demo flow in a SQLite-checkpointed thread.

Used by the kill -9 test. ``python -m tests.core.durable.child`` is a *zygote*: it imports the
framework once (4 s on a loaded 2-core machine), prints ``ready``, then reads one JSON job per
line on stdin (``{"url", "db", "view", "thread", "answer"}``) and forks a fresh process for each:
it prints ``started PID``, waits for that process and prints ``exit PID CODE`` (CODE as
``subprocess`` reports it: negative for a signal). The test SIGKILLs the forked processes, which
are real processes running a real thread on a real SQLite file; forking only saves the imports,
so a test can afford many kills.

A job runs thread THREAD on task THREAD: a new thread starts, a thread that is running continues
from its latest checkpoint, a thread paused on its question is resumed with ``answer`` (the
person answering from the next process). Exit codes: 0 finished, 3 paused, 1 an error (its
traceback on stderr).
"""

from __future__ import annotations

import json
import os
import sys
import traceback

from stateflow.sf_agent import SFAgentView

from stateflow.checkpoint import SQLiteCheckpointer
from stateflow.runtime import resume, run
from tests.core.durable.flows import fake_profile, long_flow

PAUSED = 3


def run_job(url: str, db: str, view: str, thread: str, answer: str) -> int:
    """Run, continue or resume one thread; 0 when it finished, PAUSED when it waits for a person."""
    cp = SQLiteCheckpointer(db)
    try:
        flow = long_flow(url, defer=True, approve_first=True)
        latest = cp.latest(thread)
        common = {
            "models": fake_profile(url),
            "view": SFAgentView() if view == "sf_agent" else None,
            "telemetry": False,
        }
        if latest is not None and latest.status.value == "paused":
            result = resume(thread, answer, checkpointer=cp, flow=flow, **common)
        else:
            result = run(flow, thread, checkpointer=cp, thread_id=thread, **common)
    finally:
        cp.close()
    return PAUSED if result.status == "paused" else 0


def _forked(job: dict[str, str]) -> int:
    try:
        return run_job(job["url"], job["db"], job["view"], job["thread"], job["answer"])
    except BaseException:
        traceback.print_exc()
        return 1
    finally:
        sys.stderr.flush()


def main() -> int:
    print("ready", flush=True)
    for line in sys.stdin:
        pid = os.fork()
        if pid == 0:  # the job's own process: leave without the zygote's exit handlers
            os._exit(_forked(json.loads(line)))
        print(f"started {pid}", flush=True)
        _, status = os.waitpid(pid, 0)
        print(f"exit {pid} {os.waitstatus_to_exitcode(status)}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

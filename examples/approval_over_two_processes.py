"""A run that waits for a person's approval across processes: pause, exit, resume elsewhere.

The model drafts a release note; a person must approve it before it is published. The
``Approve`` state asks with ``Human(defer=True)``: instead of waiting on a console, the run saves
a checkpoint and returns ``status == "paused"`` with the question, and this process exits. Any
later process (minutes or days later, on this machine with SQLite, or another machine with a
PostgreSQL store) answers with ``resume``; nothing the run already did is done again.

Run as written (the embedded 0.5B model starts by itself; ``--model NAME`` picks another profile)::

    python examples/approval_over_two_processes.py            # pauses, then resumes in a 2nd process
    python examples/approval_over_two_processes.py start      # only pause (prints the thread id)
    python examples/approval_over_two_processes.py answer ID yes

The same from the command line (from any directory): ``stateflow run
examples/approval_over_two_processes.py:FLOW --task ... --thread ID`` and
``stateflow resume ID --answer yes``.
"""

from __future__ import annotations

import argparse
import subprocess
import sys

from stateflow import LLM, Flow, Human, Kind, Prompt, State, Transition, last_matches, resume, run
from stateflow.checkpoint.location import open_checkpointer

# Where the paused run waits: $STATEFLOW_CHECKPOINTS (a SQLite file or a postgresql:// DSN), else
# threads.db in the user data directory, the store `stateflow threads` and `stateflow resume` read.


def build() -> Flow:
    draft = State("Draft", Prompt("Write a one-sentence release note for the change below."), LLM())
    approve = State("Approve", Human(prompt="Publish this note? (yes, or what to change)", defer=True, name="editor"))
    published = State("Published", final=True)
    return Flow(
        "release-approval",
        initial=draft,
        max_transitions=6,
        transitions=[
            Transition(draft, approve),
            Transition(approve, published, when=last_matches(r"(?i)^\s*yes\b", kind=Kind.HUMAN)),
            Transition(approve, draft),  # anything else is a change request: draft again
        ],
    )


FLOW = build()


def start(model: str) -> str:
    """Run until the question; return the thread id (the run is saved in the checkpoint store)."""
    store = open_checkpointer()
    try:
        result = run(
            FLOW, "Change: runs can pause for a person and resume in another process.", models=model, checkpointer=store
        )
    finally:
        store.close()
    assert result.status == "paused" and result.pending is not None
    print(f"paused in state {result.pending.state} (thread {result.thread_id}):\n{result.pending.question}")
    return str(result.thread_id)


def answer(thread: str, text: str, model: str) -> None:
    """Answer the question of a paused thread and run it on (this may be another process)."""
    store = open_checkpointer()
    try:
        result = resume(thread, text, checkpointer=store, flow=FLOW, models=model)
    finally:
        store.close()
    print(f"{result.status}: {' -> '.join(result.path)}")
    if result.pending is not None:  # a change was asked for: the new draft waits again
        print(f"paused again:\n{result.pending.question}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mode", nargs="?", choices=["start", "answer"], help="default: both, in two processes")
    parser.add_argument("thread", nargs="?")
    parser.add_argument("text", nargs="?", default="yes")
    parser.add_argument("--model", default="local-small", help="a profile name (default: the embedded 0.5B model)")
    args = parser.parse_args()
    if args.mode == "start":
        start(args.model)
    elif args.mode == "answer":
        if not args.thread:
            parser.error("answer needs the thread id")
        answer(args.thread, args.text, args.model)
    else:
        thread = start(args.model)
        # this process is done; a second one answers (it shares nothing with this one but the store)
        subprocess.run([sys.executable, __file__, "answer", thread, "yes", "--model", args.model], check=True)


if __name__ == "__main__":
    main()

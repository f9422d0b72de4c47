"""Threads: a run saved under an id, one checkpoint per transition, continued or forked later.

A *thread* is the sequence of checkpoints one run writes through a
:class:`~stateflow.checkpoint.Checkpointer`: step 0 when the run enters its first state, one
step at every transition, one when it pauses on a deferred question, and a last one when it
finishes or fails. :func:`stateflow.run` continues a thread from its latest checkpoint,
:func:`stateflow.resume` answers a paused one, :func:`stateflow.fork` starts a new thread from
any checkpoint of another (reusing the prefix instead of asking the models again), and
:func:`history` lists a thread's checkpoints.

This module holds the bookkeeping (the :class:`ThreadJournal` an episode writes through, the
checks before a thread is continued); :mod:`stateflow.runtime` runs the episodes.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from stateflow.checkpoint import Checkpoint, Checkpointer, ThreadStatus
from stateflow.checkpoint.payload_text import PayloadText
from stateflow.errors import (
    CheckpointCorrupt,
    CheckpointMismatch,
    CheckpointNotFound,
    ConfigError,
    ThreadNotContinuable,
    ThreadNotFound,
)
from stateflow.flow import Flow
from stateflow.run_state import PayloadEncoder, RunState

__all__ = ["CheckpointSummary", "ThreadJournal", "check_flow", "history", "latest_to_continue", "load_position"]


class ThreadJournal:
    """Writes one thread's checkpoints as its episode runs (the episode's :class:`~stateflow.episode.Journal`).

    Args:
        checkpointer: where checkpoints go.
        thread_id: the thread.
        flow: the flow the episode runs (its name and fingerprint go into every checkpoint).
        fingerprint: the flow's fingerprint (computed once by the caller).
        next_step: the step of the next checkpoint (0 for a new thread).
        parent: ``(thread_id, step)`` a forked thread started from.
        extra: JSON facts saved next to the run state (e.g. the flow's import reference).
    """

    def __init__(
        self,
        checkpointer: Checkpointer,
        thread_id: str,
        flow: Flow,
        fingerprint: str,
        next_step: int,
        parent: tuple[str, int] | None = None,
        extra: Mapping[str, Any] | None = None,
    ):
        self.checkpointer, self.thread_id = checkpointer, thread_id
        self.flow_name, self.fingerprint = flow.name, fingerprint
        self.next_step, self.parent = next_step, parent
        self.extra = dict(extra or {})
        self.last: Checkpoint | None = None
        self._encoder = PayloadEncoder()  # each message and step of the run is encoded once

    def save(self, state: RunState, status: str) -> None:
        payload = {**state.to_payload(self._encoder), **self.extra}
        try:
            text: PayloadText | None = self._encoder.text(payload)  # in parts: joined only where needed
        except (TypeError, ValueError):
            text = None  # not JSON: the checkpointer's own encoding names the problem
        self._put(state.state, ThreadStatus(status), payload, text)

    def fail(self, error: str) -> None:
        if self.last is None:  # nothing saved yet: the run failed before its first state
            return
        payload = {**self.last.payload, "stop_reason": "error", "error": error}
        self._put(self.last.state, ThreadStatus.FAILED, payload)

    def _put(
        self, state: str, status: ThreadStatus, payload: dict[str, Any], text: str | PayloadText | None = None
    ) -> None:
        parts = text if isinstance(text, PayloadText) else None
        checkpoint = Checkpoint(
            thread_id=self.thread_id,
            step=self.next_step,
            flow_name=self.flow_name,
            flow_fingerprint=self.fingerprint,
            state=state,
            status=status,
            payload=payload,
            created_at=time.time(),
            parent=self.parent if self.next_step == 0 else None,
            payload_json=text if isinstance(text, str) else None,
            payload_text=parts,
        )
        self.checkpointer.put(checkpoint)
        self.next_step += 1
        # a failed run is continued from the last position it reached, not from the failure
        if status is not ThreadStatus.FAILED:
            self.last = checkpoint


def check_flow(checkpoint: Checkpoint, flow: Flow, fingerprint: str) -> None:
    """Refuse to continue ``checkpoint`` under a flow with another definition.

    Raises:
        CheckpointMismatch: the fingerprints differ (the error names both flows and fingerprints).
    """
    if checkpoint.flow_fingerprint != fingerprint:
        raise CheckpointMismatch(
            checkpoint.thread_id,
            (checkpoint.flow_name, checkpoint.flow_fingerprint),
            (flow.name, fingerprint),
            checkpoint.step,
        )


def load_position(checkpoint: Checkpoint, flow: Flow) -> RunState:
    """The run state saved in ``checkpoint``, checked against ``flow``'s states.

    Raises:
        CheckpointCorrupt: the payload cannot be read.
        ConfigError: the saved state is not a state of ``flow`` (a fork onto another flow).
    """
    where = f"thread {checkpoint.thread_id!r} step {checkpoint.step}"
    state = RunState.from_payload(checkpoint.payload, where=where)
    if state.state not in flow.states:
        raise ConfigError(
            f"{where} is in state {state.state!r}, which flow {flow.name!r} does not have "
            f"(its states: {', '.join(flow.states)})"
        )
    return state


def latest_to_continue(checkpointer: Checkpointer, thread_id: str, *, answering: bool) -> Checkpoint:
    """The checkpoint a thread continues from, after checking it can continue that way.

    Raises:
        ThreadNotFound: no such thread.
        ThreadNotContinuable: the thread finished, waits for an answer that was not given, or was
            given an answer it does not wait for.
    """
    latest = checkpointer.latest(thread_id)
    if latest is None:
        raise ThreadNotFound(thread_id, type(checkpointer).__name__)
    paused = latest.status is ThreadStatus.PAUSED
    if latest.status is ThreadStatus.FINISHED or paused != answering:
        question = (latest.payload.get("pending") or {}).get("question") if paused else None
        raise ThreadNotContinuable(
            thread_id,
            latest.status.value,
            latest.state,
            None if question is None else str(question),
            answering=answering,
        )
    return latest


@dataclass(frozen=True)
class CheckpointSummary:
    """One line of a thread's history.

    Attributes:
        step: the checkpoint's step.
        state: the state the run was in.
        status: ``running``, ``paused``, ``finished`` or ``failed``.
        last_message: the end of the last history message (who said it, and what).
        prompt_tokens, completion_tokens: the run's usage up to this checkpoint.
        seconds: wall time from the run's start to this checkpoint.
        transitions: transitions taken so far.
    """

    step: int
    state: str
    status: str
    last_message: str
    prompt_tokens: int
    completion_tokens: int
    seconds: float
    transitions: int

    def __str__(self) -> str:
        if self.status == "damaged":
            return f"{self.step:>4}  {self.status:<8} {self.last_message}"
        return (
            f"{self.step:>4}  {self.status:<8} {self.state:<16} {self.transitions:>3} tr  "
            f"{self.prompt_tokens:>7}/{self.completion_tokens:<6} tok  {self.seconds:8.2f} s  {self.last_message}"
        )


def _summary(checkpoint: Checkpoint) -> CheckpointSummary:
    payload = checkpoint.payload
    history = payload.get("history") or []
    last = history[-1] if history else None
    if isinstance(last, dict):
        said = f"[{last.get('name')}] {' '.join(str(last.get('content', '')).split())}"
    else:  # a payload not written by a run (a hand-made store): show what is there
        said = "" if last is None else " ".join(str(last).split())
    prompt = completion = 0
    for step in payload.get("steps") or []:
        usage = step.get("usage") or {}
        prompt += int(usage.get("prompt_tokens") or 0)
        completion += int(usage.get("completion_tokens") or 0)
    return CheckpointSummary(
        step=checkpoint.step,
        state=checkpoint.state,
        status=checkpoint.status.value,
        last_message=said if len(said) <= 80 else said[:77] + "...",
        prompt_tokens=prompt,
        completion_tokens=completion,
        seconds=max(0.0, checkpoint.created_at - float(payload.get("started_at") or checkpoint.created_at)),
        transitions=len(payload.get("transitions") or []),
    )


def history(thread_id: str, *, checkpointer: Checkpointer) -> list[CheckpointSummary]:
    """Every checkpoint of a thread, oldest first, summarised (what :func:`stateflow.fork` can start from).

    A damaged checkpoint hides only what cannot be read without it: the thread is then read
    step by step, and each unreadable step is a summary with status ``damaged`` and its
    problem as ``last_message``, so the readable steps around it can still be picked for a fork.

    Raises:
        ThreadNotFound: no such thread.
    """
    try:
        return [_summary(c) for c in checkpointer.list(thread_id)]
    except CheckpointCorrupt:
        pass
    last = next((t.step for t in checkpointer.threads() if t.thread_id == thread_id), None)
    if last is None:
        raise ThreadNotFound(thread_id, repr(checkpointer))
    summaries = []
    for step in range(last + 1):
        try:
            summaries.append(_summary(checkpointer.get(thread_id, step)))
        except (CheckpointCorrupt, CheckpointNotFound) as err:
            problem = err.problem if isinstance(err, CheckpointCorrupt) else "the row is missing"
            summaries.append(CheckpointSummary(step, "?", "damaged", f"cannot be read: {problem}", 0, 0, 0.0, 0))
    return summaries

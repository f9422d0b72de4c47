"""How the database checkpointers store a thread's rows: full records, or changes since the previous step.

A run's history only grows, so copying the whole payload into every row costs O(n^2) bytes per
thread (measured in scripts/bench_checkpoint.py: 987 kB for a 50-step thread against 60 kB of
changes). Rows are therefore one of two kinds, told apart by their JSON:

- **full**: exactly :meth:`Checkpoint.to_json` (a JSON object with ``thread_id`` at the top);
- **delta**: ``{"format": "delta", "base_step": n - 1, "record": {...}}`` where ``record`` is the
  checkpoint's record with its ``payload`` replaced by :func:`~stateflow.checkpoint.delta.payload_delta`
  from step ``n - 1``.

Every step that is a multiple of ``snapshot_every`` is written full (so is any step whose previous
payload the writer cannot read), so reading a step parses at most ``snapshot_every`` rows; callers
always get the full payload. A damaged row makes unreadable itself and the deltas that build on it
up to the next full row, and the error names both steps; other threads are untouched.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from stateflow.checkpoint.delta import apply_delta, identity_delta, payload_delta
from stateflow.checkpoint.record import Checkpoint, canonical_json, load_json_text
from stateflow.checkpoint.tree_text import json_float, tree_dumper
from stateflow.errors import CheckpointCorrupt

__all__ = ["DEFAULT_SNAPSHOT_EVERY", "PayloadCache", "Rebuild", "Stored", "decode_rows", "encode_row", "window_start"]

DEFAULT_SNAPSHOT_EVERY = 10
"""A full row every 10 steps: 6.6x fewer bytes than full copies for a 50-step thread, at most
10 rows parsed per read (scripts/bench_checkpoint.py)."""

_CACHED_THREADS = 256


class Rebuild:
    """A written step's payload as a reader would rebuild it, computed only when asked for.

    A writer that wrote a delta by identity (:func:`encode_row`) keeps this instead of the
    rebuilt payload: the next step of the same run is written by identity too and never needs it,
    so decoding the delta and copying the previous payload at every step was wasted work. It is
    resolved (once) only if a later write needs the step's payload as values.
    """

    __slots__ = ("base", "delta_text", "value")

    def __init__(self, base: dict[str, Any] | Rebuild, delta_text: str):
        self.base: dict[str, Any] | Rebuild | None = base
        self.delta_text = delta_text
        self.value: dict[str, Any] | None = None

    def resolve(self) -> dict[str, Any]:
        if self.value is None:
            base = self.base.resolve() if isinstance(self.base, Rebuild) else self.base
            assert base is not None
            self.value = apply_delta(base, json.loads(self.delta_text))
            self.base = None  # the chain back to the last full row is no longer needed
        return self.value


Stored = dict[str, Any] | Rebuild
"""A step's payload as stored: decoded values, or a :class:`Rebuild` of them."""


@dataclass
class PayloadCache:
    """The last payload each thread was written or read with, as the writer's base for a delta.

    Bounded (least recently used threads are forgotten; a forgotten base costs one window read).
    Payloads are kept as decoded from their canonical JSON (or as a :class:`Rebuild` of that),
    so no caller can mutate them.
    """

    entries: OrderedDict[str, tuple[int, Stored, Mapping[str, Any] | None]] = field(default_factory=OrderedDict)

    def get(self, thread_id: str, step: int) -> dict[str, Any] | None:
        entry = self.entries.get(thread_id)
        if entry is None or entry[0] != step:
            return None
        self.entries.move_to_end(thread_id)
        stored = entry[1]
        return stored.resolve() if isinstance(stored, Rebuild) else stored

    def given(self, thread_id: str, step: int) -> tuple[Mapping[str, Any], Stored] | None:
        """The payload object a writer put at ``step`` with its text (see :func:`encode_row`), and
        that step's stored payload, if kept."""
        entry = self.entries.get(thread_id)
        if entry is None or entry[0] != step or entry[2] is None:
            return None
        return entry[2], entry[1]

    def remember(self, thread_id: str, step: int, payload: Stored, given: Mapping[str, Any] | None = None) -> None:
        self.entries[thread_id] = (step, payload, given)
        self.entries.move_to_end(thread_id)
        while len(self.entries) > _CACHED_THREADS:
            self.entries.popitem(last=False)


def window_start(step: int, snapshot_every: int) -> int:
    """The first step a read of ``step`` needs (the last forced full row at or before it)."""
    return step - step % snapshot_every


def encode_row(
    checkpoint: Checkpoint,
    previous: Callable[[], Mapping[str, Any] | None],
    snapshot_every: int,
    given: tuple[Mapping[str, Any], Stored] | None = None,
) -> tuple[str, Stored]:
    """The text to store for ``checkpoint``, and its payload as stored (the writer's next base).

    Args:
        checkpoint: the checkpoint to write (validated here: a bad payload raises CheckpointInvalid).
        previous: gives the payload of step ``checkpoint.step - 1`` as stored, if the writer has it
            (called only when a delta is computed from values).
        snapshot_every: full row every this many steps (1: always full).
        given: the payload *object* the writer put at the previous step with its text (kept only
            for a checkpoint that came with its text), and that step's stored payload.

    The returned payload is built from the stored text (never the caller's objects), so later
    mutations by the caller cannot reach it. A delta is kept only if it rebuilds the payload's
    exact JSON: Python counts ``1``, ``1.0`` and ``True`` as equal, JSON does not. That check
    encodes the whole rebuilt payload, unless ``given`` is there and this checkpoint comes with
    its text too: then the delta is :func:`~stateflow.checkpoint.delta.identity_delta`, exact by
    construction (a part is reused only if it is the same, never-mutated object), and the stored
    payload is returned as a :class:`Rebuild` (decoded only if a later write needs it).
    """
    if given is not None and checkpoint.has_text and checkpoint.step % snapshot_every != 0:
        checkpoint.check()  # every field; the payload is JSON by its writer's promise (its text is given)
        record = {**checkpoint.to_dict(), "payload": _DELTA_SLOT, "created_at": json_float(checkpoint.created_at)}
        delta = identity_delta(given[0], checkpoint.payload)
        parts = checkpoint.payload_text
        # the new items' and changed values' texts as the run's encoder made them (not encoded again)
        delta_text = canonical_json(delta) if parts is None else parts.delta_text(given[0], delta)
        head = _dump_head({"format": "delta", "base_step": checkpoint.step - 1, "record": record})
        if head.count(_DELTA_SLOT_TEXT) == 1:  # else a field holds the slot's text: take the path below
            return head.replace(_DELTA_SLOT_TEXT, delta_text), Rebuild(given[1], delta_text)
    full = checkpoint.to_json()  # validates every field and the whole payload
    base = previous() if checkpoint.step % snapshot_every != 0 else None
    if base is not None:
        record = checkpoint.to_dict()
        record["payload"] = payload_delta(base, checkpoint.payload)
        text = canonical_json({"format": "delta", "base_step": checkpoint.step - 1, "record": record})
        rebuilt = apply_delta(base, json.loads(canonical_json(record["payload"])))  # as a reader decodes it
        expected = checkpoint.given_json() or canonical_json(checkpoint.payload)
        if canonical_json(rebuilt) == expected:
            return text, rebuilt
    return full, json.loads(full)["payload"]


_DELTA_SLOT = "\x00delta\x00"
"""Stands for the delta in a row encoded around the delta's own text."""

_DELTA_SLOT_TEXT = canonical_json(_DELTA_SLOT)
"""The slot's text in the row's text (where the delta's text goes)."""

_dump_head = tree_dumper(canonical_json)
"""``canonical_json`` of a delta row around its slot, written by orjson (the record's fields are
checked plain values; its one float goes through ``json_float``)."""


def _exposed(checkpoint: Checkpoint) -> Checkpoint:
    """A copy whose payload shares nothing with the decoder's bases (rebuilt payloads share list
    items with the previous step's), so a caller mutating it changes no other checkpoint."""
    return replace(checkpoint, payload=json.loads(canonical_json(checkpoint.payload)))


def decode_rows(
    rows: Sequence[tuple[int, Any]], thread_id: str, where: Any, *, strict: bool = False
) -> tuple[list[Checkpoint], dict[str, Any]]:
    """Rebuild consecutive rows ``[(step, text), ...]`` (ascending) into checkpoints.

    The first row must be full unless it is not needed: decoding starts at the last full row whose
    successors are all readable deltas. ``where(step)`` names a row's location for messages.

    Args:
        rows: ``(step, stored text)`` ascending, ending with the step wanted.
        thread_id: their thread (set on errors as ``thread_id``; ``step`` is the step that failed).
        where: ``where(step)`` names a row's location for messages.
        strict: raise at the first damaged row and return every checkpoint (``list``); otherwise
            only the last one is returned (``get``, ``latest``) and only it must be readable.

    Returns:
        Every checkpoint (``strict``) or only the last, with payloads that share nothing with each
        other or with anything else; and the last payload as decoded, for the reader's cache
        (never hand it to a caller).

    Raises:
        CheckpointCorrupt: the last row, or a row it is built on, is damaged, a step is missing,
            or a delta does not fit its base.
    """
    decoded: list[Checkpoint] = []
    base: dict[str, Any] | None = None  # payload of the previous step, when readable
    damaged: tuple[int, CheckpointCorrupt] | None = None  # the latest unreadable row so far
    previous_step: int | None = None
    for step, text in rows:
        if previous_step is not None and step != previous_step + 1:
            gap = previous_step + 1
            damaged = (gap, CheckpointCorrupt(where(gap), "the row is missing", thread_id=thread_id, step=gap))
            base = None
        previous_step = step
        try:
            raw = load_json_text(text, where=where(step))
            if isinstance(raw, dict) and raw.get("format") == "delta":
                if set(raw) != {"format", "base_step", "record"} or raw["base_step"] != step - 1:
                    raise CheckpointCorrupt(where(step), "malformed delta row (keys or base_step)")
                record = raw["record"]
                if not isinstance(record, dict):
                    raise CheckpointCorrupt(where(step), "delta row without a record object")
                if base is None:
                    if damaged is None:  # the window starts in the middle of a delta chain
                        raise CheckpointCorrupt(where(step), "delta row without a full row before it")
                    if not strict and step != rows[-1][0]:
                        continue  # built on the damaged row too; `damaged` keeps naming the root
                    bad_step, err = damaged
                    raise CheckpointCorrupt(
                        where(step),
                        f"stored as changes since step {step - 1}, built on step {bad_step}, which is damaged "
                        f"({err.problem})",
                        thread_id=thread_id,
                        step=step,
                    ) from err
                try:
                    payload = apply_delta(base, record.get("payload"))  # type: ignore[arg-type]
                except (ValueError, TypeError, AttributeError) as err:
                    raise CheckpointCorrupt(where(step), f"delta does not fit step {step - 1}: {err}") from None
                checkpoint = Checkpoint.from_dict(dict(record, payload=payload), where=where(step))
            else:
                checkpoint = Checkpoint.from_dict(raw, where=where(step))
            if checkpoint.step != step:
                raise CheckpointCorrupt(where(step), f"row holds step {checkpoint.step}")
        except CheckpointCorrupt as err:
            err.thread_id = err.thread_id or thread_id
            err.step = step if err.step is None else err.step
            if strict or step == rows[-1][0]:
                raise
            damaged, base = (step, err), None
            continue
        base = dict(checkpoint.payload)
        decoded.append(checkpoint)
    assert base is not None  # the last row decoded, or it raised
    return ([_exposed(c) for c in decoded] if strict else [_exposed(decoded[-1])]), base

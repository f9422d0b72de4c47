"""The checkpoint record: what a run saves after each transition, and its JSON form.

A :class:`Checkpoint` is an immutable value; its :meth:`~Checkpoint.to_json` text is what every
checkpointer stores, and :meth:`~Checkpoint.from_json` is the one place where stored text becomes a
record again, so every backend refuses a damaged or too-new row the same way.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from stateflow.errors import CheckpointCorrupt, CheckpointInvalid, CheckpointSchemaUnsupported

if TYPE_CHECKING:
    from stateflow.checkpoint.payload_text import PayloadText

__all__ = [
    "CHECKPOINT_SCHEMA_VERSION",
    "Checkpoint",
    "ThreadInfo",
    "ThreadStatus",
    "canonical_json",
    "load_json_text",
]

CHECKPOINT_SCHEMA_VERSION = 1
"""Version of the record layout below; a reader refuses rows with a higher version."""


class ThreadStatus(StrEnum):
    """Where a thread stands after its latest checkpoint."""

    RUNNING = "running"
    PAUSED = "paused"
    FINISHED = "finished"
    FAILED = "failed"


def canonical_json(value: Any) -> str:
    """``value`` as canonical JSON text: sorted keys, no spaces, UTF-8 characters kept, no NaN.

    Raises:
        TypeError, ValueError: ``value`` holds something JSON cannot represent.
    """
    return _CANONICAL.encode(value)


# one encoder with canonical_json's settings (json.dumps builds a new one at every call with
# non-default settings); an encoder keeps no state between calls
_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


@dataclass(frozen=True)
class Checkpoint:
    """The state of one thread after one transition.

    Attributes:
        thread_id: the thread (one run, resumable); any non-empty text.
        step: 0, 1, 2, ... consecutive within a thread (one per transition).
        flow_name: the flow's name.
        flow_fingerprint: sha256 hex of the flow definition (refuses resuming under another flow).
        state: the flow state the run is in at this checkpoint.
        status: where the thread stands.
        payload: the run state as JSON types only; checkpointers store it without looking inside.
        created_at: when it was written (``time.time()``).
        parent: ``(thread_id, step)`` this thread was forked from, ``None`` for an original thread.
        schema_version: the record layout version it was written with.
        payload_json: the payload's canonical JSON when the writer already has it (a run encodes
            each message once: :class:`stateflow.run_state.PayloadEncoder`); it must equal
            ``canonical_json(payload)``, and giving it promises that neither the payload nor
            anything in it is changed afterwards (stores then compute the next step's delta by
            object identity: :func:`stateflow.checkpoint.delta.identity_delta`). Not part of the
            value (equality, ``repr``).
        payload_text: the same promise with the text in parts (a run's encoder gives this instead
            of ``payload_json``: a store that writes a delta takes the new items' texts from it,
            and the whole text is joined only where it is needed; see :meth:`given_json`).

    Example:
        >>> cp = Checkpoint("t1", 0, "demo", "ab" * 32, "Init", ThreadStatus.RUNNING, {"h": ["hi"]}, 1.5)
        >>> Checkpoint.from_json(cp.to_json(), where="doc") == cp
        True
    """

    thread_id: str
    step: int
    flow_name: str
    flow_fingerprint: str
    state: str
    status: ThreadStatus
    payload: Mapping[str, Any]
    created_at: float
    parent: tuple[str, int] | None = None
    schema_version: int = field(default=CHECKPOINT_SCHEMA_VERSION)
    payload_json: str | None = field(default=None, compare=False, repr=False)
    payload_text: PayloadText | None = field(default=None, compare=False, repr=False)

    @property
    def has_text(self) -> bool:
        """The writer gave the payload's text (``payload_json`` or ``payload_text``)."""
        return self.payload_json is not None or self.payload_text is not None

    def given_json(self) -> str | None:
        """The payload's canonical JSON as its writer gave it (``payload_json``, or
        ``payload_text`` joined), ``None`` if it gave none."""
        if self.payload_json is not None:
            return self.payload_json
        return None if self.payload_text is None else self.payload_text.json()

    def to_dict(self) -> dict[str, Any]:
        """The record as JSON types (the parent as a two-item list)."""
        return {
            "thread_id": self.thread_id,
            "step": self.step,
            "flow_name": self.flow_name,
            "flow_fingerprint": self.flow_fingerprint,
            "state": self.state,
            "status": str(self.status),
            "payload": self.payload,
            "created_at": self.created_at,
            "parent": None if self.parent is None else [self.parent[0], self.parent[1]],
            "schema_version": self.schema_version,
        }

    def to_json(self) -> str:
        """Canonical JSON text of the whole record.

        Raises:
            CheckpointInvalid: a field has the wrong type or the payload is not JSON (NaN included).
        """
        self.check()
        try:
            given = self.given_json()
            if given is not None:
                head = canonical_json({**self.to_dict(), "payload": _PAYLOAD_SLOT})
                if head.count(_PAYLOAD_SLOT_TEXT) == 1:  # else a field holds the slot's text: encode it all
                    return head.replace(_PAYLOAD_SLOT_TEXT, given)
            return canonical_json(self.to_dict())
        except (TypeError, ValueError) as err:
            raise CheckpointInvalid(self.thread_id, self.step, f"payload is not JSON: {err}") from err

    def check(self) -> None:
        """Validate every field as :meth:`to_json` does, without encoding the payload (a store that
        keeps a given ``payload_json`` as it is needs no more).

        Raises:
            CheckpointInvalid: a field has the wrong type (every problem named at once).
        """
        if self._plainly_valid():
            return
        problems = _field_problems(self.to_dict())
        if problems:
            raise CheckpointInvalid(str(self.thread_id), _int_or(self.step), "; ".join(problems))

    def _plainly_valid(self) -> bool:
        """Every field of the usual exact type and valid: the common case, decided without building
        the record (a run writes one checkpoint per transition). False sends the caller to
        :func:`_field_problems`, which decides the rest and names every problem; anything unusual
        (a subclass, a tuple parent) takes that path, so this only ever says yes for a valid record."""
        parent, created, step, version = self.parent, self.created_at, self.step, self.schema_version
        return (
            type(self.thread_id) is str
            and type(self.flow_name) is str
            and type(self.flow_fingerprint) is str
            and type(self.state) is str
            and bool(self.thread_id and self.flow_name and self.flow_fingerprint and self.state)
            and type(step) is int
            and step >= 0
            and type(self.status) is ThreadStatus
            and type(self.payload) is dict
            and (type(created) is float or type(created) is int)
            and math.isfinite(created)
            and type(version) is int
            and version >= 1
            and (
                parent is None
                or (
                    type(parent) is tuple
                    and len(parent) == 2
                    and type(parent[0]) is str
                    and bool(parent[0])
                    and type(parent[1]) is int
                    and parent[1] >= 0
                )
            )
        )

    @classmethod
    def from_json(cls, text: str, *, where: str) -> Checkpoint:
        """Parse and validate stored text.

        Args:
            text: what :meth:`to_json` wrote (or whatever the store now holds instead).
            where: the location read, for the message (e.g. ``"sqlite runs.db thread 't1' step 3"``).

        Raises:
            CheckpointCorrupt: not JSON, truncated, a missing/unknown/mistyped field, an unknown status.
            CheckpointSchemaUnsupported: written by a newer schema version than ours.
        """
        return cls.from_dict(load_json_text(text, where=where), where=where)

    @classmethod
    def from_dict(cls, raw: Any, *, where: str) -> Checkpoint:
        """Validate a decoded record (see :meth:`from_json`)."""
        if not isinstance(raw, dict):
            raise CheckpointCorrupt(where, f"the record is a JSON {type(raw).__name__}, not an object")
        version = raw.get("schema_version")
        if isinstance(version, int) and not isinstance(version, bool) and version > CHECKPOINT_SCHEMA_VERSION:
            raise CheckpointSchemaUnsupported(where, version, CHECKPOINT_SCHEMA_VERSION)
        problems = _field_problems(raw)
        if problems:
            raise CheckpointCorrupt(where, "; ".join(problems))
        parent = raw["parent"]
        return cls(
            thread_id=raw["thread_id"],
            step=raw["step"],
            flow_name=raw["flow_name"],
            flow_fingerprint=raw["flow_fingerprint"],
            state=raw["state"],
            status=ThreadStatus(raw["status"]),
            payload=raw["payload"],
            created_at=float(raw["created_at"]),
            parent=None if parent is None else (parent[0], parent[1]),
            schema_version=version,
        )


@dataclass(frozen=True)
class ThreadInfo:
    """One thread at a glance (a line of ``stateflow threads``).

    Attributes:
        thread_id: the thread.
        flow_name: its flow.
        status: the status of its latest checkpoint.
        state: the flow state of its latest checkpoint.
        step: its latest step.
        created_at: when its first checkpoint was written.
        updated_at: when its latest checkpoint was written.
        parent: ``(thread_id, step)`` it was forked from, if any.
    """

    thread_id: str
    flow_name: str
    status: ThreadStatus
    state: str
    step: int
    created_at: float
    updated_at: float
    parent: tuple[str, int] | None


_FIELDS = (
    "thread_id",
    "step",
    "flow_name",
    "flow_fingerprint",
    "state",
    "status",
    "payload",
    "created_at",
    "parent",
    "schema_version",
)
_STATUSES = frozenset(s.value for s in ThreadStatus)


_PAYLOAD_SLOT = "\x00payload\x00"
"""Stands for the payload in a record encoded around a given ``payload_json``."""

_PAYLOAD_SLOT_TEXT = json.dumps(_PAYLOAD_SLOT, ensure_ascii=False)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _int_or(value: Any, default: int = -1) -> int:
    return value if _is_int(value) else default


def _field_problems(raw: dict[str, Any]) -> list[str]:
    """Every problem of a record's fields (all at once, so one message says everything)."""
    problems = []
    missing = [f for f in _FIELDS if f not in raw]
    unknown = sorted(set(raw) - set(_FIELDS))
    if missing:
        problems.append(f"missing field(s) {', '.join(missing)}")
    if unknown:
        problems.append(f"unknown field(s) {', '.join(unknown)}")
    for name in ("thread_id", "flow_name", "flow_fingerprint", "state"):
        if name in raw and not (isinstance(raw[name], str) and raw[name]):
            problems.append(f"{name} must be non-empty text, got {raw[name]!r:.60}")
    if "step" in raw and not (_is_int(raw["step"]) and raw["step"] >= 0):
        problems.append(f"step must be an integer >= 0, got {raw['step']!r:.60}")
    if "status" in raw and raw["status"] not in _STATUSES:
        problems.append(f"status {raw['status']!r:.60} is not one of {', '.join(sorted(_STATUSES))}")
    if "payload" in raw and not isinstance(raw["payload"], Mapping):
        problems.append(f"payload must be a JSON object, got {type(raw['payload']).__name__}")
    created = raw.get("created_at")
    if "created_at" in raw and not (
        isinstance(created, int | float) and not isinstance(created, bool) and math.isfinite(created)
    ):
        problems.append(f"created_at must be a finite number, got {created!r:.60}")
    parent = raw.get("parent")
    if parent is not None and not (
        isinstance(parent, list | tuple)
        and len(parent) == 2
        and isinstance(parent[0], str)
        and parent[0]
        and _is_int(parent[1])
        and parent[1] >= 0
    ):
        problems.append(f"parent must be null or [thread_id, step], got {parent!r:.60}")
    version = raw.get("schema_version")
    if "schema_version" in raw and not (_is_int(version) and version >= 1):
        problems.append(f"schema_version must be an integer >= 1, got {version!r:.60}")
    return problems


def load_json_text(text: Any, *, where: str) -> Any:
    """Stored text decoded as JSON.

    Raises:
        CheckpointCorrupt: not text, not JSON, or cut short (says ``truncated``).
    """
    if not isinstance(text, str):
        raise CheckpointCorrupt(where, f"stored value is {type(text).__name__}, not JSON text")
    try:
        return json.loads(text)
    except ValueError as err:  # JSONDecodeError and UnicodeDecodeError
        detail = "truncated" if _looks_truncated(text) else "not JSON"
        raise CheckpointCorrupt(where, f"{detail} ({err}); {len(text)} characters stored") from None


def _looks_truncated(text: str) -> bool:
    """A prefix of a record: it opens an object that never closes."""
    stripped = text.strip()
    return stripped.startswith("{") and not stripped.endswith("}")

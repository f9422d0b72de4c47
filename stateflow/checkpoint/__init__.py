"""Checkpoint storage for durable runs: a record per transition, kept per thread.

A run writes a :class:`Checkpoint` after every transition into a :class:`Checkpointer`; a later
process reads the latest one to resume, lists them for history, or forks from one. Three stores
share one contract and one conformance suite:

- :class:`MemoryCheckpointer`: in this process (tests, notebooks, pause/fork within a session);
- :class:`SQLiteCheckpointer`: one file on this machine, several processes, crash-safe;
- :class:`PostgresCheckpointer`: a PostgreSQL server shared by several machines (extra ``[postgres]``).

See ``docs/checkpoints.md``.
"""

from stateflow.checkpoint.memory import MemoryCheckpointer
from stateflow.checkpoint.postgres import PostgresCheckpointer
from stateflow.checkpoint.protocol import Checkpointer
from stateflow.checkpoint.record import CHECKPOINT_SCHEMA_VERSION, Checkpoint, ThreadInfo, ThreadStatus
from stateflow.checkpoint.sqlite import SQLiteCheckpointer
from stateflow.errors import (
    CheckpointConflict,
    CheckpointCorrupt,
    CheckpointError,
    CheckpointInvalid,
    CheckpointNotFound,
    CheckpointSchemaUnsupported,
    CheckpointStoreUnavailable,
    ClaimLost,
    ThreadBusy,
    ThreadNotContinuable,
    ThreadNotFound,
)

__all__ = [
    "CHECKPOINT_SCHEMA_VERSION",
    "Checkpoint",
    "CheckpointConflict",
    "CheckpointCorrupt",
    "CheckpointError",
    "CheckpointInvalid",
    "CheckpointNotFound",
    "CheckpointSchemaUnsupported",
    "CheckpointStoreUnavailable",
    "Checkpointer",
    "ClaimLost",
    "MemoryCheckpointer",
    "PostgresCheckpointer",
    "SQLiteCheckpointer",
    "ThreadBusy",
    "ThreadInfo",
    "ThreadNotContinuable",
    "ThreadNotFound",
    "ThreadStatus",
]

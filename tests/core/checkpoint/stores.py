"""Open a checkpoint store by (backend, address), as a child process of a test does."""

from __future__ import annotations

from stateflow.checkpoint import Checkpointer, SQLiteCheckpointer


def open_store(backend: str, address: str) -> Checkpointer:
    """``backend`` is ``sqlite`` (address: a file) or ``postgres`` (address: a DSN)."""
    if backend == "sqlite":
        return SQLiteCheckpointer(address)
    if backend == "postgres":
        from stateflow.checkpoint import PostgresCheckpointer

        return PostgresCheckpointer(address)
    raise ValueError(f"unknown backend {backend!r}: sqlite or postgres")

"""Which checkpointer a command line or config means: a SQLite file or a PostgreSQL DSN.

``stateflow run FLOW --task ... --thread ID``, ``stateflow resume`` and ``stateflow threads``
take ``--checkpoints WHERE``; without it, ``$STATEFLOW_CHECKPOINTS``; without that, one SQLite
file in the user's data directory (``platformdirs``; on Linux
``~/.local/share/stateflow/threads.db``), so a run paused in one terminal is found by a resume
in another.
"""

from __future__ import annotations

import os
from pathlib import Path

from stateflow.checkpoint.protocol import Checkpointer
from stateflow.errors import ConfigError

__all__ = ["CHECKPOINTS_ENV", "StoreMissing", "default_checkpoints", "open_checkpointer"]

#: The variable naming the default checkpoint store (a file path or a ``postgresql://`` DSN).
CHECKPOINTS_ENV = "STATEFLOW_CHECKPOINTS"


class StoreMissing(ConfigError):
    """A command that reads threads was pointed at a SQLite file that does not exist.

    Attributes:
        path: the file.
    """

    def __init__(self, path: Path):
        self.path = path
        super().__init__(
            f"no checkpoint store at {path}: nothing was saved there; give the --checkpoints the run "
            f"saved to (or set ${CHECKPOINTS_ENV})"
        )


def default_checkpoints() -> str:
    """``$STATEFLOW_CHECKPOINTS``, else ``threads.db`` in the user data directory."""
    explicit = os.environ.get(CHECKPOINTS_ENV)
    if explicit:
        return explicit
    from platformdirs import user_data_path

    return str(user_data_path("stateflow", appauthor=False) / "threads.db")


def open_checkpointer(where: str | os.PathLike[str] | None = None, *, create: bool = True) -> Checkpointer:
    """The checkpointer at ``where``: ``postgresql://...`` (or ``postgres://``) opens a
    :class:`~stateflow.checkpoint.PostgresCheckpointer`; anything else is a SQLite file (its
    directory is created). ``None``: :func:`default_checkpoints`. ``create=False`` (commands that
    only read or continue threads) refuses a SQLite file that does not exist instead of making one.

    Raises:
        ConfigError: ``where`` is a directory, or a file stands where one of its folders should be,
            or its folder cannot be created (each named, with the fix).
        CheckpointStoreUnavailable: the store cannot be opened (named, without a password).
    """
    text = str(where) if where is not None else default_checkpoints()
    if text.startswith(("postgresql://", "postgres://")):
        from stateflow.checkpoint.postgres import PostgresCheckpointer

        return PostgresCheckpointer(text)
    from stateflow.checkpoint.sqlite import SQLiteCheckpointer

    path = _sqlite_file(Path(text).expanduser(), create=create)
    return SQLiteCheckpointer(path)


def _sqlite_file(path: Path, *, create: bool) -> Path:
    """``path`` checked as a place for a SQLite file, its folder created; errors say what to give."""
    if path.is_dir():
        raise ConfigError(
            f"checkpoint store {path}: is a directory; give a file in it, e.g. --checkpoints {path / 'threads.db'}"
        )
    blocker = next((p for p in path.parents if p.exists() and not p.is_dir()), None)
    if blocker is not None:
        raise ConfigError(f"checkpoint store {path}: {blocker} is a file, not a directory; give another path")
    if not create and not path.exists():
        raise StoreMissing(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise ConfigError(
            f"checkpoint store {path}: cannot create its folder {path.parent} ({err.strerror or err})"
        ) from None
    return path

"""Checks of the command line's own inputs, shared by every command: one clear line each.

A command checks a path or a port here before it starts anything, so a typo never surfaces as an
``OSError`` from deep inside a run (or, worse, after something was written).
"""

from __future__ import annotations

from pathlib import Path

from stateflow.errors import ConfigError

__all__ = ["output_dir"]


def output_dir(path: Path, option: str, *, create: bool = True) -> Path:
    """``path`` as a directory a command may write into (created if missing, unless ``create``
    is false: a dry run checks and writes nothing).

    Args:
        path: the directory the user named.
        option: how the user named it (``"--out"``), for the message.
        create: create it (and its parents) now.

    Raises:
        ConfigError: ``path`` is a file, a file stands where one of its folders should be, or
            it cannot be created; the message names the path and what to give instead.
    """
    if path.exists() and not path.is_dir():
        raise ConfigError(f"{option} {path}: is a file, not a directory; give a directory (it is created if missing)")
    blocker = next((p for p in path.parents if p.exists() and not p.is_dir()), None)
    if blocker is not None:
        raise ConfigError(f"{option} {path}: {blocker} is a file, not a directory; give another path")
    if not create:
        return path
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise ConfigError(f"{option} {path}: cannot be created ({err.strerror or err})") from None
    return path

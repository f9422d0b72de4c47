"""Checks of the command line's own inputs, shared by every command: one clear line each.

A command checks a path or a port here before it starts anything, so a typo never surfaces as an
``OSError`` from deep inside a run (or, worse, after something was written).
"""

from __future__ import annotations

import errno
import socket
from pathlib import Path

from stateflow.errors import ConfigError

__all__ = ["listen_error", "output_dir"]


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


def listen_error(host: str, port: int, err: OSError) -> ConfigError:
    """The one-line error for a server that could not listen on ``host:port``."""
    if err.errno == errno.EADDRINUSE:
        return ConfigError(f"--port {port}: already in use on {host}; choose another (--port 0 picks a free one)")
    if isinstance(err, socket.gaierror):
        return ConfigError(f"--host {host}: unknown host name ({err.strerror or err})")
    if err.errno == errno.EADDRNOTAVAIL:
        return ConfigError(f"--host {host}: not an address of this machine ({err.strerror or err})")
    if err.errno == errno.EACCES:
        return ConfigError(f"--port {port}: not allowed for this user (ports below 1024 need privileges)")
    return ConfigError(f"cannot listen on {host}:{port} ({err.strerror or err})")

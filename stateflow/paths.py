"""Where StateFlow keeps its user cache (models, wheels, database templates, downloaded data).

One setting: ``$STATEFLOW_CACHE_DIR``. Without it, the platform's user cache directory from
``platformdirs`` (on Linux ``$XDG_CACHE_HOME/stateflow``, by default ``~/.cache/stateflow``).
The older ``$STATEFLOW_CACHE`` is still honoured, with a ``FutureWarning`` (shown to users).
"""

from __future__ import annotations

import os
import warnings
from importlib.resources import files
from pathlib import Path

__all__ = ["CACHE_ENV", "cache_dir", "resource_path"]

#: The documented variable.
CACHE_ENV = "STATEFLOW_CACHE_DIR"
_LEGACY_ENV = "STATEFLOW_CACHE"


def cache_dir() -> Path:
    """StateFlow's cache directory (not created here).

    >>> import os; os.environ["STATEFLOW_CACHE_DIR"] = "/tmp/sf-cache"
    >>> str(cache_dir())
    '/tmp/sf-cache'
    >>> del os.environ["STATEFLOW_CACHE_DIR"]
    """
    explicit = os.environ.get(CACHE_ENV)
    if explicit:
        return Path(explicit).expanduser()
    legacy = os.environ.get(_LEGACY_ENV)
    if legacy:
        warnings.warn(
            f"${_LEGACY_ENV} is deprecated; set ${CACHE_ENV} instead (same meaning)", FutureWarning, stacklevel=2
        )
        return Path(legacy).expanduser()
    from platformdirs import user_cache_path

    return user_cache_path("stateflow", appauthor=False)


def resource_path(package: str, *parts: str) -> Path:
    """A file or directory shipped inside ``package`` (e.g. ``"stateflow.envs.sql"``), as a real path.

    Found with :mod:`importlib.resources`, so it works the same from a checkout, an editable
    install and a wheel. Docker build contexts and the sandbox's bind mounts need real paths, so a
    package imported from a zip archive is refused rather than extracted behind the user's back.

    Raises:
        FileNotFoundError: the package is not on the file system (zip import).
    """
    root = files(package)
    if not isinstance(root, Path):
        raise FileNotFoundError(f"{package} is not installed as files on disk ({root!r}); install it unzipped")
    return root.joinpath(*parts)

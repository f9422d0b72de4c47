"""Flows named by reference: ``module:attribute``, importable from the current directory.

This is how a user's own flow reaches the command line (``stateflow graph my_flows:ONE_SHOT``,
``stateflow run intercode-sql --method my_flows:ONE_SHOT``) without registering it anywhere.

Example:
    >>> is_flow_ref("my_flows:ONE_SHOT"), is_flow_ref("stateflow")
    (True, False)
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable
from pathlib import Path

from stateflow.errors import ConfigError
from stateflow.flow import Flow

__all__ = ["is_flow_ref", "load_flow"]


def is_flow_ref(text: str) -> bool:
    """Whether ``text`` has the ``module:attribute`` shape (both parts non-empty)."""
    module_name, sep, attr = text.partition(":")
    return bool(sep and module_name and attr)


def load_flow(ref: str) -> Flow:
    """Import ``module:attribute`` (from the current directory first) and return the flow it names.

    The attribute is a :class:`Flow`, or a zero-argument callable returning one.

    Raises:
        ConfigError: a malformed reference, a module that cannot be imported, a missing attribute,
            or an object that is no flow.
    """
    if not is_flow_ref(ref):
        raise ConfigError(f"flow reference {ref!r}: expected module:attribute (e.g. my_flows:ONE_SHOT)")
    module_name, _, attr = ref.partition(":")
    # The user's working directory is where their flow modules are (as with `python -m`).
    if str(Path.cwd()) not in sys.path:
        sys.path.insert(0, str(Path.cwd()))
    try:
        module = importlib.import_module(module_name)
    except ImportError as err:
        raise ConfigError(f"flow {ref!r}: cannot import module {module_name!r} ({err})") from err
    obj = getattr(module, attr, None)
    if obj is None:
        raise ConfigError(f"flow {ref!r}: module {module_name!r} has no attribute {attr!r}")
    if not isinstance(obj, Flow) and isinstance(obj, Callable):  # type: ignore[arg-type]
        obj = obj()
    if not isinstance(obj, Flow):
        raise ConfigError(f"flow {ref!r}: {ref} is a {type(obj).__name__}, not a stateflow.Flow")
    return obj

"""Stable ids: how a function or class is named in a flow's fingerprint, wherever it lives.

A flow's fingerprint (``stateflow.tasks.harness.identity.flow_fingerprint``) cannot hash a tool's code
or a closure's values, so it names each callable a flow holds (tools, grammar functions, reply
parsers, vote executors). Named by ``__module__.__qualname__``, a callable would change every
fingerprint that holds it as soon as it moved to another module, and the runs recorded under
the old fingerprint would silently stop matching. :func:`stable_id` gives a callable a name of
its own that travels with it: move the function, keep the decorator, and every fingerprint
stays the same.

The ids of the built-in callables are the qualified names they had when their first runs were
recorded; they are names now, not locations, so do not "fix" them when the code moves.

Example:
    >>> @stable_id("mypkg.shout")
    ... def shout(text: str) -> str:
    ...     return text.upper()
    >>> id_of(shout)
    'mypkg.shout'
    >>> def plain(text: str) -> str:
    ...     return text
    >>> id_of(plain).endswith("plain"), has_stable_id(plain)
    (True, False)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

__all__ = ["has_stable_id", "id_of", "stable_id"]

_ATTR = "__stateflow_id__"

T = TypeVar("T")


def stable_id(name: str) -> Callable[[T], T]:
    """Decorator: ``name`` is the id of the decorated function or class in every fingerprint.

    An instance of a decorated class is named by its class's id; a subclass is not (it would
    behave differently under the same name), so it needs an id of its own.

    Raises:
        ValueError: ``name`` is empty or has surrounding white space.
    """
    if not name or name.strip() != name:
        raise ValueError(f"a stable id must be a non-empty name without surrounding spaces, got {name!r}")

    def mark(obj: T) -> T:
        setattr(obj, _ATTR, name)
        return obj

    return mark


def _own_id(obj: Any) -> str | None:
    """The id set on ``obj`` itself (function or class) or on its class (an instance), never inherited."""
    own = getattr(obj, "__dict__", None)
    if own is not None and isinstance(own.get(_ATTR), str):
        return own[_ATTR]
    if not isinstance(obj, type):
        found = type(obj).__dict__.get(_ATTR)
        if isinstance(found, str):
            return found
    return None


def has_stable_id(obj: Any) -> bool:
    """Whether ``obj`` (or, for an instance, its class) carries a :func:`stable_id`."""
    return _own_id(obj) is not None


def id_of(obj: Any) -> str:
    """The name of ``obj`` in a fingerprint: its stable id, else ``module.qualname``.

    The fallback keeps a user's undecorated callables working (their fingerprints change when
    they move, which is the user's business); the built-in ones are all decorated, and a test
    checks that.
    """
    found = _own_id(obj)
    if found is not None:
        return found
    qualname = getattr(obj, "__qualname__", None) or type(obj).__name__
    return f"{getattr(obj, '__module__', '?')}.{qualname}"

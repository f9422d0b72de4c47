"""The library of agent specs shipped with StateFlow (``stateflow/spec/library/*.lisp``).

Specs: ``react``, ``rewoo``, ``reflexion``, ``chain-of-thought``, ``direct``, ``chat-bot``,
``pass``. Each is a plain spec file; :func:`library_spec` parses and compiles one.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from stateflow.spec.compiled import AgentSpec

__all__ = ["library_names", "library_path", "library_spec"]


def _dir() -> Path:
    return Path(str(resources.files("stateflow.spec") / "library"))


def library_names() -> tuple[str, ...]:
    """Names of the shipped specs, sorted."""
    return tuple(sorted(p.stem for p in _dir().glob("*.lisp")))


def library_path(name: str) -> Path:
    """Path of a shipped spec file.

    Raises:
        KeyError: unknown name (the message lists the shipped specs).
    """
    path = _dir() / f"{name}.lisp"
    if not path.is_file():
        raise KeyError(f"no library spec {name!r}; available: {', '.join(library_names())}")
    return path


def library_spec(name: str) -> AgentSpec:
    """Parse and compile a shipped spec by name."""
    return AgentSpec.from_file(library_path(name))

"""Errors of the embedded local model: each names the file, model or server it is about."""

from __future__ import annotations

from stateflow.errors import StateFlowError

__all__ = [
    "LocalModelError",
    "ModelIntegrityError",
    "ModelNotFoundError",
    "RuntimeMissingError",
    "ServerCrashedError",
    "ServerStartError",
]

SETUP_HINT = "run scripts/setup_local_llm.sh (or `stateflow llm pull PROFILE`)"


class LocalModelError(StateFlowError):
    """Root of the embedded-model errors."""


class ModelNotFoundError(LocalModelError):
    """No source could provide the model file (the message lists what was tried)."""


class ModelIntegrityError(LocalModelError):
    """A model file (or an assembled part set) has the wrong size or sha256; never used silently.

    Attributes:
        path: the offending file.
    """

    def __init__(self, message: str, *, path: str):
        self.path = path
        super().__init__(message)


class RuntimeMissingError(LocalModelError):
    """llama-cpp-python (with its server extra) is not installed in this environment."""


class ServerStartError(LocalModelError):
    """The managed llama.cpp server did not become healthy (the message carries its log tail)."""


class ServerCrashedError(LocalModelError):
    """The managed server died; the failed call gets this error, the next call restarts it."""

"""Flows named by reference: ``module:attribute`` (importable from the current directory) or
``path/to/file.py:attribute``.

This is how a user's own flow reaches the command line (``stateflow graph my_flows:ONE_SHOT``,
``stateflow run intercode-sql --method my_flows:ONE_SHOT``) without registering it anywhere.

Example:
    >>> is_flow_ref("my_flows:ONE_SHOT"), is_flow_ref("stateflow")
    (True, False)
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

from stateflow.errors import ConfigError
from stateflow.flow import Flow

__all__ = ["is_flow_ref", "load_flow", "portable_ref"]


def is_flow_ref(text: str) -> bool:
    """Whether ``text`` has the ``module:attribute`` or ``path/to/file.py:attribute`` shape."""
    module_name, sep, attr = text.rpartition(":")
    return bool(sep and module_name and attr and attr.isidentifier())


def _is_file_ref(module_part: str) -> bool:
    return module_part.endswith(".py") or "/" in module_part


def load_flow(ref: str) -> Flow:
    """Import ``module:attribute`` (from the current directory first) or ``path/to/file.py:attribute``
    and return the flow it names.

    The attribute is a :class:`Flow`, or a zero-argument callable returning one. A file is
    imported under its own name with its folder first on ``sys.path``, so it can import the
    modules beside it, as ``python path/to/file.py`` would.

    Raises:
        ConfigError: a malformed reference, a module or file that cannot be imported, a missing
            attribute, or an object that is no flow.
    """
    if not is_flow_ref(ref):
        raise ConfigError(
            f"flow reference {ref!r}: expected module:attribute or path/to/file.py:attribute (e.g. my_flows:ONE_SHOT)"
        )
    module_part, _, attr = ref.rpartition(":")
    module = _import_file(module_part, ref) if _is_file_ref(module_part) else _import_module(module_part, ref)
    obj = getattr(module, attr, None)
    if obj is None:
        raise ConfigError(f"flow {ref!r}: module {module.__name__!r} has no attribute {attr!r}")
    if not isinstance(obj, Flow) and isinstance(obj, Callable):  # type: ignore[arg-type]
        obj = obj()
    if not isinstance(obj, Flow):
        raise ConfigError(f"flow {ref!r}: {ref} is a {type(obj).__name__}, not a stateflow.Flow")
    return obj


def portable_ref(ref: str) -> str:
    """``ref`` in a form that loads from any working directory: what a saved thread keeps, so
    ``stateflow resume`` finds the flow wherever it is run.

    A module found in the current directory (or a relative file path) becomes its absolute
    file path; a registered name or a module importable from anywhere stays as it is.

    Example:
        >>> portable_ref("intercode-sql")
        'intercode-sql'
    """
    if not is_flow_ref(ref):
        return ref
    module_part, _, attr = ref.rpartition(":")
    if _is_file_ref(module_part):
        return f"{Path(module_part).expanduser().resolve()}:{attr}"
    module = _import_module(module_part, ref)
    file = getattr(module, "__file__", None)
    if file is None or not Path(file).resolve().is_relative_to(Path.cwd().resolve()):
        return ref  # installed or on sys.path anyway: the module name is the portable form
    if "." in module_part:  # a package in the working directory: keep the name, importable from its root
        return ref
    return f"{Path(file).resolve()}:{attr}"


def _import_module(name: str, ref: str) -> ModuleType:
    # The user's working directory is where their flow modules are (as with `python -m`).
    if str(Path.cwd()) not in sys.path:
        sys.path.insert(0, str(Path.cwd()))
    try:
        return importlib.import_module(name)
    except ImportError as err:
        raise ConfigError(f"flow {ref!r}: cannot import module {name!r} ({err})") from err


def _import_file(path_text: str, ref: str) -> ModuleType:
    path = Path(path_text).expanduser().resolve()
    if not path.is_file():
        what = "is a directory" if path.is_dir() else "no such file"
        raise ConfigError(f"flow {ref!r}: {path}: {what} (give path/to/file.py:ATTRIBUTE)")
    name = path.stem
    loaded = sys.modules.get(name)
    if loaded is not None:
        if Path(getattr(loaded, "__file__", "") or "").resolve() == path:
            return loaded
        # another file of that name is loaded (a long-lived process, the test suite): this one
        # gets a name of its own rather than replacing it
        name = f"{name}__{hashlib.sha256(str(path).encode()).hexdigest()[:10]}"
        if name in sys.modules:
            return sys.modules[name]
    if str(path.parent) not in sys.path:
        sys.path.insert(0, str(path.parent))
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ConfigError(f"flow {ref!r}: {path} is not a Python module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # before running it: dataclasses and pickling look it up by name
    try:
        spec.loader.exec_module(module)
    except Exception as err:
        del sys.modules[name]
        raise ConfigError(f"flow {ref!r}: importing {path} failed ({type(err).__name__}: {err})") from err
    return module

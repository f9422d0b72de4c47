"""Command-line plugins: how applications add commands and named flows to ``stateflow``.

The core CLI knows only its own commands (``graph``, ``validate``, ``llm``, ``spec``,
``version``). Anything else comes from packages that declare a :class:`CliPlugin` under the
``stateflow.plugins`` entry-point group, e.g. in ``pyproject.toml``::

    [project.entry-points."stateflow.plugins"]
    tasks = "stateflow.tasks.cli:PLUGIN"

This keeps the dependencies pointing one way (applications import the core, never the reverse)
while everything still appears under the one ``stateflow`` command.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from importlib.metadata import EntryPoint, entry_points

import typer

from stateflow.flow import Flow

__all__ = ["ENTRY_POINT_GROUP", "CliPlugin", "LoadedPlugins", "PluginLoadError", "load_plugins", "named_flows"]

ENTRY_POINT_GROUP = "stateflow.plugins"


def _no_flows() -> Mapping[str, Callable[[], Flow]]:
    return {}


@dataclass(frozen=True)
class CliPlugin:
    """What an application adds to the ``stateflow`` command.

    Attributes:
        name: shown in listings and error messages.
        register: adds the plugin's commands to the root Typer app (called once per process).
        flows: named flows for ``graph``/``validate`` (name -> zero-argument builder); called only
            when a flow is looked up by name, so registering stays cheap.
        user_errors: exception types that are the user's to fix (missing data, a stopped server):
            shown as one ``error:`` line rather than as an unexpected error.
    """

    name: str
    register: Callable[[typer.Typer], None] | None = None
    flows: Callable[[], Mapping[str, Callable[[], Flow]]] = _no_flows
    user_errors: tuple[type[BaseException], ...] = ()


@dataclass(frozen=True)
class PluginLoadError:
    """An entry point that did not load (the CLI reports it and keeps its core commands)."""

    entry_point: str
    reason: str

    def __str__(self) -> str:
        return f"plugin {self.entry_point} not loaded: {self.reason}"


@dataclass(frozen=True)
class LoadedPlugins:
    """The plugins found, and the entry points that failed."""

    plugins: tuple[CliPlugin, ...] = ()
    errors: tuple[PluginLoadError, ...] = field(default=())


def _load(ep: EntryPoint) -> CliPlugin | PluginLoadError:
    label = f"{ep.name} = {ep.value}"
    try:
        obj = ep.load()
    except Exception as err:  # a broken plugin must not take the core commands down with it
        return PluginLoadError(label, f"{type(err).__name__}: {err}")
    if not isinstance(obj, CliPlugin):
        return PluginLoadError(label, f"it names a {type(obj).__name__}, not a stateflow.cli.plugins.CliPlugin")
    return obj


def load_plugins() -> LoadedPlugins:
    """Every plugin declared under :data:`ENTRY_POINT_GROUP`, sorted by entry-point name."""
    found = [_load(ep) for ep in sorted(entry_points(group=ENTRY_POINT_GROUP), key=lambda e: e.name)]
    return LoadedPlugins(
        tuple(p for p in found if isinstance(p, CliPlugin)),
        tuple(p for p in found if isinstance(p, PluginLoadError)),
    )


def named_flows(plugins: tuple[CliPlugin, ...]) -> dict[str, Callable[[], Flow]]:
    """The named flows of all ``plugins``; the first plugin to name a flow keeps it."""
    out: dict[str, Callable[[], Flow]] = {}
    for plugin in plugins:
        for name, build in plugin.flows().items():
            out.setdefault(name, build)
    return out

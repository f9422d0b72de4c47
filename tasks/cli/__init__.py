"""The evaluation application's part of the ``stateflow`` command (a core CLI plugin).

:data:`PLUGIN` is declared in ``pyproject.toml`` under the ``stateflow.plugins`` entry points;
the core CLI loads it and gets the commands ``run``, ``resume``, ``threads``, ``history``, ``report``,
``compare``, ``archive``, ``demo``, ``data``, ``bench paper``, ``optimize``, ``ui`` and ``whatif``,
and the named flows of every registered benchmark (``stateflow graph intercode-sql``).
``compare``, ``archive``, ``demo``, ``data``, ``bench paper``, ``optimize``, ``ui`` and ``serve``, and the
named flows of every
registered benchmark (``stateflow graph intercode-sql``).
"""

from __future__ import annotations

from collections.abc import Callable

import typer
from stateflow.envs.base import EnvironmentError_

from stateflow import Flow
from stateflow.cli.plugins import CliPlugin

__all__ = ["PLUGIN", "registered_flows"]


def _register(app: typer.Typer) -> None:
    from stateflow.tasks.cli import bench, data, demo, optimize, results, run, serve, threads, ui, whatif

    run.register(app)
    demo.register(app)
    threads.register(app)
    results.register(app)
    data.register(app)
    bench.register(app)
    optimize.register(app)
    ui.register(app)
    whatif.register(app)
    serve.register(app)


def registered_flows() -> dict[str, Callable[[], Flow]]:
    """The named flows of every benchmark in the registry (first benchmark to name one keeps it)."""
    from stateflow.tasks.harness.registry import default_registry

    out: dict[str, Callable[[], Flow]] = {}
    for bench in default_registry():
        for name, build in bench.flows.items():
            out.setdefault(name, build)
    return out


PLUGIN = CliPlugin(
    name="stateflow.tasks",
    register=_register,
    flows=registered_flows,
    user_errors=(EnvironmentError_,),
)

"""`stateflow graph` and `stateflow validate`: inspect any flow from the command line.

A FLOW argument is either a built-in name (``intercode-sql``, ``intercode-bash`` and their
variants, listed by ``stateflow validate --list``) or ``module:attribute`` naming a ``Flow``
object (or a zero-argument function returning one) importable from the current directory.
"""

from __future__ import annotations

import importlib
import sys
import warnings
from collections.abc import Callable
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from stateflow.errors import ConfigError
from stateflow.flow import Flow, FlowWarning
from stateflow.graph import render_png, to_dot, to_mermaid

__all__ = ["BUILTIN_FLOWS", "GraphFormat", "register", "resolve_flow"]


class GraphFormat(StrEnum):
    """Output formats of ``stateflow graph``."""

    MERMAID = "mermaid"
    DOT = "dot"
    PNG = "png"


# Built-in flows by name -> "module:attribute" (imported only when asked for).
BUILTIN_FLOWS: dict[str, str] = {
    "intercode-sql": "stateflow.tasks.intercode_sql:SQL_FLOW",
    "intercode-sql-no-verify": "stateflow.tasks.intercode_sql:SQL_NO_VERIFY",
    "intercode-sql-no-error": "stateflow.tasks.intercode_sql:SQL_NO_ERROR",
    "intercode-sql-no-observe": "stateflow.tasks.intercode_sql:SQL_NO_OBSERVE",
    "intercode-sql-schema": "stateflow.tasks.intercode_sql:SQL_SCHEMA",
    "intercode-bash": "stateflow.tasks.intercode_bash:BASH_FLOW",
}


def resolve_flow(ref: str) -> Flow:
    """Load a flow from a built-in name or ``module:attribute``.

    Raises:
        ConfigError: the name is unknown, the module cannot be imported or the object is no Flow.
    """
    target = BUILTIN_FLOWS.get(ref, ref)
    module_name, sep, attr = target.partition(":")
    if not sep or not module_name or not attr:
        raise ConfigError(f"unknown flow {ref!r}: use a built-in name ({', '.join(BUILTIN_FLOWS)}) or module:attribute")
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
        raise ConfigError(f"flow {ref!r}: {target} is a {type(obj).__name__}, not a stateflow.Flow")
    return obj


def register(app: typer.Typer) -> None:
    """Add the ``graph`` and ``validate`` commands to ``app``."""

    @app.command("graph")
    def graph(
        flow: Annotated[str, typer.Argument(help="built-in flow name or module:attribute")],
        fmt: Annotated[GraphFormat, typer.Option("--format", "-f", help="output format")] = GraphFormat.MERMAID,
        out: Annotated[Path | None, typer.Option("--out", "-o", help="write to this file (png needs it)")] = None,
    ) -> None:
        """Draw a flow's state graph (edges are the rules, numbered by priority)."""
        f = resolve_flow(flow)
        if fmt is GraphFormat.PNG:
            path = render_png(f, out or Path(f"{f.name}.png"))
            typer.echo(f"wrote {path}")
            return
        text = to_mermaid(f) if fmt is GraphFormat.MERMAID else to_dot(f)
        if out is not None:
            out.write_text(text, encoding="utf-8")
            typer.echo(f"wrote {out}")
        else:
            typer.echo(text, nl=False)

    @app.command("validate")
    def validate(
        flow: Annotated[str | None, typer.Argument(help="built-in flow name or module:attribute")] = None,
        list_builtin: Annotated[bool, typer.Option("--list", help="list the built-in flows")] = False,
    ) -> None:
        """Check a flow definition and print its states and rules."""
        console = Console()
        if list_builtin or flow is None:
            for name, target in BUILTIN_FLOWS.items():
                typer.echo(f"{name:28} {target}")
            return
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", FlowWarning)
            f = resolve_flow(flow)
        table = Table(title=f"flow {f.name}: valid")
        table.add_column("state")
        table.add_column("outputs")
        table.add_column("rules (priority order)")
        for name, st in f.states.items():
            outs = ", ".join(o.label for o in st.outputs) or "-"
            rules = "\n".join(f"{i}. -> {r.target}  if {r.label}" for i, r in enumerate(f.rules_from(name), 1))
            marker = " (initial)" if name == f.initial else ""
            table.add_row(escape(name + marker), escape(outs), escape(rules) if not st.final else "(final)")
        console.print(table)
        for w in [*f.warnings, *(str(c.message) for c in caught if issubclass(c.category, FlowWarning))]:
            console.print(Text.assemble(("warning:", "yellow"), f" {w}"), highlight=False)

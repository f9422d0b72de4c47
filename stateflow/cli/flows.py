"""`stateflow graph` and `stateflow validate`: inspect any flow from the command line.

A FLOW argument is either a name registered by a plugin (the evaluation application registers
``intercode-sql``, ``intercode-bash`` and their variants; ``stateflow validate --list`` lists
them) or ``module:attribute`` naming a ``Flow`` object (or a zero-argument function returning
one) importable from the current directory.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from stateflow.cli.inputs import output_dir
from stateflow.errors import ConfigError
from stateflow.flow import Flow, FlowWarning
from stateflow.flow_ref import is_flow_ref, load_flow
from stateflow.graph import render_png, to_dot, to_mermaid

__all__ = ["GraphFormat", "register", "resolve_flow"]


class GraphFormat(StrEnum):
    """Output formats of ``stateflow graph``."""

    MERMAID = "mermaid"
    DOT = "dot"
    PNG = "png"


def resolve_flow(ref: str, named: Mapping[str, Callable[[], Flow]]) -> Flow:
    """Load a flow from a registered name (``named``) or ``module:attribute``.

    Raises:
        ConfigError: the name is unknown, the module cannot be imported or the object is no Flow.
    """
    if ref in named:
        return named[ref]()
    if not is_flow_ref(ref):
        known = ", ".join(named) or "none registered"
        raise ConfigError(f"unknown flow {ref!r}: use a registered name ({known}) or module:attribute")
    return load_flow(ref)


def register(app: typer.Typer, flows: Callable[[], Mapping[str, Callable[[], Flow]]]) -> None:
    """Add the ``graph`` and ``validate`` commands to ``app``; ``flows`` gives the named flows."""

    @app.command("graph")
    def graph(
        flow: Annotated[str, typer.Argument(help="registered flow name or module:attribute")],
        fmt: Annotated[GraphFormat, typer.Option("--format", "-f", help="output format")] = GraphFormat.MERMAID,
        out: Annotated[Path | None, typer.Option("--out", "-o", help="write to this file (png needs it)")] = None,
    ) -> None:
        """Draw a flow's state graph (edges are the rules, numbered by priority)."""
        if out is not None and out.is_dir():
            raise ConfigError(f"--out {out}: is a directory; give a file, e.g. --out {out / 'flow.md'}")
        if out is not None:
            output_dir(out.parent, "--out")
        f = resolve_flow(flow, flows())
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
        flow: Annotated[str | None, typer.Argument(help="registered flow name or module:attribute")] = None,
        list_builtin: Annotated[bool, typer.Option("--list", help="list the registered flows")] = False,
    ) -> None:
        """Check a flow definition and print its states and rules."""
        console = Console()
        if list_builtin or flow is None:
            for name, build in flows().items():
                typer.echo(f"{name:28} {build().description}")
            return
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", FlowWarning)
            f = resolve_flow(flow, flows())
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

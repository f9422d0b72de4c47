"""The command-line reference, written from the commands themselves.

The site's ``reference/cli.md`` is not written by hand: :func:`cli_reference` builds the whole
``stateflow`` command tree (the core's commands and every installed plugin's, exactly as
``stateflow --help`` sees them) and renders it with Typer's own Markdown generator
(:func:`typer.cli.get_docs_for_click`, what ``typer ... utils docs`` prints). A changed option or
help text therefore changes the reference on the next build (``scripts/docs_hooks.py``).

``python -m stateflow.cli.reference`` prints the page.
"""

from __future__ import annotations

import sys

import typer
from rich.console import Console
from typer.cli import get_docs_for_click

__all__ = ["cli_reference"]

_INTRO = (
    "Every command and option of `stateflow`, generated from the commands themselves at each build "
    "of this site (`stateflow/cli/reference.py`); `stateflow COMMAND --help` prints the same text. "
    "Two options work anywhere on a command line and are not repeated below: `--debug` (a traceback "
    "instead of the one-line error) and `--otel[=URL]` (export runs as OpenTelemetry spans, see "
    "[OpenTelemetry](../howto/opentelemetry.md))."
)


def cli_reference() -> str:
    """The Markdown page documenting every ``stateflow`` command, group and option.

    Plugin commands are included when their plugin loads; a plugin that fails to load is
    reported on stderr (as the CLI itself does) and its commands are missing from the page.
    """
    from stateflow.cli.main import build_command

    command = build_command(Console(stderr=True))
    ctx = typer.Context(command, info_name="stateflow")
    body = get_docs_for_click(obj=command, ctx=ctx, name="stateflow", title="Command line")
    title, _, rest = body.partition("\n\n")
    return f"{title}\n\n{_INTRO}\n\n{rest.rstrip()}\n"


if __name__ == "__main__":
    sys.stdout.write(cli_reference())

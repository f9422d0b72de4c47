"""Entry point of the ``stateflow`` command.

Each command group lives in its own module and is registered below. Errors raised on purpose
(``StateFlowError`` and friends) print one clear line; ``--debug`` shows the traceback.

Nothing user-supplied is ever read as Rich markup: help texts are plain (``rich_markup_mode=None``)
and errors are printed as plain text, so ``[profiles.x]`` or ``[/INST]`` show as written.

Two options work anywhere on the command line: ``--debug`` and ``--otel[=URL]`` (export every
run as OpenTelemetry spans over OTLP/HTTP: to URL, or where the standard ``OTEL_EXPORTER_OTLP_*``
variables say; it sets ``STATEFLOW_OTEL``, so worker processes inherit it).
"""

from __future__ import annotations

import os
import sys
from typing import Annotated

import typer
from rich.console import Console
from rich.text import Text

from stateflow.errors import StateFlowError

app = typer.Typer(
    name="stateflow",
    help="StateFlow: LLM agents as state machines on AutoGen, evaluated on InterCode.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=True,
    rich_markup_mode=None,
)


def _print_version(value: bool) -> None:
    if value:
        from stateflow import __version__

        typer.echo(f"stateflow {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool,
        typer.Option("--version", callback=_print_version, is_eager=True, help="Print the version and exit."),
    ] = False,
) -> None:
    """StateFlow: LLM agents as state machines on AutoGen, evaluated on InterCode.

    Add --debug anywhere to see full tracebacks; --otel[=URL] anywhere to export runs as
    OpenTelemetry spans (OTLP/HTTP; without URL the standard OTEL_EXPORTER_OTLP_* variables).
    """


def _error(console: Console, label: str, message: str) -> None:
    # The message is plain text: it may hold brackets ([profiles.x], [/INST]) that Rich would
    # otherwise read as markup, drop or choke on.
    console.print(Text.assemble((label, "bold red"), " ", message), highlight=False, soft_wrap=True)


def _take_global_flags(args: list[str]) -> tuple[list[str], bool, str | None]:
    """Remove ``--debug`` and ``--otel[=URL]`` wherever they are; returns (args, debug, otel)."""
    rest: list[str] = []
    debug, otel = False, None
    for a in args:
        if a == "--debug":
            debug = True
        elif a == "--otel":
            otel = "1"
        elif a.startswith("--otel="):
            otel = a.split("=", 1)[1] or "1"
        else:
            rest.append(a)
    return rest, debug, otel


# Command groups (each module defines a Typer app or commands on a given app).
# Registration lines are appended here as groups land; keep one line per group.


def _register() -> None:
    @app.command("version")
    def version() -> None:
        """Print the installed StateFlow version."""
        from stateflow import __version__

        typer.echo(__version__)

    from stateflow.cli import flows

    flows.register(app)

    from stateflow.cli import run as run_commands

    run_commands.register(app)

    from stateflow.cli import llm

    llm.register(app)

    from stateflow.cli import data

    data.register(app)

    from stateflow.cli import spec

    spec.register(app)


def _is_environment_error(err: BaseException) -> bool:
    # Imported lazily: the CLI sits above the environments, the core below them.
    from stateflow.envs.base import EnvironmentError_

    return isinstance(err, EnvironmentError_)


def main(argv: list[str] | None = None) -> int:
    """Run the CLI; returns the process exit code."""
    args, debug, otel = _take_global_flags(list(sys.argv[1:] if argv is None else argv))
    if otel is not None:
        os.environ["STATEFLOW_OTEL"] = otel
    _register()
    err_console = Console(stderr=True)
    try:
        # standalone mode: typer handles --help and usage errors itself (and exits)
        app(args=args, prog_name="stateflow")
    except (StateFlowError, FileNotFoundError, ValueError) as err:
        if debug:
            raise
        _error(err_console, "error:", str(err))
        return 1
    except KeyboardInterrupt:
        err_console.print("interrupted", style="yellow")
        return 130
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except Exception as err:  # a bug, not a user error: still one line, details with --debug
        if debug:
            raise
        if _is_environment_error(err):  # e.g. missing data or server: the message says the fix
            _error(err_console, "error:", str(err))
            return 1
        _error(
            err_console,
            "unexpected error:",
            f"{type(err).__name__}: {err} (rerun with --debug for the traceback)",
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

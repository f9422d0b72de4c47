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

from stateflow.cli.plugins import LoadedPlugins, load_plugins, named_flows
from stateflow.errors import StateFlowError, redact_secrets


def _new_app() -> typer.Typer:
    """A command tree with only the root's options; :func:`_register` adds the commands.

    A new tree per call (not one module-level app that each call adds to): a process calling
    :func:`main` many times, such as the test suite, would otherwise register every command
    again each time and pay for all the copies at each call."""
    app = typer.Typer(
        name="stateflow",
        help="StateFlow: LLM agents as state machines on AutoGen, evaluated on InterCode.",
        no_args_is_help=True,
        pretty_exceptions_enable=False,
        add_completion=True,
        rich_markup_mode=None,
    )
    app.callback()(_root)
    return app


def _print_version(value: bool) -> None:
    if value:
        from stateflow import __version__

        typer.echo(f"stateflow {__version__}")
        raise typer.Exit()


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
    # otherwise read as markup, drop or choke on. Secrets are masked whatever raised it: a
    # driver's message may quote a connection string with its password.
    console.print(Text.assemble((label, "bold red"), " ", redact_secrets(message)), highlight=False, soft_wrap=True)


def _path_error(err: OSError) -> str:
    """``PATH: what is wrong with it`` for a file error (missing, a directory, unreadable...)."""
    where = str(err.filename) + (f" -> {err.filename2}" if err.filename2 is not None else "")
    return f"{where}: {err.strerror or type(err).__name__}"


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


# Command groups: the core's own (each module registers its commands on the root app), then
# whatever plugins add (see stateflow.cli.plugins; the evaluation commands come from one).


def _register(app: typer.Typer, plugins: LoadedPlugins, console: Console) -> None:
    @app.command("version")
    def version() -> None:
        """Print the installed StateFlow version."""
        from stateflow import __version__

        typer.echo(__version__)

    from stateflow.cli import flows, llm, spec, verify

    flows.register(app, lambda: named_flows(plugins.plugins))
    llm.register(app)
    spec.register(app)
    verify.register(app, lambda: named_flows(plugins.plugins))
    for plugin in plugins.plugins:
        if plugin.register is not None:
            plugin.register(app)
    for problem in plugins.errors:
        console.print(Text.assemble(("warning:", "yellow"), f" {problem}"), highlight=False, soft_wrap=True)


def build_command(console: Console | None = None):  # -> the command tree (Typer's own click)
    """The whole ``stateflow`` command tree, the core's commands and every plugin's.

    Used by :mod:`stateflow.cli.reference` to document the commands from themselves. Plugin
    load problems are printed to ``console`` (default: stderr), as :func:`main` does.
    """
    app = _new_app()
    _register(app, load_plugins(), console or Console(stderr=True))
    return typer.main.get_command(app)


def main(argv: list[str] | None = None) -> int:
    """Run the CLI; returns the process exit code."""
    args, debug, otel = _take_global_flags(list(sys.argv[1:] if argv is None else argv))
    if otel is not None:
        os.environ["STATEFLOW_OTEL"] = otel
    err_console = Console(stderr=True)
    plugins = load_plugins()
    app = _new_app()
    _register(app, plugins, err_console)
    user_errors = tuple(t for p in plugins.plugins for t in p.user_errors)
    try:
        # standalone mode: typer handles --help and usage errors itself (and exits)
        app(args=args, prog_name="stateflow")
    except (StateFlowError, ValueError) as err:
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
        if isinstance(err, user_errors):  # e.g. missing data or server: the message says the fix
            _error(err_console, "error:", str(err))
            return 1
        if isinstance(err, OSError) and err.filename is not None:  # a path the user gave: name it
            _error(err_console, "error:", _path_error(err))
            return 1
        if isinstance(err, FileNotFoundError):  # raised on purpose with its own message
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

"""Entry point of the ``stateflow`` command.

Each command group lives in its own module and is registered below. Errors raised on purpose
(``StateFlowError`` and friends) print one clear line; ``--debug`` shows the traceback.
"""

from __future__ import annotations

import sys

import typer
from rich.console import Console

from stateflow.errors import StateFlowError

app = typer.Typer(
    name="stateflow",
    help="StateFlow: LLM agents as state machines on AutoGen, evaluated on InterCode.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)


@app.callback()
def _root() -> None:
    """StateFlow: LLM agents as state machines on AutoGen, evaluated on InterCode.

    Add --debug anywhere to see full tracebacks.
    """


# Command groups (each module defines a Typer app or commands on a given app).
# Registration lines are appended here as groups land; keep one line per group.


def _register() -> None:
    @app.command("version")
    def version() -> None:
        """Print the installed StateFlow version."""
        from importlib.metadata import version as _v

        typer.echo(_v("stateflow"))

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
    from envs.base import EnvironmentError_

    return isinstance(err, EnvironmentError_)


def main(argv: list[str] | None = None) -> int:
    """Run the CLI; returns the process exit code."""
    args = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in args
    if debug:
        args.remove("--debug")
    _register()
    err_console = Console(stderr=True)
    try:
        # standalone mode: typer handles --help and usage errors itself (and exits)
        app(args=args, prog_name="stateflow")
    except (StateFlowError, FileNotFoundError, ValueError) as err:
        if debug:
            raise
        err_console.print(f"[bold red]error:[/] {err}", highlight=False, soft_wrap=True)
        return 1
    except KeyboardInterrupt:
        err_console.print("[yellow]interrupted[/]")
        return 130
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except Exception as err:  # a bug, not a user error: still one line, details with --debug
        if debug:
            raise
        if _is_environment_error(err):  # e.g. missing data or server: the message says the fix
            err_console.print(f"[bold red]error:[/] {err}", highlight=False, soft_wrap=True)
            return 1
        err_console.print(
            f"[bold red]unexpected error:[/] {type(err).__name__}: {err} (rerun with --debug for the traceback)",
            highlight=False,
            soft_wrap=True,
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""``stateflow serve FLOW``: a flow over HTTP (AG-UI, A2A, durable threads; :mod:`stateflow.serve`).

Binds the loopback unless ``--host`` says otherwise; any other address needs a token
(``--token`` or ``$STATEFLOW_SERVE_TOKEN``). Only loopback ``Host`` names are answered and no
other site's page may call the server unless allowed (``--allow-host``, ``--allow-origin``);
bodies, messages, runs at once and run time are bounded (``--max-*``, ``--timeout``). Every run
shares one set of connection pools (:class:`~stateflow.backends.http.HttpClients`). Threads
are kept where ``stateflow run --thread`` keeps them (``--checkpoints``, else
``$STATEFLOW_CHECKPOINTS``, else the user data directory), so a thread paused over HTTP can also
be answered with ``stateflow resume``.

Before it says "serving", the command checks what it needs: the flow, every embedded model its
states use (installed, or assembled from installed part packages), the store and the port. Each
failure is one line and a non-zero exit.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape
from stateflow.tasks.cli.threads import CheckpointsOption

from stateflow.errors import ConfigError
from stateflow.flow import Flow
from stateflow.profiles import ModelAssignment, ModelProfile

__all__ = ["register"]

_LIMITS_HELP = "limits (each refusal is a 413/503 with the flag to raise)"


def _needed_profiles(flow: Flow, assignment: ModelAssignment) -> list[ModelProfile]:
    """The profiles ``flow``'s runs call (its LLM states, parallel LLM branches and judges), as
    a run resolves them; a bad assignment fails here as it would at the first request."""
    from stateflow.outputs import LLM
    from stateflow.parallel import Parallel
    from stateflow.subflow import expand_subflows

    flow = expand_subflows(flow)
    assignment.check_states(list(flow.states), f"flow {flow.name!r}")
    found: dict[str, ModelProfile] = {}
    for st in flow.states.values():
        for out in st.outputs:
            for llm in out.branches if isinstance(out, Parallel) else (out,):
                if isinstance(llm, LLM):
                    p = assignment.profile_for(st.name, llm.profile)
                    found[p.name] = p
    for judge in flow.judges():
        p = assignment.profile_for(flow.initial, judge.profile)
        found[p.name] = p
    return list(found.values())


def _check_models(profiles: list[ModelProfile]) -> None:
    """Every embedded model the profiles need is there, and so is its runtime (a run would fail on
    its first request otherwise). The model's server is registered in the process's pool, as a
    run finds it: it starts on the first request.

    Raises:
        ModelNotFoundError, ModelIntegrityError, FileNotFoundError: a model file is missing or bad.
        RuntimeMissingError: llama-cpp-python is not installed.
    """
    local = [p for p in profiles if p.provider == "local" and p.local_model]
    if not local:
        return
    from stateflow.backends.local import default_pool, runtime_available
    from stateflow.backends.local.errors import RuntimeMissingError

    pool = default_pool()
    for p in local:
        assert p.local_model is not None
        pool.server(p.local_model, alias=p.model, n_threads=p.n_threads, replicas=p.replicas)
    missing = runtime_available()
    if missing:
        raise RuntimeMissingError(f"model profile {local[0].name!r} needs the embedded runtime: {missing}")


def register(app: typer.Typer) -> None:
    @app.command("serve")
    def serve_cmd(
        flow: Annotated[str, typer.Argument(help="registered flow name or module:attribute")],
        host: Annotated[
            str, typer.Option(help="interface to bind (anything but the loopback needs --token)")
        ] = "127.0.0.1",
        port: Annotated[int, typer.Option(min=1, max=65535, help="TCP port")] = 8321,
        model: Annotated[
            list[str] | None, typer.Option("--model", "-m", help="NAME or STATE=NAME (repeatable)")
        ] = None,
        config: Annotated[Path | None, typer.Option(help="TOML file with [profiles.*] and [models]")] = None,
        checkpoints: CheckpointsOption = None,
        max_transitions: Annotated[int | None, typer.Option(min=1, help="bound per run")] = None,
        token: Annotated[
            str | None,
            typer.Option(
                envvar="STATEFLOW_SERVE_TOKEN",
                show_envvar=True,
                show_default=False,
                help="bearer token every request must send (Authorization: Bearer TOKEN); required off the "
                "loopback; prefer the environment variable (a command line is visible to other users)",
            ),
        ] = None,
        allow_host: Annotated[
            list[str] | None,
            typer.Option(help="Host name clients use, besides localhost/127.0.0.1/[::1] (repeatable; '*': any)"),
        ] = None,
        allow_origin: Annotated[
            list[str] | None,
            typer.Option(help="browser origin (scheme://host[:port]) allowed to call the server (repeatable)"),
        ] = None,
        max_body: Annotated[int, typer.Option(min=1, help="bytes of a request body", rich_help_panel=_LIMITS_HELP)] = 1
        << 20,
        max_messages: Annotated[
            int, typer.Option(min=1, help="messages of a request (A2A: parts)", rich_help_panel=_LIMITS_HELP)
        ] = 64,
        max_message_chars: Annotated[
            int, typer.Option(min=1, help="characters of one message or answer", rich_help_panel=_LIMITS_HELP)
        ] = 100_000,
        max_runs: Annotated[
            int, typer.Option(min=1, help="runs at once (then 503 + Retry-After)", rich_help_panel=_LIMITS_HELP)
        ] = 64,
        timeout: Annotated[
            float, typer.Option(min=0.1, help="seconds a run may take (then cancelled)", rich_help_panel=_LIMITS_HELP)
        ] = 600.0,
        max_finished_tasks: Annotated[
            int,
            typer.Option(
                min=1,
                help="finished A2A tasks kept for tasks/get (then the oldest dropped)",
                rich_help_panel=_LIMITS_HELP,
            ),
        ] = 1000,
    ) -> None:
        """Serve FLOW over HTTP: AG-UI at /agui (server-sent events), A2A at /a2a/, threads at /threads/ID."""
        try:
            import uvicorn  # noqa: F401  (the extra's presence, checked before anything starts)

            from stateflow.serve import FlowService, ServeAccess, ServeLimits, serve
        except ImportError as err:  # the extra is missing
            raise ConfigError(
                f"stateflow serve needs the serve extra ({err}): pip install 'stateflow[serve]'"
            ) from None
        from stateflow.tasks.cli import registered_flows
        from stateflow.tasks.cli.run import _announce, _assignment

        from stateflow.backends.http import HttpClients
        from stateflow.checkpoint.location import open_checkpointer
        from stateflow.cli.flows import resolve_flow
        from stateflow.serve.guard import LOOPBACK_HOSTS

        console = Console(stderr=True)
        # Everything is checked before anything is announced: a failure is its one line.
        access = ServeAccess(
            hosts=(*LOOPBACK_HOSTS, *(allow_host or ())), origins=tuple(allow_origin or ()), token=token or None
        )
        limits = ServeLimits(
            max_body_bytes=max_body,
            max_messages=max_messages,
            max_message_chars=max_message_chars,
            max_runs=max_runs,
            run_timeout_s=timeout,
            max_finished_tasks=max_finished_tasks,
        )
        the_flow = resolve_flow(flow, registered_flows())
        assignment, _ = _assignment(model or [], config)
        _check_models(_needed_profiles(the_flow, assignment))
        store = open_checkpointer(checkpoints)
        # One set of pools for every run (docs/live.md, "Share the pools"): connections, the model
        # client per profile and prepared agents are reused instead of built per run.
        http = HttpClients(max_connections=max(64, max_runs))
        try:
            service = FlowService(
                the_flow, store, models=assignment, flow_ref=flow, max_transitions=max_transitions, http=http
            )

            def ready(url: str) -> None:
                _announce(console, assignment)
                console.print(
                    f"serving flow [bold]{escape(the_flow.name)}[/] at {escape(url)}: /agui (AG-UI), /a2a/ (A2A)"
                    + (" (token required)" if token else ""),
                    soft_wrap=True,  # one line, whatever the width: logs and scripts read it
                )

            # serve binds first: a taken port, a bad address, no token off the loopback fail before `ready`
            serve(service, host=host, port=port, access=access, limits=limits, on_ready=ready)
        finally:
            http.close()
            store.close()

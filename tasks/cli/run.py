"""`stateflow run` and `stateflow report`: the evaluation commands (`demo`: :mod:`.demo`).

They belong to the application (benchmarks, methods, results) and reach the ``stateflow``
command through the plugin in :mod:`stateflow.tasks.cli`.
"""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console
from rich.markup import escape
from stateflow.tasks.cli import methods as method_listing
from stateflow.tasks.cli.stopping import stop_on_signals
from stateflow.tasks.cli.threads import CheckpointsOption

from stateflow.backends.local.defaults import default_workers
from stateflow.backends.providers import capabilities
from stateflow.errors import ConfigError
from stateflow.profiles import ModelAssignment, load_config, parse_model_options

if TYPE_CHECKING:  # the registry imports every benchmark: only once a command runs
    from stateflow.tasks.harness.registry import BenchmarkRegistry

__all__ = ["register"]


class Policy(StrEnum):
    """Who acts: the model, or a replay of the gold answer (validates the harness)."""

    LLM = "llm"
    ORACLE = "oracle"


class Backend(StrEnum):
    """Environment backends: SQL embedded|docker|dsn, Bash sandbox|docker."""

    EMBEDDED = "embedded"
    DOCKER = "docker"
    DSN = "dsn"
    SANDBOX = "sandbox"


class Executor(StrEnum):
    """Where episodes run: threads in this process, or Ray actors (``--ray-address``)."""

    THREAD = "thread"
    RAY = "ray"


class Order(StrEnum):
    """Which episodes run first: a method over every task, every method on a task, or tasks grouped
    by their database / file system so consecutive episodes share a cached prompt prefix
    (RunSpec.order, stateflow.tasks.harness.order)."""

    METHOD = "method"
    TASK = "task"
    CONTEXT = "context"


class SqlDatabaseScope(StrEnum):
    """Which databases an SQL agent may ``USE``: all of the benchmark's (as upstream) or its task's."""

    BENCHMARK = "benchmark"
    TASK = "task"


def _assignment(models: list[str], config: Path | None) -> tuple[ModelAssignment, str]:
    base = load_config(config) if config else ModelAssignment.of(None)
    opts = parse_model_options(models)
    assignment = base.merged(opts) if opts else base
    assignment.refuse_test_doubles()  # before any output or file: they cannot answer from a command line
    label = ",".join(f"{k}={v}" for k, v in sorted(assignment.by_state.items()))
    return assignment, label


def _announce(console: Console, assignment: ModelAssignment) -> None:
    for state, name in sorted(assignment.by_state.items()):
        p = assignment.profiles[name]
        where = "embedded llama.cpp server" if p.provider == "local" else (p.base_url or "api.openai.com")
        console.print(f"model for [bold]{escape(state)}[/]: {escape(name)} ({escape(p.model)}, {escape(where)})")


def _auto_grammar(assignment: ModelAssignment) -> bool:
    return all(capabilities(assignment.profiles[n].provider).grammar is not None for n in assignment.by_state.values())


def _executor(kind: Executor, address: str | None, models: ModelAssignment | None, cpus: float = 1.0) -> dict:
    """``evaluate`` keyword arguments selecting the executor (``--executor``/``--ray-address``);
    ``models``: the run's models (``None`` for the oracle policy)."""
    if kind is Executor.THREAD:
        if address:
            raise ConfigError("--ray-address needs --executor ray")
        return {}
    from stateflow.tasks.harness.ray_executor import ray_executor_factory  # imports ray: only when asked for

    return {"executor_factory": ray_executor_factory(address, models, num_cpus=cpus)}


def _table_console() -> Console:
    # Tables have 15 columns (the success rate's interval and eval/sent among them): give them room when the
    # output is not a terminal (CI logs, pipes).
    console = Console()
    return console if console.is_terminal else Console(width=200)


def _print_results(console: Console, records: list[dict], title: str) -> None:
    from stateflow.tasks.reports.metrics import summarize
    from stateflow.tasks.reports.report import metrics_table

    if records:
        console.print(metrics_table(summarize(records), title=title))


def _warn_never_submitted(console: Console, records: list) -> None:
    from rich.text import Text
    from stateflow.tasks.reports.submissions import never_submitted_warnings

    for line in never_submitted_warnings(records):
        console.print(Text.assemble(("warning:", "yellow"), f" {line}"), highlight=False, soft_wrap=True)


def _print_gold_check(console: Console, records: list, repeats: int) -> None:
    """The oracle's replays: the tasks whose gold reward differed between fresh replays."""
    from stateflow.tasks.reports.gold_check import gold_replays

    replays = gold_replays(records)
    unstable = [g for g in replays if not g.stable]
    console.print(
        f"gold check: {len(replays)} task(s) replayed {repeats} times in fresh environments; "
        + (
            f"{len(unstable)} gold(s) scored differently between replays:"
            if unstable
            else "every gold scored the same in every replay"
        )
    )
    for g in unstable:
        console.print(f"  {g.benchmark} {g.dataset} {g.text()}")


def _report_dir(first: Path) -> Path:
    """Where ``report`` writes by default: a results directory itself, the run directory of its
    ``results.jsonl``, and a ``<stem>-report`` folder next to any other file. Why the last: two
    archive files share a folder (``local.jsonl``, ``local-small.jsonl``), and their reports must
    neither overwrite each other nor land among the committed records."""
    if first.is_dir():
        return first
    if first.name == "results.jsonl":
        return first.parent
    return first.with_name(f"{first.stem}-report")


def register(app: typer.Typer) -> None:
    """Add ``run`` and ``report`` to ``app``."""

    @app.command("run")
    def run_cmd(
        target: Annotated[
            str | None,
            typer.Argument(
                help="a benchmark (intercode-sql, intercode-bash, pdoctor), or a flow (name or module:attr)"
            ),
        ] = None,
        method: Annotated[str, typer.Option(help="comma-separated methods (see --list-methods)")] = "stateflow",
        model: Annotated[
            list[str] | None, typer.Option("--model", "-m", help="NAME or STATE=NAME (repeatable)")
        ] = None,
        config: Annotated[Path | None, typer.Option(help="TOML file with [profiles.*] and [models]")] = None,
        tasks: Annotated[str, typer.Option(help="all, A:B, 0,4,9, or a fixed sample: dev | heldout")] = "all",
        dataset: Annotated[str, typer.Option(help="demo | spider | spider-test | nl2bash | fs_1.. | FILE")] = "demo",
        workers: Annotated[
            int | None,
            typer.Option(
                min=1,
                help="episodes in parallel (one environment each; default 1, with the embedded model "
                "the measured best for its cores: stateflow.backends.local.defaults)",
            ),
        ] = None,
        executor: Annotated[Executor, typer.Option(help="thread (this process) or ray (Ray actors)")] = Executor.THREAD,
        ray_address: Annotated[
            str | None, typer.Option(help="--executor ray: auto | ray://HOST:PORT (default: a local Ray for the run)")
        ] = None,
        ray_worker_cpus: Annotated[
            float, typer.Option(min=0.01, help="--executor ray: CPUs each worker reserves (placement only)")
        ] = 1.0,
        max_turns: Annotated[int, typer.Option(min=1, help="environment turns per task")] = 10,
        out: Annotated[Path, typer.Option(help="results directory (re-run to resume)")] = Path("runs/latest"),
        policy: Annotated[
            Policy, typer.Option(help="llm, or oracle (gold replay, validates the harness)")
        ] = Policy.LLM,
        grammar: Annotated[
            bool | None, typer.Option("--grammar/--no-grammar", help="enforce the response format")
        ] = None,
        timeout: Annotated[float, typer.Option(help="seconds per task")] = 600.0,
        backend: Annotated[Backend | None, typer.Option(help="SQL: embedded|docker|dsn; Bash: sandbox|docker")] = None,
        dsn: Annotated[str | None, typer.Option(help="mysql://user:pass@host:port for --backend dsn")] = None,
        data: Annotated[str | None, typer.Option(help="directory with InterCode's sql/ and bash/ data")] = None,
        sql_database_scope: Annotated[
            SqlDatabaseScope | None,
            typer.Option(help="SQL: benchmark (default: agents may USE any database, as upstream) or task"),
        ] = None,
        retry_errors: Annotated[
            bool, typer.Option(help="re-run episodes recorded as errored (the new record replaces the old)")
        ] = False,
        order: Annotated[
            Order,
            typer.Option(
                help="method: each method over every task in turn; task: every method on a task, then the next task; "
                "context: tasks grouped by database / file system (a local model's prompt cache is reused)"
            ),
        ] = Order.METHOD,
        mix_settings: Annotated[
            bool,
            typer.Option(
                "--mix-settings",
                help="add to an --out holding records of other settings (dataset, models, max-turns...); "
                "reports keep each setting apart",
            ),
        ] = False,
        task: Annotated[str | None, typer.Option(help="with a flow target: the task text")] = None,
        repeats: Annotated[
            int,
            typer.Option(
                min=1,
                help="run each episode K times, repeat r at sampler seed --sampling-seed + r; reports pass@1 "
                "(with its interval), pass@K, pass^K and the tasks whose outcome flips (needs a temperature > 0)",
            ),
        ] = 1,
        sampling_seed: Annotated[int, typer.Option(min=0, help="--repeats: the first repeat's sampler seed")] = 0,
        temperature: Annotated[
            float | None,
            typer.Option(min=0.0, max=2.0, help="sample every model at this temperature (a new setting)"),
        ] = None,
        thread: Annotated[
            str | None,
            typer.Option(help="with a flow target: save the run as this thread (continues it if it exists)"),
        ] = None,
        checkpoints: CheckpointsOption = None,
        stream: Annotated[
            bool, typer.Option("--stream", help="with a flow target: print states, tokens and tool calls as they come")
        ] = False,
        live_tokens: Annotated[
            bool,
            typer.Option(
                "--live-tokens",
                help="stream every model reply so `stateflow ui`'s live page shows its tokens as they arrive "
                "(every model call is then a streamed call)",
            ),
        ] = False,
        list_methods: Annotated[bool, typer.Option("--list-methods", help="list methods and exit")] = False,
        explain: Annotated[
            str | None, typer.Option("--explain", help="print a method's recipe, levers and measured effects, and exit")
        ] = None,
        no_progress: Annotated[bool, typer.Option("--no-progress")] = False,
        # -- pdoctor only (synthesized planning requests; they become the dataset's name) --
        actions: Annotated[str, typer.Option(help="pdoctor: actions per request, LO:HI (inclusive)")] = "3:8",
        sentences: Annotated[str, typer.Option(help="pdoctor: constraint sentences, LO:HI (inclusive)")] = "2:6",
        n: Annotated[int, typer.Option("--n", min=1, help="pdoctor: number of requests")] = 50,
        seed: Annotated[int, typer.Option(help="pdoctor: synthesis seed")] = 0,
        tries: Annotated[int, typer.Option(min=1, help="pdoctor: expansions tried per sentence")] = 10,
        extended: Annotated[bool, typer.Option(help="pdoctor: start times, durations, time bounds")] = False,
    ) -> None:
        """Evaluate methods on a benchmark (or run any flow once on --task).

        A method is a name from --list-methods or a flow of yours as module:attribute (imported
        from the current directory), evaluated with the same records, resume and report.
        """
        from stateflow.tasks.kit.selection import check_selection

        from stateflow.cli.inputs import output_dir

        # The arguments first, before the imports below (AutoGen, every benchmark: seconds of CPU)
        check_selection(tasks)
        output_dir(out, "--out", create=False)
        from stateflow.tasks.harness.registry import default_registry
        from stateflow.tasks.harness.runner import RunSpec
        from stateflow.tasks.kit.benchmark import DatasetRequest

        console = Console(stderr=True)
        registry = default_registry()
        if list_methods:
            method_listing.list_methods(registry, target if target in registry else None)
            return
        if explain is not None:
            method_listing.explain(registry, target if target in registry else None, explain)
            return
        if target is None:
            raise typer.BadParameter("give a benchmark or flow (or --list-methods)", param_hint="TARGET")
        assignment, label = _assignment(model or [], config)
        if temperature is not None:
            from stateflow.tasks.harness.repeats import with_temperature

            assignment = with_temperature(assignment, temperature)
        if target not in registry:
            if repeats > 1:
                raise ConfigError(f"--repeats {repeats} applies to benchmark runs, not to one flow run on --task")
            _run_flow(target, task, assignment, console, registry, thread, checkpoints, stream)
            return
        flow_only = {"--task": task, "--thread": thread, "--checkpoints": checkpoints, "--stream": stream or None}
        given = [name for name, value in flow_only.items() if value is not None]
        if given:  # a benchmark run resumes from --out by itself; these would be ignored without a word
            raise ConfigError(
                f"{', '.join(given)}: for one flow run (stateflow run FLOW --task TEXT), not a benchmark "
                f"run of {target} (its records in --out resume by themselves)"
            )
        bench = registry.get(target)
        if sql_database_scope is not None and not bench.database_scope:
            scoped = ", ".join(b.name for b in registry if b.database_scope)
            raise ConfigError(f"--sql-database-scope applies to {scoped} only, not {target}")
        dataset = bench.resolve_dataset(
            DatasetRequest(dataset, actions, sentences, n, seed, tries, extended, oracle=policy is Policy.ORACLE)
        )
        if policy is Policy.LLM:
            _announce(console, assignment)
        else:
            console.print("policy: [bold]oracle[/] (gold replay; validates the harness, not a model)")
        spec = RunSpec(
            benchmark=bench,
            methods=tuple(m.strip() for m in method.split(",") if m.strip()),
            models=assignment,
            models_label=label,
            out=out,
            dataset=dataset,
            tasks=tasks,
            workers=workers if workers is not None else 1 if policy is Policy.ORACLE else default_workers(assignment),
            max_turns=max_turns,
            task_timeout_s=timeout,
            grammar=(policy is Policy.LLM and _auto_grammar(assignment)) if grammar is None else grammar,
            oracle=policy is Policy.ORACLE,
            backend=backend.value if backend is not None else None,
            dsn=dsn,
            data_dir=data,
            sql_database_scope=(sql_database_scope or SqlDatabaseScope.BENCHMARK).value,
            retry_errors=retry_errors,
            mix_settings=mix_settings,
            order=order.value,
            live_tokens=live_tokens,
        )
        from stateflow.tasks.harness.repeats import check_repeats, repeat_rows, repeat_table, run_repeats

        check_repeats(assignment, repeats, oracle=spec.oracle)  # before any model starts
        chosen = _executor(executor, ray_address, None if spec.oracle else assignment, ray_worker_cpus)
        with stop_on_signals():
            summaries = run_repeats(
                spec, repeats, seed=sampling_seed, console=console, progress=not no_progress, **chosen
            )
        records = [r for s in summaries for r in s.records]
        _print_results(_table_console(), records, f"{target} ({dataset}) — {out}")
        if repeats > 1 and spec.oracle:
            _print_gold_check(_table_console(), records, repeats)
        elif repeats > 1:
            _table_console().print(repeat_table(repeat_rows(records, repeats)))
        console.print(f"results: {out / 'results.jsonl'}   report: stateflow report {out}")
        _warn_never_submitted(console, records)
        if any(s.interrupted for s in summaries):
            raise typer.Exit(130)

    @app.command("report")
    def report_cmd(
        dirs: Annotated[list[str], typer.Argument(help="result directories (or results.jsonl files)")],
        out: Annotated[
            Path | None,
            typer.Option(
                help="where to write the report (default: the first DIR; for a file other than "
                "results.jsonl, such as an archive, a FILE-report folder next to it)"
            ),
        ] = None,
        by_hardness: Annotated[bool, typer.Option(help="also print the table by hardness")] = False,
    ) -> None:
        """Print the paper-style table and write plots and an HTML report."""
        from stateflow.cli.inputs import output_dir

        if out is not None:  # before the table is printed: a bad --out would fail after it
            output_dir(out, "--out", create=False)
        from stateflow.tasks.reports.metrics import GROUP_KEYS, load_results, summarize
        from stateflow.tasks.reports.report import metrics_table
        from stateflow.tasks.ui.static_report import write_report

        records = load_results(dirs)
        if not records:
            raise ConfigError(f"no episodes recorded in {', '.join(dirs)}")
        console = _table_console()
        console.print(metrics_table(summarize(records)))
        if by_hardness:
            keys = (*GROUP_KEYS, "hardness")
            console.print(metrics_table(summarize(records, keys), keys, title="by hardness"))
        from stateflow.tasks.harness.repeats import recorded_repeats, repeat_rows, repeat_table

        k = recorded_repeats(records)
        if k > 1:  # records of `run --repeats K`: pass@1 with its interval, pass@K, pass^K, flips
            rows = repeat_rows([r for r in records if r.models != "oracle"], k)
            if rows:
                console.print(repeat_table(rows))
            if any(r.models == "oracle" for r in records):
                _print_gold_check(console, records, k)
        from stateflow.tasks.pdoctor.report import pdoctor_tables  # pdoctor: by number of actions and error class

        for table in pdoctor_tables(records):
            console.print(table)
        _warn_never_submitted(Console(stderr=True), records)
        target = out or _report_dir(Path(dirs[0]))
        target.mkdir(parents=True, exist_ok=True)
        paths = write_report(records, target)
        for name, p in paths.items():
            console.print(f"{name}: {p}")


def _run_flow(
    ref: str,
    task: str | None,
    assignment: ModelAssignment,
    console: Console,
    registry: BenchmarkRegistry,
    thread: str | None = None,
    checkpoints: str | None = None,
    stream: bool = False,
) -> None:
    from stateflow.tasks.cli import registered_flows
    from stateflow.tasks.cli.threads import print_run

    from stateflow.cli.flows import resolve_flow
    from stateflow.flow_ref import portable_ref
    from stateflow.runtime import run

    if not task:
        raise ConfigError(f"{ref!r} is not a benchmark ({', '.join(registry.names())}); give --task TEXT to run it")
    flow = resolve_flow(ref, registered_flows())
    _announce(console, assignment)
    on_event = None
    if stream:
        from stateflow.tasks.cli.live_print import EventPrinter

        on_event = EventPrinter(console)
    if thread is None and checkpoints is None:
        result = run(flow, task, models=assignment, on_event=on_event, progress=False if stream else None)
    else:
        from stateflow.checkpoint.location import open_checkpointer

        store = open_checkpointer(checkpoints)
        try:
            saved_ref = portable_ref(ref)  # so `stateflow resume` finds the flow from any directory
            result = run(
                flow,
                task,
                models=assignment,
                thread_id=thread,
                checkpointer=store,
                flow_ref=saved_ref,
                on_event=on_event,
                progress=False if stream else None,  # --stream prints every event already
            )
        finally:
            store.close()
    print_run(console, result)

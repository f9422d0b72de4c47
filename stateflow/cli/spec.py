"""`stateflow spec ...`: inspect, check and run agent specs.

* ``spec list``: the shipped library specs with their automaton sizes.
* ``spec show SPEC``: states, behaviour, automaton size, transition table, load-time warnings.
* ``spec graph SPEC``: the automaton as Mermaid (default), a table or JSON.
* ``spec check SPEC [--examples FILE] [--trace A,B,C]``: validate the spec, few-shot examples
  (valid, or the first violating step) and traces. Exit code 1 when anything is invalid.
* ``spec run SPEC --task TEXT``: run the spec as a StateFlow flow (``--engine flow``, default)
  or under the decoding monitor (``--engine monitor``).

SPEC is a path to a ``.lisp`` file or the name of a library spec (``stateflow spec list``).
"""

from __future__ import annotations

import json
import sys
from collections import defaultdict, deque
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from stateflow.errors import ConfigError, StateFlowError
from stateflow.spec.compiled import AgentSpec
from stateflow.spec.library import library_names, library_spec
from stateflow.spec.model import formula_to_sexpr

__all__ = ["app", "register", "resolve_spec"]

app = typer.Typer(help="Agent specs: show, graph, check and run behaviour specs.", no_args_is_help=True)


def register(root: typer.Typer) -> None:
    """Attach the ``spec`` command group to the root CLI app."""
    root.add_typer(app, name="spec")


def resolve_spec(ref: str) -> AgentSpec:
    """A spec from a file path or a library name.

    Raises:
        FileNotFoundError: neither a file nor a library spec (the message lists the library).
        SpecError: the spec is malformed (with file, line and column).
    """
    path = Path(ref)
    if path.is_file():
        return AgentSpec.from_file(path)
    if ref in library_names():
        return library_spec(ref)
    raise FileNotFoundError(
        f"no spec file {ref!r} and no library spec of that name; library: {', '.join(library_names())}"
    )


def _out() -> Console:
    return Console(highlight=False, soft_wrap=True)


@app.command("list")
def list_specs() -> None:
    """List the library specs with their automaton sizes."""
    table = Table("spec", "states", "DFA states", "DFA edges", "warnings")
    for name in library_names():
        s = library_spec(name)
        table.add_row(name, str(len(s.spec.states)), str(s.dfa.num_states), str(s.dfa.num_edges), str(len(s.warnings)))
    _out().print(table)


@app.command("show")
def show(spec: Annotated[str, typer.Argument(help="spec file or library name")]) -> None:
    """Show a spec's states, behaviour, automaton and warnings."""
    s = resolve_spec(spec)
    out = _out()
    out.print(f"[bold]{escape(s.name)}[/] ({escape(s.spec.source)})")
    table = Table("state", "text", "source", "allowed values")
    for d in s.spec.states.values():
        table.add_row(d.name, escape(repr(d.text)), "env-input" if d.env_input else "llm", escape(", ".join(d.choices)))
    out.print(table)
    out.print(f"behaviour: {escape(formula_to_sexpr(s.spec.behavior))}")
    first = ", ".join(s.dfa.next_states(s.dfa.start))
    out.print(f"automaton: {s.dfa.num_states} states, {s.dfa.num_edges} edges; first states: {first}")
    _print_table(s, out)
    for w in s.warnings:
        out.print(f"[yellow]warning:[/] {escape(w)}")


def _print_table(s: AgentSpec, out: Console) -> None:
    from stateflow.spec.render import transition_table

    table = Table("from", "state", "to", "flags")
    for q, name, r, flags in transition_table(s):
        table.add_row(f"q{q}", name, f"q{r}" if r >= 0 else "", flags)
    out.print(table)


@app.command("graph")
def graph(
    spec: Annotated[str, typer.Argument(help="spec file or library name")],
    fmt: Annotated[
        str, typer.Option("--format", "-f", help="mermaid, table, json (the automaton) or flow (the imported flow)")
    ] = "mermaid",
    output: Annotated[Path | None, typer.Option("--output", "-o", help="write to this file")] = None,
) -> None:
    """Print the spec's automaton (edges are labelled with declared states)."""
    from stateflow.spec.render import to_mermaid, transition_table

    s = resolve_spec(spec)
    if fmt == "mermaid":
        text = to_mermaid(s)
    elif fmt == "table":
        text = "\n".join(f"q{q}\t{n}\t{'q' + str(r) if r >= 0 else ''}\t{f}" for q, n, r, f in transition_table(s))
    elif fmt == "flow":
        from stateflow.graph import to_mermaid as flow_mermaid
        from stateflow.spec.importer import spec_to_flow, task_input

        handlers = {n: task_input for n in s.spec.env_states}  # placeholders: only the shape is drawn
        text = flow_mermaid(spec_to_flow(s, env_inputs=handlers).flow)
    elif fmt == "json":
        dfa = s.dfa
        text = json.dumps(
            {
                "name": s.name,
                "start": dfa.start,
                "accepting": sorted(dfa.accepting),
                "transitions": {str(q): dict(e) for q, e in dfa.transitions.items()},
                "states": {
                    n: {"text": d.text, "env_input": d.env_input, "choices": list(d.choices)}
                    for n, d in s.spec.states.items()
                },
            },
            indent=2,
        )
    else:
        raise ValueError(f"--format {fmt!r}: valid formats are mermaid, table, json, flow")
    if output is not None:
        output.write_text(text + "\n", encoding="utf-8")
        typer.echo(f"wrote {output}")
    else:
        typer.echo(text)


@app.command("check")
def check(
    spec: Annotated[str, typer.Argument(help="spec file or library name")],
    examples: Annotated[
        Path | None, typer.Option("--examples", "-e", help="few-shot examples file (--- separated, or JSON list)")
    ] = None,
    trace: Annotated[
        list[str] | None, typer.Option("--trace", "-t", help="comma-separated state names to check")
    ] = None,
) -> None:
    """Validate a spec, and optionally few-shot examples and traces against it."""
    from stateflow.spec.examples import check_examples_file

    s = resolve_spec(spec)
    out = _out()
    out.print(f"spec {escape(s.name)}: ok ({s.dfa.num_states} automaton states, {s.dfa.num_edges} edges)")
    for w in s.warnings:
        out.print(f"[yellow]warning:[/] {escape(w)}")
    failed = False
    if examples is not None:
        for report in check_examples_file(s, examples):
            failed |= not report.ok
            colour = "green" if report.ok else "red"
            out.print(f"[{colour}]{escape(str(report))}[/]")
    for t in trace or []:
        names = [n.strip() for n in t.split(",") if n.strip()]
        unknown = [n for n in names if n not in s.spec.states]
        if unknown:
            raise ConfigError(f"--trace {t!r}: unknown state(s) {unknown}; declared: {', '.join(s.spec.states)}")
        bad = s.dfa.first_violation(names)
        if bad is None:
            out.print(f"[green]trace {escape(t)}: accepted[/]")
        else:
            failed = True
            where = "ends too early" if bad == len(names) else f"step {bad + 1} ({names[bad]}) is invalid"
            out.print(f"[red]trace {escape(t)}: {where}[/]")
    if failed:
        raise typer.Exit(1)


def _parse_inputs(values: list[str]) -> dict[str, deque[str]]:
    out: dict[str, deque[str]] = defaultdict(deque)
    for v in values:
        state, sep, text = v.partition("=")
        if not sep or not state.strip():
            raise ConfigError(f"--input {v!r}: expected STATE=TEXT (e.g. --input Observation='42')")
        out[state.strip()].append(text)
    return out


DONE_INPUT = "/done"


class _CliInputs:
    """Content for env-input states: the task for the first one, then --input values, then the
    terminal (only when interactive). The input ``/done`` ends the run where the spec allows."""

    def __init__(self, spec: AgentSpec, task: str, inputs: dict[str, deque[str]]):
        unknown = [n for n in inputs if n not in spec.spec.env_states]
        if unknown:
            raise ConfigError(
                f"--input for {unknown}: not env-input states; env-input states: {list(spec.spec.env_states)}"
            )
        self.spec = spec
        self.task = task
        self.inputs = inputs
        self.task_used = False

    def next(self, state: str) -> str:
        if not self.task_used:
            self.task_used = True
            return self.task
        queue = self.inputs.get(state)
        if queue:
            return queue.popleft()
        if sys.stdin.isatty():
            return typer.prompt(self.spec.state(state).text)
        raise StateFlowError(f"no input left for env-input state {state!r}; give more with --input {state}=TEXT")


@app.command("run")
def run_spec(
    spec: Annotated[str, typer.Argument(help="spec file or library name")],
    task: Annotated[str, typer.Option("--task", help="the task; it is the content of the first env-input state")],
    model: Annotated[list[str] | None, typer.Option("--model", "-m", help="PROFILE or STATE=PROFILE")] = None,
    config: Annotated[Path | None, typer.Option("--config", help="TOML file with profiles and [models]")] = None,
    engine: Annotated[str, typer.Option(help="flow (StateFlow runtime) or monitor (decoding monitor)")] = "flow",
    inputs: Annotated[
        list[str] | None, typer.Option("--input", "-i", help="STATE=TEXT for env-input states, in order")
    ] = None,
    grammar: Annotated[
        bool, typer.Option("--grammar/--no-grammar", help="token-level grammars where supported")
    ] = True,
    ending: Annotated[
        str,
        typer.Option(help="flow engine: who ends a run where it may stop: judge (the model) or input (/done)"),
    ] = "judge",
    as_json: Annotated[bool, typer.Option("--json", help="print the result as JSON")] = False,
) -> None:
    """Run a spec on a task with any model profile (per-state models with --model STATE=PROFILE)."""
    from stateflow.profiles import ModelAssignment, load_config, parse_model_options

    s = resolve_spec(spec)
    feed = _CliInputs(s, task, _parse_inputs(inputs or []))
    err = Console(stderr=True, highlight=False, soft_wrap=True)
    for w in s.warnings:  # load-time warnings: ambiguous texts, empty correction prefixes
        err.print(f"[yellow]warning:[/] {escape(w)}")
    assignment = load_config(config) if config else ModelAssignment.of(None)
    if model:
        assignment = assignment.merged(parse_model_options(model))
    assignment.refuse_test_doubles()
    out = _out()
    if engine == "monitor":
        from stateflow.spec.completer import completer_for
        from stateflow.spec.monitor import DecodingMonitor

        profile = assignment.profile_for("default")
        completer = completer_for(profile)
        mon = DecodingMonitor(s, completer, use_grammar=grammar and completer.supports_grammar)
        system = {"role": "system", "content": _monitor_system(s)}

        def supply(state: str, steps: Any) -> str | None:
            text = feed.next(state)
            return None if text.strip() == DONE_INPUT else text

        tr = mon.run([system, {"role": "user", "content": task}], supply)
        if as_json:
            typer.echo(json.dumps(tr.to_dict(), indent=2))
            return
        out.print(escape(tr.transcript))
        out.print(
            f"stop: {tr.stop_reason}; calls {tr.calls}; violations {len(tr.violations)}; corrections "
            f"{tr.corrections}; forced choices {tr.forced_choices}; wasted tokens {tr.wasted_tokens}"
        )
        return
    if engine != "flow":
        raise ValueError(f"--engine {engine!r}: valid engines are flow, monitor")
    import stateflow
    from stateflow.outputs import ToolResult
    from stateflow.spec.importer import SpecRun, spec_to_flow

    def handler(name: str) -> Any:
        def supply(ctx: Any) -> ToolResult:
            text = feed.next(name)
            if text.strip() == DONE_INPUT:
                return ToolResult("(done)", meta={"done": True})
            return ToolResult(text)

        return supply

    handlers = {n: handler(n) for n in s.spec.env_states}
    if ending not in ("judge", "input"):
        raise ValueError(f"--ending {ending!r}: valid values are judge, input")
    sf = spec_to_flow(
        s, env_inputs=handlers, use_grammar=grammar, ending="judge" if ending == "judge" else "environment"
    )
    result = stateflow.run(sf.flow, task, models=assignment)
    if as_json:
        typer.echo(json.dumps({**result.to_dict(), "spec_trace": sf.trace(result)}, indent=2, default=str))
        return
    for m in result.history:
        if m.kind.value in ("llm", "tool") and m.state in s.spec.states:
            out.print(f"{escape(s.state(m.state).text)} {escape(m.content.strip())}")
    u = result.usage()
    kept = result.board.get(SpecRun) or SpecRun()
    out.print(
        f"stop: {result.stop_reason}; trace valid: {s.dfa.accepts(sf.trace(result))}; "
        f"calls {u.calls}; tokens {u.prompt_tokens}+{u.completion_tokens}; "
        f"retries/fallbacks: {len(kept.violations)}/{len(kept.fallbacks)}"
    )


def _monitor_system(s: AgentSpec) -> str:
    lines = [f"Work in the '{s.name}' format: every step is a line starting with its label, in this order:"]
    for d in s.spec.states.values():
        who = "provided to you; never write it yourself" if d.env_input else "you write it"
        extra = f"; one of: {', '.join(d.choices)}" if d.choices else ""
        lines.append(f"- {d.text} ({who}{extra})")
    return "\n".join(lines)

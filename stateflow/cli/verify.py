"""`stateflow verify FLOW --spec SPEC`: model-check a flow's bounded paths against an agent spec.

Prints the verdict (holds, with the bound and the abstraction of conditions; or violated, with
the shortest counterexample path) and, for a violation, the flow's Mermaid diagram with the path
in red (``--mermaid FILE`` writes it to a file instead). Exit code 0 when the spec holds, 1 when
it is violated (so a CI step fails), 1 with one ``error:`` line for bad input.

With ``--records RUN`` instead of FLOW it checks the paths of archived runs, per method
(:mod:`stateflow.spec.records`; exit code 0).

FLOW is a registered flow name or ``module:attribute`` (as for ``stateflow graph``); SPEC is a spec
file or a library spec name (as for ``stateflow spec show``). See :mod:`stateflow.spec.verify`.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer

from stateflow.cli.flows import resolve_flow
from stateflow.cli.inputs import output_dir
from stateflow.cli.spec import resolve_spec
from stateflow.errors import ConfigError
from stateflow.flow import Flow
from stateflow.spec.records import check_paths, read_path_records
from stateflow.spec.verify import Verdict, counterexample_mermaid, verify

__all__ = ["CutOffChoice", "parse_map", "register", "verdict_json"]


class CutOffChoice(StrEnum):
    """How a path cut off by the bound is judged (``--cut-off``)."""

    PREFIX = "prefix"
    COMPLETE = "complete"


def parse_map(items: list[str]) -> dict[str, str | None]:
    """``STATE=SYMBOL`` options as an alphabet (``STATE=`` hides the state).

    >>> parse_map(["Init=Start", "Observe="])
    {'Init': 'Start', 'Observe': None}

    Raises:
        ConfigError: an item without ``=`` or a state mapped twice.
    """
    out: dict[str, str | None] = {}
    for item in items:
        state, sep, symbol = item.partition("=")
        if not sep or not state.strip():
            raise ConfigError(f"--map {item!r}: expected STATE=SYMBOL (or STATE= to hide the state)")
        if state.strip() in out:
            raise ConfigError(f"--map {item!r}: state {state.strip()!r} is mapped twice")
        out[state.strip()] = symbol.strip() or None
    return out


def verdict_json(verdict: Verdict) -> dict[str, object]:
    """The verdict as a JSON-ready dictionary (``--json``)."""
    cex = verdict.counterexample
    return {
        "flow": verdict.flow,
        "spec": verdict.spec,
        "holds": verdict.holds,
        "bound": verdict.bound,
        "cut_off": verdict.cut_off,
        "abstraction": list(verdict.abstraction),
        "hidden": list(verdict.hidden),
        "explored": verdict.explored,
        "counterexample": None
        if cex is None
        else {
            "path": list(cex.path),
            "rules": [s.rule for s in cex.steps],
            "trace": list(cex.trace),
            "reason": cex.reason,
        },
    }


def _check_records(source: Path, spec: str, alphabet: dict[str, str | None], as_json: bool) -> None:
    """Print the spec's violation rate per method over the archived runs at ``source``."""
    if Path(spec).is_dir():
        raise ConfigError(f"--spec {spec}: is a directory; give a spec file (.lisp) or a library spec name")
    agent_spec = resolve_spec(spec)
    rows = check_paths(read_path_records(source), agent_spec, alphabet=alphabet)
    if as_json:
        out = [
            {
                "method": r.group,
                "checked": r.checked,
                "violations": r.violations,
                "rate": r.rate,
                "interval": r.interval,
                "skipped": r.skipped,
                "example": None if r.example is None else list(r.example),
            }
            for r in rows
        ]
        typer.echo(json.dumps({"spec": agent_spec.name, "records": str(source), "methods": out}, indent=2))
        return
    typer.echo(f"spec {agent_spec.name!r} on the runs of {source} (95 % Wilson intervals)")
    width = max([len(r.group) for r in rows] + [6])
    typer.echo(f"{'method':{width}}  checked  violated  rate    interval       not applicable  shortest violation")
    for r in rows:
        if r.checked == 0:
            typer.echo(f"{r.group:{width}}  {0:7}  {'-':>8}  {'-':6}  {'-':13}  {r.skipped:14}")
            continue
        low, high = r.interval or (0.0, 0.0)
        example = " -> ".join(r.example) if r.example else ""
        typer.echo(
            f"{r.group:{width}}  {r.checked:7}  {r.violations:8}  {r.rate or 0:6.1%}  "
            f"[{low:5.1%}, {high:5.1%}]  {r.skipped:14}  {example}"
        )


def register(app: typer.Typer, flows: Callable[[], Mapping[str, Callable[[], Flow]]]) -> None:
    """Add the ``verify`` command to ``app``; ``flows`` gives the registered flows."""

    @app.command("verify")
    def verify_command(
        spec: Annotated[str, typer.Option("--spec", help="spec file (.lisp) or library spec name")],
        flow: Annotated[str | None, typer.Argument(help="registered flow name or module:attribute")] = None,
        bound: Annotated[
            int | None,
            typer.Option("--bound", min=1, help="transition bound to explore (default: the flow's max_transitions)"),
        ] = None,
        mapping: Annotated[
            list[str] | None,
            typer.Option("--map", help="STATE=SYMBOL: the spec reads STATE as SYMBOL; STATE= hides it (repeatable)"),
        ] = None,
        cut_off: Annotated[
            CutOffChoice,
            typer.Option("--cut-off", help="a path the bound cuts off must be a valid prefix, or complete"),
        ] = CutOffChoice.PREFIX,
        mermaid: Annotated[
            Path | None, typer.Option("--mermaid", help="write the diagram with the counterexample to this file")
        ] = None,
        as_json: Annotated[bool, typer.Option("--json", help="print the verdict as JSON")] = False,
        records: Annotated[
            Path | None,
            typer.Option("--records", help="check the paths of archived runs (a results .jsonl or a folder) instead"),
        ] = None,
    ) -> None:
        """Check every bounded path of a flow against a spec; print the shortest counterexample.

        With --records RUN instead of FLOW: the spec on every archived run's path, per method.
        """
        if (flow is None) == (records is None):
            raise ConfigError("give a FLOW to verify or --records RUN to check archived runs (one of them)")
        if records is not None:
            _check_records(records, spec, parse_map(mapping or []), as_json)
            return
        assert flow is not None
        if mermaid is not None and mermaid.is_dir():
            raise ConfigError(f"--mermaid {mermaid}: is a directory; give a file, e.g. {mermaid / 'cex.md'}")
        if mermaid is not None:
            output_dir(mermaid.parent, "--mermaid")
        alphabet = parse_map(mapping or [])
        if Path(spec).is_dir():
            raise ConfigError(f"--spec {spec}: is a directory; give a spec file (.lisp) or a library spec name")
        agent_spec = resolve_spec(spec)
        f = resolve_flow(flow, flows())
        verdict = verify(f, agent_spec, bound=bound, alphabet=alphabet, cut_off=cut_off.value)
        diagram = None if verdict.counterexample is None else counterexample_mermaid(f, verdict.counterexample)
        if as_json:
            typer.echo(json.dumps(verdict_json(verdict), indent=2))
        else:
            typer.echo(str(verdict))
        if diagram is not None:
            if mermaid is not None:
                mermaid.write_text(diagram, encoding="utf-8")
                typer.echo(f"wrote {mermaid}")
            elif not as_json:
                typer.echo("\n" + diagram, nl=False)
        if not verdict.holds:
            raise typer.Exit(1)

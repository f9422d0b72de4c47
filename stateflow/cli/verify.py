"""`stateflow verify FLOW --spec SPEC`: model-check a flow's bounded paths against an agent spec.

Prints the verdict (holds, with the bound and the abstraction of conditions; or violated, with
the shortest counterexample path) and, for a violation, the flow's Mermaid diagram with the path
in red (``--mermaid FILE`` writes it to a file instead). Exit code 0 when the spec holds, 1 when
it is violated (so a CI step fails), 1 with one ``error:`` line for bad input.

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


def register(app: typer.Typer, flows: Callable[[], Mapping[str, Callable[[], Flow]]]) -> None:
    """Add the ``verify`` command to ``app``; ``flows`` gives the registered flows."""

    @app.command("verify")
    def verify_command(
        flow: Annotated[str, typer.Argument(help="registered flow name or module:attribute")],
        spec: Annotated[str, typer.Option("--spec", help="spec file (.lisp) or library spec name")],
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
    ) -> None:
        """Check every bounded path of a flow against a spec; print the shortest counterexample."""
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

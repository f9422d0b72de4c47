"""`stateflow run --list-methods` and `--explain METHOD`: the methods of the benchmarks, as recipes."""

from __future__ import annotations

from typing import TYPE_CHECKING

import typer

if TYPE_CHECKING:
    from stateflow.tasks.harness.registry import BenchmarkRegistry
    from stateflow.tasks.kit.benchmark import Method

__all__ = ["explain", "list_methods"]


def list_methods(registry: BenchmarkRegistry, target: str | None = None) -> None:
    """One line per method, grouped by family: its name, the benchmarks it applies to, what it is.

    With ``target`` (a benchmark), that benchmark's methods only. A method name shared by
    several benchmarks is one line (its description from the first that has it).
    """
    benches = [registry.get(target)] if target is not None else list(registry)
    families: dict[str, dict[str, Method]] = {}
    applies: dict[str, list[str]] = {}
    for bench in benches:
        for name, m in bench.methods.items():
            applies.setdefault(name, []).append(bench.domain)
            families.setdefault(m.family or "other", {}).setdefault(name, m)
    for family, methods in families.items():
        typer.echo(f"# {family}")
        for name, m in methods.items():
            typer.echo(f"{name:29} {','.join(applies[name]):19} {m.description}")
    with_levers = [b for b in benches if b.levers is not None]
    for bench in with_levers:
        typer.echo(f"# levers of {bench.name}: add them to a recipe, e.g. --method 'sf_agent_hint+values'")
        for lever in bench.levers or ():
            typer.echo(f"+{lever.name:28} {bench.domain:19} {lever.about}")


def explain(registry: BenchmarkRegistry, target: str | None, name: str) -> None:
    """Print what ``name`` is on ``target`` (or the first benchmark that has it): its recipe,
    and each lever's description, needs and measured effect.

    Raises:
        ValueError: no benchmark has such a method (or the recipe's levers do not fit).
    """
    from stateflow.tasks.agents.methods import resolve_method

    benches = [registry.get(target)] if target is not None else list(registry)
    for bench in benches:
        try:
            method = resolve_method(bench, name)
        except ValueError:
            if target is not None or bench is benches[-1]:
                raise
            continue
        typer.echo(f"{method.name} on {bench.name}: {method.description}")
        recipe = method.recipe
        if recipe is None or bench.levers is None:
            typer.echo("not a recipe: a method of its own (no levers)")
            return
        typer.echo(f"recipe: {recipe.base} flow, {recipe.view} view, levers: {', '.join(recipe.levers) or '(none)'}")
        typer.echo(f"as a command line: --method {recipe.text()}")
        if recipe.parent:
            typer.echo(f"extends: {recipe.parent}")
        for lever_name in recipe.levers:
            lever = bench.levers.get(lever_name)
            typer.echo(f"  + {lever.name}: {lever.about}")
            if lever.needs:
                typer.echo(f"      needs: {', '.join(lever.needs)}")
            typer.echo(f"      measured: {lever.effect or 'not measured'}")
        return

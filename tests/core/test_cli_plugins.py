"""The core CLI's plugin mechanism: entry points add commands and named flows, broken ones are reported."""

from __future__ import annotations

from importlib.metadata import EntryPoint

import pytest
import typer
from typer.testing import CliRunner

from stateflow import LLM, Flow, State, Transition
from stateflow.cli import flows as flow_commands
from stateflow.cli.plugins import CliPlugin, PluginLoadError, _load, named_flows
from stateflow.errors import ConfigError


def _flow(name: str) -> Flow:
    ask = State("Ask", LLM())
    return Flow(name, initial=ask, transitions=[Transition(ask, State("Done", final=True))])


def test_a_broken_entry_point_becomes_a_load_error_naming_it() -> None:
    missing = _load(EntryPoint("gone", "no_such_module_for_stateflow:PLUGIN", "stateflow.plugins"))
    assert isinstance(missing, PluginLoadError)
    assert "gone = no_such_module_for_stateflow:PLUGIN" in str(missing) and "ModuleNotFoundError" in str(missing)
    wrong = _load(EntryPoint("wrong", "stateflow.errors:ConfigError", "stateflow.plugins"))
    assert isinstance(wrong, PluginLoadError) and "not a stateflow.cli.plugins.CliPlugin" in str(wrong)
    assert isinstance(_load(EntryPoint("tasks", "stateflow.tasks.cli:PLUGIN", "stateflow.plugins")), CliPlugin)


def test_named_flows_first_plugin_wins_and_graph_resolves_them() -> None:
    first = CliPlugin("a", flows=lambda: {"shared": lambda: _flow("from-a"), "only-a": lambda: _flow("a2")})
    second = CliPlugin("b", flows=lambda: {"shared": lambda: _flow("from-b")})
    named = named_flows((first, second))
    assert sorted(named) == ["only-a", "shared"] and named["shared"]().name == "from-a"
    assert flow_commands.resolve_flow("shared", named).name == "from-a"
    with pytest.raises(ConfigError, match=r"unknown flow 'nope': use a registered name \(shared, only-a\)"):
        flow_commands.resolve_flow("nope", named)


def test_graph_command_draws_a_plugin_flow() -> None:
    app = typer.Typer()
    flow_commands.register(app, lambda: {"toy": lambda: _flow("toy")})
    result = CliRunner().invoke(app, ["graph", "toy"])
    assert result.exit_code == 0, result.output
    assert "s_Ask" in result.output and "s_Done" in result.output
    listed = CliRunner().invoke(app, ["validate", "--list"])
    assert listed.exit_code == 0 and listed.output.startswith("toy")

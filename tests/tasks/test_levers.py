"""Levers as data (issue 42, item 3): the lever table, recipes, their validation and the CLI.

The presets' fingerprints are pinned by tests/tasks/test_golden_identities.py; here a recipe
composed from a preset plus levers must reproduce the named preset exactly, every problem of a
recipe must come in one error, and a composed recipe must run end to end.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from stateflow.tasks.agents.methods import build_method, resolve_method
from stateflow.tasks.harness.identity import flow_fingerprint
from stateflow.tasks.kit.levers import Lever, LeverError, LeverTable, split_recipe
from stateflow.tasks.sql.benchmark import _SQL_PRESETS, INTERCODE_SQL
from stateflow.tasks.sql.levers import SQL_LEVERS, build_sql_flow, sql_recipe_flow

from stateflow import Flow
from stateflow.errors import ConfigError
from tests.core.test_cli import sf

ROOT = Path(__file__).resolve().parents[2]


def _fp(flow: Flow) -> str:
    return flow_fingerprint(flow)


@pytest.mark.parametrize("suffix", [s for s, (parent, _) in _SQL_PRESETS.items() if parent is not None])
@pytest.mark.parametrize("view", ["stateflow", "sf_agent"])
def test_a_preset_is_its_parent_plus_its_levers_on_the_command_line(suffix: str, view: str) -> None:
    # sf_agent_vote_question_last == sf_agent_prompt_vote+question_last, bit for bit, grammar on and off
    parent, adds = _SQL_PRESETS[suffix]
    composed = f"{view}{parent}+{'+'.join(adds)}"
    for grammar in (False, True):
        preset_flow, preset_view = build_method(f"{view}{suffix}", INTERCODE_SQL, grammar=grammar)
        flow, view_obj = build_method(composed, INTERCODE_SQL, grammar=grammar)
        assert _fp(flow) == _fp(preset_flow), (composed, grammar)
        assert type(view_obj) is type(preset_view)


def test_lever_order_on_the_command_line_does_not_matter() -> None:
    a = build_method("sf_agent+question_last+values+no_thoughts+schema", INTERCODE_SQL)[0]
    b = build_method("sf_agent+schema+no_thoughts+values+question_last", INTERCODE_SQL)[0]
    assert _fp(a) == _fp(b)
    assert _fp(a) != _fp(build_method("sf_agent+schema+no_thoughts+values", INTERCODE_SQL)[0])


def test_every_problem_of_a_recipe_comes_in_one_error() -> None:
    with pytest.raises(LeverError) as info:
        resolve_method(INTERCODE_SQL, "sf_agent+values+no_thoughts+typo+no_verify+no_error")
    problems = info.value.problems
    assert any("unknown lever 'typo'" in p and "question_last" in p for p in problems)  # lists the valid ones
    assert "lever 'values' needs 'schema'" in problems
    assert "lever 'no_thoughts' needs 'schema'" in problems
    assert "levers 'no_error' and 'no_verify' conflict" in problems
    assert len(problems) == 4
    assert isinstance(info.value, ValueError) and isinstance(info.value, ConfigError)
    assert str(info.value).startswith("recipe intercode-sql+")


def test_a_conflict_is_found_from_either_side_and_settings_are_checked() -> None:
    assert SQL_LEVERS.problems({"schema", "no_observe"}) == ["levers 'no_observe' and 'schema' conflict"]
    assert SQL_LEVERS.problems({"schema"}, {"schema": 2}) == ["lever 'schema' is a switch and takes no setting (=2)"]
    assert SQL_LEVERS.problems({"error_budget"}, {"error_budget": 0}) == ["lever 'error_budget': setting 0 is below 1"]
    assert SQL_LEVERS.problems(set(), {"vote": 3}) == ["a setting for 'vote', which is not in the recipe"]


def test_a_setting_changes_the_flow_and_its_fingerprint() -> None:
    one = build_method("stateflow+error_budget", INTERCODE_SQL)[0]
    assert _fp(one) == _fp(build_method("stateflow_budget", INTERCODE_SQL)[0])
    two = build_method("stateflow+error_budget=2", INTERCODE_SQL)[0]
    assert _fp(two) != _fp(one)
    assert "ANY -> End [(action failed & 2+ replies in Error)]" in [str(r) for r in two.transitions]


def test_levers_go_only_on_recipes() -> None:
    with pytest.raises(LeverError, match="'react' is not a recipe"):
        resolve_method(INTERCODE_SQL, "react+values")
    with pytest.raises(ValueError, match="unknown method 'nope'"):
        resolve_method(INTERCODE_SQL, "nope+values")
    with pytest.raises(ConfigError, match="no empty part"):
        split_recipe("sf_agent++values")
    with pytest.raises(ConfigError, match="whole number"):
        split_recipe("sf_agent+values=many")


def test_a_lever_table_rejects_unknown_names_at_construction() -> None:
    with pytest.raises(ConfigError, match=r"a\.needs names 'ghost'.*'a' twice|'a' twice.*a\.needs names 'ghost'"):
        LeverTable("x", (Lever("a", "one", needs=("ghost",)), Lever("a", "two")), lambda args, ctx: None)


def test_every_lever_says_what_it_does_where_it_applies_and_where_it_was_measured() -> None:
    headings = {
        doc: [line.lstrip("#").strip() for line in (ROOT / doc).read_text().splitlines() if line.startswith("#")]
        for doc in ("docs/results.md", "docs/results-history.md")
    }
    for lever in SQL_LEVERS:
        assert lever.about and "\n" not in lever.about, lever.name
        assert lever.applies_to == ("intercode-sql",), lever.name
        assert (
            lever.apply is not None
            or lever.base
            or any(
                lever.name in str(other.about) or other.name == "schema" or other.name.endswith("vote")
                for other in SQL_LEVERS
            )
        ), lever.name
        doc = lever.effect.split(",", 1)[0]
        sections = re.findall(r'"([^"]+)"', lever.effect)
        assert doc in headings and sections, lever.name
        for section in sections:
            stem = section.removesuffix("...")
            assert any(h.startswith(stem) for h in headings[doc]), (lever.name, doc, section)


def test_the_builder_switches_are_the_levers() -> None:
    # build_sql_flow(**switches) is the recipe under the builder's old keyword names
    assert _fp(build_sql_flow(schema=True, values=3, examples=False, thoughts=False, question_last=True)) == _fp(
        sql_recipe_flow({"schema", "values", "no_examples", "no_thoughts", "question_last"})
    )
    with pytest.raises(LeverError) as info:
        build_sql_flow(verify=False, error=False, values=3)
    assert len(info.value.problems) == 2


def test_list_methods_groups_by_family_with_one_distinct_line_each() -> None:
    p = sf("run", "intercode-sql", "--list-methods")
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    families = [line[2:] for line in lines if line.startswith("# ")]
    assert families[:2] == ["StateFlow view", "SF_Agent view"]
    assert {"baselines (the paper's)", "spec agents (the library's)"} <= set(families)
    methods = [line for line in lines if not line.startswith(("# ", "+"))]
    assert len(methods) == len(INTERCODE_SQL.methods)
    descriptions = [line.split(None, 2)[2] for line in methods]
    assert len(set(descriptions)) == len(descriptions)  # one distinct line each
    vql = next(line for line in methods if line.split()[0] == "sf_agent_vote_question_last")
    assert "sf_agent_prompt_vote + question_last" in vql
    assert any(line.startswith("+question_last ") for line in lines)


def test_explain_prints_the_recipe_and_each_levers_measured_effect() -> None:
    p = sf("run", "intercode-sql", "--explain", "sf_agent_vote_question_last")
    assert p.returncode == 0, p.stderr
    out = p.stdout
    assert "sf_agent view" in out and "extends: sf_agent_prompt_vote" in out
    recipe = next(line for line in out.splitlines() if line.startswith("as a command line:"))
    assert recipe.split("--method ")[1] == "sf_agent+" + "+".join(
        INTERCODE_SQL.methods["sf_agent_vote_question_last"].recipe.levers  # type: ignore[union-attr]
    )
    assert "+ question_last: Init repeats the question after the schema listing" in out
    assert "61 -> 66 %" in out
    amount = sf("run", "intercode-sql", "--explain", "stateflow+error_budget=2")
    assert amount.returncode == 0, amount.stderr
    assert "as a command line: --method stateflow+error_budget=2" in amount.stdout  # the amount is kept
    bad = sf("run", "intercode-sql", "--explain", "sf_agent+values")
    assert bad.returncode == 1 and "lever 'values' needs 'schema'" in bad.stderr and "Traceback" not in bad.stderr


def test_a_recipe_composed_on_the_command_line_runs_end_to_end(tmp_path: Path, sql_available: None) -> None:
    recipe = "sf_agent+schema+values+no_thoughts+question_last"
    out = tmp_path / "run"
    p = sf("run", "intercode-sql", "--policy", "oracle", "--method", recipe, "--out", str(out), "--no-progress")
    assert p.returncode == 0, p.stderr
    records = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert records and {r["method"] for r in records} == {recipe}
    assert all(r["reward"] == 1.0 for r in records), [(r["task_index"], r["reward"]) for r in records]
    expected = _fp(build_method(recipe, INTERCODE_SQL, grammar=False)[0])
    assert {r["identity"]["flow_sha256"] for r in records} == {expected}

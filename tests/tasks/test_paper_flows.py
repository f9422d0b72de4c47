"""The paper's flows and every ablation keep exactly the structure of the original builder.

``snapshots/paper_flows.json`` was written from the original ``build_sql_flow``/``build_bash_flow``
(seven switches, one 102-line function) before the flows became flat definitions with variants;
each case is rebuilt here and compared field by field (state order, outputs with prompt texts,
grammars and retry policy, rules in priority order, fingerprint). A difference would change an
ablation's behaviour or make recorded episodes fail to resume.
"""

from __future__ import annotations

import ast
import inspect
import json
from pathlib import Path
from typing import Any

import pytest
from stateflow.tasks.bash.flow import build_bash_flow
from stateflow.tasks.sql import flow as intercode_sql
from stateflow.tasks.sql.levers import build_sql_flow

from tests.tasks.paper_flow_structure import flow_structure

SNAPSHOT: dict[str, dict[str, Any]] = json.loads(
    (Path(__file__).parent / "snapshots" / "paper_flows.json").read_text(encoding="utf-8")
)

_SQL_CASES: dict[str, dict[str, bool]] = {
    "full": {},
    "no_verify": {"verify": False},
    "no_error": {"error": False},
    "no_observe": {"observe": False},
    "schema": {"schema": True},
    "no_resample": {"resample_repeats": False},
    "no_verify_no_observe": {"verify": False, "observe": False},
    "schema_no_error": {"schema": True, "error": False},
}


@pytest.mark.parametrize("grammar", [False, True])
@pytest.mark.parametrize("case", sorted(_SQL_CASES))
def test_sql_variant_matches_the_original_builder(case: str, grammar: bool) -> None:
    built = flow_structure(build_sql_flow(grammar=grammar, **_SQL_CASES[case]))
    assert built == SNAPSHOT[f"sql/{case}/grammar={grammar}"]


@pytest.mark.parametrize(
    ("case", "kwargs"), [("full", {}), ("full", {"grammar": True}), ("no_resample", {"resample_repeats": False})]
)
def test_bash_flow_matches_the_original_builder(case: str, kwargs: dict[str, bool]) -> None:
    built = flow_structure(build_bash_flow(**kwargs))
    assert built == SNAPSHOT[f"bash/{case}/grammar={kwargs.get('grammar', False)}"]


@pytest.mark.parametrize(
    ("attr", "case"),
    [
        ("SQL_FLOW", "full"),
        ("SQL_NO_VERIFY", "no_verify"),
        ("SQL_NO_ERROR", "no_error"),
        ("SQL_NO_OBSERVE", "no_observe"),
        ("SQL_SCHEMA", "schema"),
    ],
)
def test_named_variants_derived_from_the_one_definition_match(attr: str, case: str) -> None:
    assert flow_structure(getattr(intercode_sql, attr)) == SNAPSHOT[f"sql/{case}/grammar=False"]


def test_variants_share_the_definition_states_they_do_not_change() -> None:
    full, no_verify = intercode_sql.SQL_FLOW, intercode_sql.SQL_NO_VERIFY
    assert no_verify.states["Error"] is full.states["Error"]
    assert no_verify.states["Solve"] is not full.states["Solve"]  # told to submit instead
    assert intercode_sql.SQL_SCHEMA.states["Verify"] is full.states["Verify"]


def test_the_paper_flow_definition_is_at_most_40_lines() -> None:
    fn = ast.parse(inspect.getsource(intercode_sql.sql_flow)).body[0]
    assert isinstance(fn, ast.FunctionDef) and isinstance(fn.body[0], ast.Expr)  # starts with its docstring
    docstring = fn.body[0].end_lineno - fn.body[0].lineno + 1  # type: ignore[operator]
    assert fn.end_lineno - fn.lineno + 1 - docstring <= 40  # type: ignore[operator]

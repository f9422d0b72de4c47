"""The property specs on the shipped flows (issue 60): the docs table, and planted violations.

Every spec of ``tasks/kit/specs`` (and ``examples/specs``) is verified on the shipped flows; the
verdicts and counterexamples are the table of ``docs/verify.md``, checked here row by row. Then
each planted violation (a rule added to a copy of a shipped flow, via ``Flow.variant``) turns a
spec that holds into one that is violated, with the planted rule on the shortest path.
"""

from __future__ import annotations

import re
import warnings
from pathlib import Path

import pytest
from stateflow.tasks.bash.flow import build_bash_flow
from stateflow.tasks.kit.tools import statement_is
from stateflow.tasks.sql.flow import sql_flow

from stateflow import Flow, Transition, last_contains
from stateflow.cli.plugins import load_plugins, named_flows
from stateflow.flow_ref import load_flow
from stateflow.spec import AgentSpec
from stateflow.spec.verify import verify

ROOT = Path(__file__).resolve().parents[2]
SPECS = ROOT / "tasks" / "kit" / "specs"
PAGE = ROOT / "docs" / "verify.md"
TUTORIAL = ROOT / "docs" / "tutorials" / "sql-flow.md"
APPROVAL = ROOT / "examples" / "approval_over_two_processes.py"

HOLDS = "holds"
SQL = ("intercode-sql", "intercode-sql-no-verify", "intercode-sql-no-error", "intercode-sql-no-observe")
MORE = ("intercode-sql-schema", "intercode-sql-budget", "intercode-bash")
FLOWS = SQL + MORE

# spec -> flow -> "holds" or the counterexample path joined by " → " (or its length in states)
EXPECTED: dict[str, dict[str, str]] = {
    "select-before-submit": dict.fromkeys(FLOWS, "Init → End"),
    "schema-before-query": {
        "intercode-sql": "Init → Error → Verify",
        "intercode-sql-no-verify": "Init → Error → Solve",
        "intercode-sql-no-error": "Init → Verify",
        "intercode-sql-no-observe": "Init → Solve",
        "intercode-sql-schema": "Init → Solve",
        "intercode-sql-budget": "Init → Error → Verify",
        "intercode-bash": "Init → Solve",
    },
    "setup-once": dict.fromkeys(FLOWS, HOLDS),
    "three-repairs": {
        **dict.fromkeys(FLOWS, "Init → Error → Error → Error → Error"),
        "intercode-sql-no-error": HOLDS,
    },
    "repair-before-submit": {**dict.fromkeys(FLOWS, "Init → Error → End"), "intercode-sql-no-error": HOLDS},
    "check-after-action": {**dict.fromkeys(FLOWS, HOLDS), "intercode-sql-no-error": "Init → Verify"},
    "ends-within-bound": dict.fromkeys(FLOWS, "41 states"),
}
CUT_OFF = {"ends-within-bound": "complete"}


def _spec(path: Path) -> AgentSpec:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a spec may declare Observe, which the Bash flow lacks
        return AgentSpec.from_file(path)


def _shown(flow: Flow, spec: AgentSpec, cut_off: str = "prefix") -> str:
    verdict = verify(flow, spec, cut_off=cut_off)  # type: ignore[arg-type]
    if verdict.counterexample is None:
        return HOLDS
    path = verdict.counterexample.path
    return " → ".join(path) if len(path) <= 8 else f"{len(path)} states"


@pytest.fixture(scope="module")
def tutorial_flow(tmp_path_factory: pytest.TempPathFactory) -> Flow:
    """The SQL tutorial's ``# my_flows.py`` snippet, saved as the reader saves it."""
    tmp_path = tmp_path_factory.mktemp("tutorial")
    found = re.search(r"```python\n(# my_flows\.py\n.*?)```", TUTORIAL.read_text(encoding="utf-8"), re.S)
    assert found is not None
    module = tmp_path / "my_flows.py"
    module.write_text(found.group(1), encoding="utf-8")
    return load_flow(f"{module}:MY_FLOW")


def _page_rows() -> dict[tuple[str, str], str]:
    """``(spec, flow) -> verdict`` from the tables of docs/verify.md (a header row ``| spec |``
    names the flows of its columns; a cell is **holds** or the counterexample path)."""
    rows: dict[tuple[str, str], str] = {}
    flows: list[str] = []
    for line in PAGE.read_text(encoding="utf-8").splitlines():
        if not line.startswith("|"):
            flows = []
            continue
        cells = [c.strip().strip("`") for c in line.strip().strip("|").split("|")]
        if cells[0] == "spec":
            flows = cells[1:]
        elif flows and not set(cells[0]) <= {"-", ":", " "}:
            for flow, cell in zip(flows, cells[1:], strict=True):
                rows[(cells[0], flow)] = cell.replace("**", "")
    return rows


def test_every_spec_on_every_shipped_flow() -> None:
    flows = named_flows(load_plugins().plugins)
    assert {p.stem for p in SPECS.glob("*.lisp")} == set(EXPECTED)
    found = {
        name: {
            flow: _shown(flows[flow](), _spec(SPECS / f"{name}.lisp"), CUT_OFF.get(name, "prefix")) for flow in FLOWS
        }
        for name in EXPECTED
    }
    assert found == EXPECTED


def test_the_examples_specs(tutorial_flow: Flow) -> None:
    assert _shown(tutorial_flow, _spec(ROOT / "examples/specs/answer-before-submit.lisp")) == HOLDS
    approval = load_flow(f"{APPROVAL}:FLOW")
    assert _shown(approval, _spec(ROOT / "examples/specs/approve-before-publish.lisp")) == HOLDS


def test_the_docs_table_is_what_verify_says() -> None:
    rows = _page_rows()
    for name, by_flow in EXPECTED.items():
        for flow, shown in by_flow.items():
            assert rows.get((name, flow)) == shown, (name, flow, rows.get((name, flow)))
    assert rows[("answer-before-submit", "my-sql-flow")] == HOLDS
    assert rows[("approve-before-publish", "release-approval")] == HOLDS


# -- planted violations: a rule added to a copy of a shipped flow -------------------------------


def _planted(flow: Flow, rule: Transition, before: int) -> Flow:
    """A copy of ``flow`` with ``rule`` inserted at 0-based position ``before``."""
    rules = list(flow.transitions)
    rules.insert(before, rule)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return flow.variant(f"{flow.name}-planted", transitions=rules)


def _cex(flow: Flow, spec: str) -> tuple[str, ...]:
    verdict = verify(flow, _spec(SPECS / f"{spec}.lisp"))
    assert verdict.counterexample is not None, f"{spec} holds on {flow.name}"
    return verdict.counterexample.path


def test_planted_sql_observe_again_breaks_setup_once() -> None:
    flow = sql_flow()
    planted = _planted(flow, Transition(flow.states["Verify"], flow.states["Observe"], statement_is("DESC")), 3)
    assert verify(flow, _spec(SPECS / "setup-once.lisp")).holds
    # shortest: SHOW TABLES fails, the repair runs a SELECT, the check DESCs a table
    assert _cex(planted, "setup-once") == ("Init", "Error", "Verify", "Observe")


def test_planted_sql_check_straight_from_setup_breaks_check_after_action() -> None:
    flow = sql_flow()
    planted = _planted(flow, Transition(flow.states["Init"], flow.states["Verify"], statement_is("SELECT")), 3)
    assert verify(flow, _spec(SPECS / "check-after-action.lisp")).holds
    assert _cex(planted, "check-after-action") == ("Init", "Verify")


def test_planted_repair_loop_in_no_error_is_found_through_an_alphabet() -> None:
    # no-error sends failures to Verify; a planted Verify -> Verify rule ahead of all others is a repair loop
    flows = named_flows(load_plugins().plugins)
    flow = flows["intercode-sql-no-error"]()
    planted = _planted(flow, Transition(flow.states["Verify"], flow.states["Verify"], last_contains("ERROR")), 0)
    assert verify(planted, _spec(SPECS / "three-repairs.lisp")).holds  # no Error state: nothing to count
    renamed = verify(planted, _spec(SPECS / "three-repairs.lisp"), alphabet={"Verify": "Error"})
    assert renamed.counterexample is not None
    assert renamed.counterexample.path == ("Init", "Verify", "Verify", "Verify", "Verify")


def test_planted_bash_rerun_setup_breaks_setup_once() -> None:
    flow = build_bash_flow()
    planted = _planted(flow, Transition(flow.states["Error"], flow.states["Init"], last_contains("No such file")), 3)
    assert verify(flow, _spec(SPECS / "setup-once.lisp")).holds
    assert _cex(planted, "setup-once") == ("Init", "Error", "Init")


def test_planted_bash_check_before_acting_breaks_check_after_action() -> None:
    flow = build_bash_flow()
    planted = _planted(flow, Transition(flow.states["Init"], flow.states["Verify"], last_contains("$ ")), 3)
    assert verify(flow, _spec(SPECS / "check-after-action.lisp")).holds
    assert _cex(planted, "check-after-action") == ("Init", "Verify")


def test_planted_tutorial_shortcut_breaks_answer_before_submit(tutorial_flow: Flow) -> None:
    flow = tutorial_flow
    planted = _planted(flow, Transition(flow.states["Setup"], flow.states["Submit"], last_contains("no tables")), 1)
    verdict = verify(planted, _spec(ROOT / "examples/specs/answer-before-submit.lisp"))
    assert verdict.counterexample is not None and verdict.counterexample.path == ("Setup", "Submit")


def test_planted_approval_bypass_breaks_approve_before_publish() -> None:
    flow = load_flow(f"{APPROVAL}:FLOW")
    planted = _planted(flow, Transition(flow.states["Draft"], flow.states["Published"], last_contains("trivial")), 0)
    verdict = verify(planted, _spec(ROOT / "examples/specs/approve-before-publish.lisp"))
    assert verdict.counterexample is not None and verdict.counterexample.path == ("Draft", "Published")


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_each_spec_takes_under_a_second_on_the_papers_flow(name: str) -> None:
    import time

    spec, flow = _spec(SPECS / f"{name}.lisp"), sql_flow()
    started = time.perf_counter()
    verify(flow, spec, cut_off=CUT_OFF.get(name, "prefix"))  # type: ignore[arg-type]
    assert time.perf_counter() - started < 1.0


# -- replaying the counterexamples: which are real runs, which are false alarms -----------------

WITH_ERROR = tuple(f for f in FLOWS if f != "intercode-sql-no-error")

# spec -> flow -> "replays" or the step (1-based) where no InterCode outcome can take the path
REPLAYS: dict[str, dict[str, str]] = {
    "select-before-submit": dict.fromkeys(FLOWS, "unmet at step 1"),
    "schema-before-query": dict.fromkeys(FLOWS, "replays"),
    "three-repairs": {
        **dict.fromkeys(WITH_ERROR, "replays"),
        "intercode-sql-budget": "unmet at step 2",
        "intercode-bash": "unmet at step 1",
    },
    "repair-before-submit": {**dict.fromkeys(WITH_ERROR, "replays"), "intercode-bash": "unmet at step 1"},
    "check-after-action": {"intercode-sql-no-error": "replays"},
    "ends-within-bound": {
        **dict.fromkeys(FLOWS, "replays"),
        "intercode-sql-budget": "unmet at step 2",
        "intercode-bash": "unmet at step 1",
    },
}


def test_which_counterexamples_replay() -> None:
    from stateflow.tasks.kit.outcomes import intercode_outcomes

    from stateflow.spec.replay import replay

    flows = named_flows(load_plugins().plugins)
    found: dict[str, dict[str, str]] = {}
    for name in EXPECTED:
        spec = _spec(SPECS / f"{name}.lisp")
        for flow_name in FLOWS:
            flow = flows[flow_name]()
            verdict = verify(flow, spec, cut_off=CUT_OFF.get(name, "prefix"))  # type: ignore[arg-type]
            if verdict.counterexample is None:
                continue
            done = replay(flow, verdict.counterexample, intercode_outcomes(flow))
            shown = "replays" if done.unmet is None else f"unmet at step {done.unmet.index + 1}"
            found.setdefault(name, {})[flow_name] = shown
    assert found == REPLAYS
    rows = _page_rows()
    for name, by_flow in REPLAYS.items():
        for flow_name, shown in by_flow.items():
            assert rows.get((f"{name} (replay)", flow_name)) == shown, (name, flow_name)


def test_the_papers_flow_runs_down_the_three_repairs_counterexample() -> None:
    from stateflow.tasks.kit.outcomes import intercode_outcomes

    from stateflow.spec.replay import replay, scripted_run

    flow = sql_flow()
    cex = verify(flow, _spec(SPECS / "three-repairs.lisp")).counterexample
    assert cex is not None
    found = replay(flow, cex, intercode_outcomes(flow))
    assert [o.label for o in found.outcomes] == ["listing failed", "failed", "failed", "failed", "submit"]
    result = scripted_run(flow, found)
    assert result.path == ["Init", "Error", "Error", "Error", "Error"]
    assert result.stop_reason == "max_transitions"


# spec -> flow -> the shortest counterexample a run can take with the InterCode outcomes
REPLAYABLE: dict[str, dict[str, str]] = {
    "select-before-submit": {
        **dict.fromkeys(FLOWS, "Init → Observe → End"),
        **dict.fromkeys(("intercode-sql-no-observe", "intercode-sql-schema", "intercode-bash"), "Init → Solve → End"),
    },
    "schema-before-query": EXPECTED["schema-before-query"],
    "setup-once": dict.fromkeys(FLOWS, HOLDS),
    "three-repairs": {
        **EXPECTED["three-repairs"],
        "intercode-sql-budget": HOLDS,
        "intercode-bash": "Init → Solve → Error → Error → Error → Error",
    },
    "repair-before-submit": {**EXPECTED["repair-before-submit"], "intercode-bash": "Init → Solve → Error → End"},
    "check-after-action": EXPECTED["check-after-action"],
    "ends-within-bound": dict.fromkeys(FLOWS, "41 states"),
}


def test_shortest_replayable_counterexamples() -> None:
    from stateflow.tasks.kit.outcomes import intercode_key, intercode_outcomes

    from stateflow.spec.replay import shortest_replayable

    flows = named_flows(load_plugins().plugins)
    found: dict[str, dict[str, str]] = {}
    for name in EXPECTED:
        spec, cut_off = _spec(SPECS / f"{name}.lisp"), CUT_OFF.get(name, "prefix")
        for flow_name in FLOWS:
            flow = flows[flow_name]()
            done = shortest_replayable(
                flow,
                spec,
                intercode_outcomes(flow),
                cut_off=cut_off,
                merge_key=intercode_key,  # type: ignore[arg-type]
            )
            path = () if done is None else done.counterexample.path
            shown = HOLDS if done is None else " → ".join(path) if len(path) <= 8 else f"{len(path)} states"
            found.setdefault(name, {})[flow_name] = shown
    assert found == REPLAYABLE
    rows = _page_rows()
    for name, by_flow in REPLAYABLE.items():
        for flow_name, shown in by_flow.items():
            assert rows.get((f"{name} (run)", flow_name)) == shown, (name, flow_name)


def test_outcome_pool_examples() -> None:
    import doctest

    import stateflow.tasks.kit.outcomes as outcomes

    result = doctest.testmod(outcomes)
    assert result.attempted > 0 and result.failed == 0

"""`check_paths` and `stateflow verify --records`: a spec on archived runs (issue 60, part 3)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from stateflow.cli.main import main
from stateflow.errors import ConfigError
from stateflow.spec import AgentSpec
from stateflow.spec.records import PathRecord, check_paths, read_path_records, wilson_interval

ROOT = Path(__file__).resolve().parents[2]
ARCHIVE = ROOT / "docs" / "data" / "paper" / "intercode-sql" / "local.jsonl"
SPECS = ROOT / "tasks" / "kit" / "specs"

SPEC = AgentSpec.from_text("(define fixes (:states Go Fix End) (:behavior (until (or Go (next Fix Go)) End)))")


def test_violations_prefixes_and_not_applicable() -> None:
    runs = [
        PathRecord("a", ("Go", "Fix", "Go", "End"), True),
        PathRecord("a", ("Go", "Fix", "End"), True),  # End right after Fix
        PathRecord("a", ("Go", "Fix"), False),  # stopped by the bound: a valid prefix
        PathRecord("a", ("Go", "Fix"), True),  # ended there: not a complete trace
        PathRecord("b", ("Go", "Other", "End"), True),
    ]
    a, b = check_paths(runs, SPEC)
    assert (a.group, a.checked, a.violations, a.skipped, a.example) == ("a", 4, 2, 0, ("Go", "Fix"))
    assert a.rate == 0.5 and a.interval is not None
    assert (b.checked, b.skipped, b.rate, b.interval) == (0, 1, None, None)
    # an alphabet makes the other state readable (hidden here)
    (b_mapped,) = check_paths(runs[-1:], SPEC, alphabet={"Other": None})
    assert (b_mapped.checked, b_mapped.violations) == (1, 0)


def test_wilson_interval_edges() -> None:
    assert wilson_interval(0, 10)[0] == 0.0 and wilson_interval(10, 10)[1] == pytest.approx(1.0)
    with pytest.raises(ValueError, match="got 3/2"):
        wilson_interval(3, 2)


def test_reading_records_names_bad_lines(tmp_path: Path) -> None:
    good = tmp_path / "runs" / "results.jsonl"
    good.parent.mkdir()
    good.write_text(json.dumps({"method": "m", "path": ["Go", "End"], "stop_reason": "final"}) + "\n\n")
    assert read_path_records(good.parent) == [PathRecord("m", ("Go", "End"), True)]
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"method": "m", "path": ["Go"]}\n{"method": "m"}\n')
    with pytest.raises(ConfigError, match=r"bad.jsonl:2: a run record needs a \"path\" list"):
        read_path_records(bad)
    bad.write_text("not json\n")
    with pytest.raises(ConfigError, match=r"bad\.jsonl:1: not a JSON record"):
        read_path_records(bad)
    (tmp_path / "empty").mkdir()
    with pytest.raises(ConfigError, match=r"no \.jsonl results files in this directory"):
        read_path_records(tmp_path / "empty")
    with pytest.raises(ConfigError, match=r"nope\.jsonl: no such file or directory"):
        read_path_records(tmp_path / "nope.jsonl")


def test_archived_paper_runs(capsys: pytest.CaptureFixture[str]) -> None:
    spec = AgentSpec.from_file(SPECS / "three-repairs.lisp")
    rows = {r.group: r for r in check_paths(read_path_records(ARCHIVE), spec)}
    assert (rows["stateflow"].checked, rows["stateflow"].violations) == (100, 59)
    assert (rows["stateflow_no_error"].checked, rows["stateflow_no_error"].violations) == (100, 0)
    assert rows["react"].checked == 0 and rows["react"].skipped == 100
    capsys.readouterr()
    code = main(["verify", "--records", str(ARCHIVE), "--spec", str(SPECS / "three-repairs.lisp")])
    out = capsys.readouterr().out
    assert code == 0
    assert "stateflow                        100        59   59.0%  [49.2%, 68.1%]" in out
    code = main(["verify", "--records", str(ARCHIVE), "--spec", str(SPECS / "three-repairs.lisp"), "--json"])
    methods = {m["method"]: m for m in json.loads(capsys.readouterr().out)["methods"]}
    assert methods["stateflow"]["violations"] == 59
    assert methods["stateflow"]["example"] == ["Init", "Observe", "Solve", "Error", "Error", "Error", "Error"]


def test_flow_and_records_are_exclusive(capsys: pytest.CaptureFixture[str]) -> None:
    capsys.readouterr()
    assert main(["verify", "--spec", "chat-bot"]) == 1
    assert "give a FLOW to verify or --records RUN" in capsys.readouterr().err


def test_the_docs_table_of_archived_runs() -> None:
    page = (ROOT / "docs" / "verify.md").read_text(encoding="utf-8")
    start = page.index("| method | `select-before-submit`")
    lines = page[start:].split("\n\n")[0].splitlines()
    specs = [c.strip().strip("`") for c in lines[0].strip("|").split("|")][1:]
    records = read_path_records(ARCHIVE)
    found = {s: {r.group: r for r in check_paths(records, AgentSpec.from_file(SPECS / f"{s}.lisp"))} for s in specs}
    assert len(lines) > 2
    for line in lines[2:]:
        cells = [c.strip() for c in line.strip("|").split("|")]
        method = cells[0].strip("`")
        for spec, cell in zip(specs, cells[1:], strict=True):
            row = found[spec][method]
            assert row.interval is not None
            low, high = row.interval
            assert cell == f"{row.violations}/{row.checked} ({low:.0%}–{high:.0%})", (method, spec)

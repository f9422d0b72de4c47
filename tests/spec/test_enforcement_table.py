"""The enforcement table script: pooling of valid steps, one row per (benchmark, model, mode),
and the results document's section replaced in place."""

from __future__ import annotations

import pytest

from tests.scripts import load_script


@pytest.fixture(scope="module")
def table_mod():
    return load_script("enforcement_table")


def record(mode, success, valid, violations, p=100, c=10, wall=2.0, status="ok"):
    trace = {"valid_steps": valid, "violations": [{"kind": "transition"}] * violations}
    return {
        "benchmark": "intercode-sql",
        "models": "default=local-small",
        "method": f"spec_react_{mode}",
        "success": success,
        "prompt_tokens": p,
        "completion_tokens": c,
        "wall_s": wall,
        "status": status,
        "history": [{"meta": {}}, {"meta": {"spec": {"trace": trace}}}],
    }


def test_cells_pool_valid_steps_over_episodes(table_mod):
    rs = [
        record("none", True, 3, 1),
        record("none", False, 1, 3, p=300, wall=4.0, status="error"),
        record("grammar", True, 4, 0),
        record("monitor", False, 2, 2),
    ]
    cells = {c.mode: c for c in table_mod.cells(rs, "react")}
    none = cells["none"]
    assert none.n == 2 and none.valid_rate == pytest.approx(4 / 8)  # pooled, not a mean of rates
    assert none.success == 50.0 and none.p_tokens == 200 and none.wall_s == 3.0 and none.errored == 1
    assert cells["grammar"].valid_rate == 1.0 and cells["monitor"].valid_rate == 0.5
    assert table_mod.cells(rs, "pass") == []


def test_sample_is_fixed_and_within_the_dataset(table_mod):
    a = table_mod.sample("intercode-sql", 50)
    assert a == table_mod.sample("intercode-sql", 50) and len(set(a)) == 50
    assert all(0 <= i < 1034 for i in a)
    assert len(table_mod.sample("intercode-bash", 30)) == 30


def test_results_section_is_replaced_in_place(table_mod, tmp_path):
    doc = tmp_path / "results.md"
    doc.write_text("# Results\n\nkeep me\n")
    table_mod.write_results(table_mod.markdown([], "react", {"intercode-sql": 50, "intercode-bash": 30}, "cmd"), doc)
    table_mod.write_results(table_mod.markdown([], "react", {"intercode-sql": 5, "intercode-bash": 3}, "cmd"), doc)
    text = doc.read_text()
    assert text.count(table_mod.BEGIN) == 1 and "keep me" in text and "fixed sample of 5 Spider" in text


def test_an_unknown_model_is_refused_before_anything_runs(table_mod, tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_:
        table_mod.main(["--models", "local", "bogus", "--runs", str(tmp_path / "runs"), "--docs", str(tmp_path)])
    assert exit_.value.code == 2
    assert "unknown model 'bogus'" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []  # no records, no document

"""The paper comparison: its method table, crash isolation between pairs, and honest rendering.

The runs here use the real runner, flows and AutoGen with scripted models on the in-memory
environment (tests/tasks/fakes.py); the real MariaDB and sandbox run in
tests/cli/test_bench_paper_cli.py.
"""

from __future__ import annotations

import io
import json
from dataclasses import replace
from pathlib import Path

import pytest
from rich.console import Console
from stateflow.tasks.harness.paper import (
    PAPER_BENCHMARKS,
    PAPER_MODELS,
    PairOutcome,
    PaperModel,
    PaperRun,
    pair_dir,
    paper_benchmarks,
    run_paper,
)
from stateflow.tasks.harness.registry import default_registry
from stateflow.tasks.kit.episode_record import EpisodeRecord
from stateflow.tasks.reports.doc_sections import check_section
from stateflow.tasks.reports.paper_report import (
    HEADLINE_MARKERS,
    RESULTS_MARKERS,
    PaperDocs,
    headline_section,
    paired_tasks,
    remaining,
    results_section,
    write_paper_docs,
)

from stateflow import ModelAssignment, ModelProfile
from stateflow.backends.scripted import ScriptedLLM
from stateflow.errors import ConfigError
from tests.tasks.fakes import FakeEnv

SQL, BASH = PAPER_BENCHMARKS
BASELINES = ["react", "react_refined", "plan_solve", "try_again"]


def test_the_default_comparison_is_the_papers_and_every_method_exists_where_it_is_sent():
    assert [b.name for b in PAPER_BENCHMARKS] == ["intercode-sql", "intercode-bash"]
    assert PAPER_MODELS == ("local", "local-small")
    ablations = [f"{v}_no_{p}" for v in ("stateflow", "sf_agent") for p in ("observe", "verify", "error")]
    bars = ["oneshot", "oneshot_direct"]
    best = ["sf_agent_vote_question_last", "sf_agent_prompt_vote", "sf_agent_values", "sf_agent_hint"]
    assert list(SQL.all_methods) == ["stateflow", "sf_agent", *BASELINES, *bars, *ablations, *best]
    assert list(BASH.all_methods) == ["stateflow", "sf_agent", *BASELINES, "oneshot"]
    for b in PAPER_BENCHMARKS:
        assert set(b.all_methods) <= set(default_registry().get(b.name).methods), b.name
    assert (SQL.dataset, BASH.dataset) == ("spider", "nl2bash")


def test_a_best_flow_named_in_the_constant_is_run_and_headlined():
    best = replace(SQL, best_flows=(*SQL.best_flows, "stateflow_schema"))
    assert best.all_methods[-1] == "stateflow_schema" and len(best.all_methods) == len(SQL.all_methods) + 1
    assert best.headline_methods == (
        "react",
        "stateflow",
        "sf_agent",
        "sf_agent_vote_question_last",
        "sf_agent_prompt_vote",
        "sf_agent_values",
        "sf_agent_hint",
        "stateflow_schema",
    )


def test_methods_option_sends_each_method_only_where_it_exists():
    chosen, notes = paper_benchmarks(["intercode-sql", "intercode-bash"], ["react", "stateflow_no_verify"])
    assert [b.all_methods for b in chosen] == [("react", "stateflow_no_verify"), ("react",)]
    assert notes == ["intercode-bash: stateflow_no_verify not a method here, skipped"]
    chosen, notes = paper_benchmarks(["intercode-sql", "intercode-bash"], ["stateflow_no_error"])
    assert [b.name for b in chosen] == ["intercode-sql"] and "intercode-bash: none of --methods" in notes[-1]
    with pytest.raises(ConfigError, match=r"--methods: nosuch is a method of no selected benchmark; valid: .*react"):
        paper_benchmarks(["intercode-bash"], ["react", "nosuch"])
    with pytest.raises(ConfigError, match="--benchmarks: unknown pdoctr; the comparison has intercode-sql"):
        paper_benchmarks(["pdoctr"])
    with pytest.raises(ConfigError, match="--dataset names intercode-sql, which is not in --benchmarks"):
        paper_benchmarks(["intercode-bash"], None, {"intercode-sql": "demo"})
    chosen, _ = paper_benchmarks(["intercode-bash"], None, {"intercode-bash": "demo"})
    assert chosen[0].dataset == "demo" and chosen[0].all_methods == BASH.all_methods


def _model(name: str) -> PaperModel:
    prof = ModelProfile(name=name, model=name, provider="scripted", api_key_env=None)
    script = ScriptedLLM(["Thought: done.\nAction: submit"], cycle=True)
    return PaperModel(name, ModelAssignment.of(prof), f"default={name}", scripts={name: script})


def test_a_crashed_pair_is_reported_and_the_other_pairs_run_and_resume(tmp_path):
    benches, _ = paper_benchmarks(
        ["intercode-sql", "intercode-bash"], ["react"], dict.fromkeys(("intercode-sql", "intercode-bash"), "demo")
    )
    run = PaperRun(benches, (_model("m-a"), _model("m-b")), tmp_path / "runs", tasks="0:3")

    def envs(spec):
        if spec.bench.name == "intercode-sql":
            raise RuntimeError("MariaDB would not start")
        return FakeEnv(n=3)

    buf = io.StringIO()
    outcomes, interrupted = run_paper(run, console=Console(file=buf, width=300), progress=False, env_factory=envs)
    assert not interrupted
    assert [(o.benchmark.name, o.model.name, o.status) for o in outcomes] == [
        ("intercode-sql", "m-a", "crashed"),
        ("intercode-sql", "m-b", "crashed"),
        ("intercode-bash", "m-a", "complete"),
        ("intercode-bash", "m-b", "complete"),
    ]
    assert outcomes[0].error == "RuntimeError: MariaDB would not start" and outcomes[0].records == []
    bash = outcomes[2]
    assert (bash.tasks_total, bash.ran, bash.skipped, bash.done("react")) == (3, 3, 0, 3)
    assert bash.out == tmp_path / "runs" / "intercode-bash" / "m-a" and (bash.out / "results.jsonl").exists()
    log = buf.getvalue()
    assert "[1/4] intercode-sql x m-a: crashed after" in log and "MariaDB would not start" in log
    assert "[3/4] intercode-bash x m-a: complete, 3/3 episodes recorded (3 run now, 0 resumed)" in log

    again, _ = run_paper(run, console=Console(file=io.StringIO()), progress=False, env_factory=envs)
    assert [(o.ran, o.skipped) for o in again[2:]] == [(0, 3), (0, 3)]

    docs = PaperDocs(tmp_path / "docs" / "results.md", tmp_path / "docs" / "img" / "paper", tmp_path / "README.md")
    written = write_paper_docs(again, docs, command="stateflow bench paper", tasks="0:3", date="2026-11-24")
    assert {p.name for p in written} == {
        "success_vs_prompt_tokens.png",
        "tokens_by_state.png",
        "results.md",
        "README.md",
    }
    text = docs.results.read_text()
    assert "**not final**: 2 of 4 (benchmark, model) pair(s) are not complete" in text
    assert (
        "| `react` | crashed |" in text
        and "intercode-sql x m-a crashed: `RuntimeError: MariaDB would not start`" in text
    )
    assert "| `react` | 100.0 | 43.9-100.0 | 3 |" in text
    assert "| intercode-sql | `react` | crashed | crashed |" in docs.readme.read_text()


def _record(method: str, task: int, success: bool) -> EpisodeRecord:
    return EpisodeRecord(
        benchmark="intercode-sql",
        method=method,
        models="default=x",
        task=task,
        status="ok" if task != 1 else "timeout",
        success=success,
        reward_raw=1.0 if success else 0.0,
        turns=2,
        failed_actions=0,
        prompt_tokens=100 * (task + 1),
        cached_tokens=50 * task,  # the server's prompt cache: eval/sent = 1 - 50 t / 100 (t + 1)
        completion_tokens=10,
        wall_s=2.0 + task,
    )


def test_an_incomplete_pair_shows_done_over_total_never_a_final_number(tmp_path):
    bench = replace(SQL, only=("stateflow", "stateflow_no_verify", "sf_agent"))
    model = PaperModel("x", ModelAssignment.of("local"), "default=x")
    records = [_record("stateflow", 0, True), _record("stateflow", 1, False), _record("stateflow_no_verify", 0, False)]
    records += [_record("stateflow_no_verify", t, False) for t in (1, 2)]
    outcome = PairOutcome(bench, model, tmp_path, "incomplete", records, tasks_total=3)
    later = PairOutcome(bench, replace(model, name="y"), tmp_path, "not run")  # after a Ctrl-C
    section = results_section([outcome, later], command="c", tasks="dev", date="2026-11-24", images=[])
    assert (
        "**not final**: 2 of 2 (benchmark, model) pair(s) are not complete (intercode-sql x x: incomplete, "
        "4 episode(s) left, about 1 min at the s/task measured so far; intercode-sql x y: not run)" in section
    )
    # what is left: stateflow's 1 task at its own 2.5 s, sf_agent's 3 at the pair's mean (14 s / 5 records)
    assert remaining(outcome) == (4, pytest.approx(2.5 + 3 * 2.8))
    slow = replace(outcome, records=[r.model_copy(update={"wall_s": r.wall_s * 1000}) for r in records])
    assert remaining(slow)[1] == pytest.approx(1000 * (2.5 + 3 * 2.8))
    assert "4 episode(s) left, about 3.0 h at the s/task measured so far" in results_section(
        [slow], command="c", tasks="dev", date="2026-11-24", images=[]
    )
    assert remaining(replace(outcome, records=[])) == (9, None)
    # an ablation not started yet is charged its full flow's time, not the pair's mean
    ablating = replace(outcome, benchmark=replace(SQL, only=("stateflow", "stateflow_no_error")))
    assert remaining(ablating) == (4, pytest.approx(2.5 + 3 * 2.5))
    assert "the fixed `dev` sample of spider: 100 tasks stratified by hardness" in section
    # stateflow: 2 of 3 done, 1 of 2 solved, mean 150 prompt tokens (50 of 300 cached), 2.5 s/task, 1 timeout
    assert "| `stateflow` | 50.0 | 9.5-90.5 | 2/3 (incomplete) | 150 | 0.83 | 10 | 2.5 | 1 | not run |" in section
    assert "| `stateflow_no_verify` | 0.0 | 0.0-56.1 | 3 | 200 | 0.75 | 10 | 3.0 | 1 |" in section
    assert "| `sf_agent` |  |  | 0/3 (incomplete) |  |  |  |  |  |" in section
    assert (
        "| `stateflow` | x | 50.0 (9.5-90.5) [2/3, incomplete] | 0.0 (0.0-56.1) "
        "(-50.0 on the same 2 tasks; 0 won, 1 lost, Holm p = 1) |" in section
    )
    assert "| `stateflow` | y | not run |" in section
    assert "| `sf_agent` | x | not recorded | not recorded |" in section
    headline = headline_section([outcome], date="2026-11-24", results_link="docs/results.md")
    assert "| intercode-sql | `stateflow` | 50.0 [9.5-90.5] (150) [2/3, incomplete] |" in headline
    assert "| intercode-sql | `react` |" not in headline  # not run: not headlined
    assert headline.endswith(
        "| intercode-sql | best of 3 methods | `stateflow` 50.0 [9.5-90.5] (150) [2/3, incomplete] |"
    )


def test_the_best_method_of_a_tie_in_success_is_the_one_with_fewer_prompt_tokens(tmp_path):
    bench = replace(SQL, only=("stateflow", "sf_agent"))
    model = PaperModel("x", ModelAssignment.of("local"), "default=x")
    # both solve 1 of 2; sf_agent (listed second) reads fewer prompt tokens
    records = [_record("stateflow", 2, True), _record("stateflow", 3, False)]
    records += [_record("sf_agent", t, t == 2).model_copy(update={"prompt_tokens": 50}) for t in (2, 3)]
    outcome = PairOutcome(bench, model, tmp_path, "complete", records, tasks_total=2)
    headline = headline_section([outcome], date="2026-11-24", results_link="docs/results.md")
    assert headline.endswith("| intercode-sql | best of 2 methods | `sf_agent` 50.0 [9.5-90.5] (50) |")


def test_a_partial_run_compares_the_headline_methods_and_bars_on_their_common_tasks(tmp_path):
    bench = replace(SQL, only=("react", "stateflow", "oneshot", "stateflow_no_verify"))
    model = PaperModel("x", ModelAssignment.of("local"), "default=x")
    records = [_record("react", t, False) for t in (0, 2)]
    records += [_record("stateflow", t, t == 2) for t in (0, 2, 3)]  # task 3: not finished by react
    records += [_record("oneshot", t, True) for t in (0, 2, 3)]
    records += [_record("stateflow_no_verify", t, True) for t in (0,)]  # an ablation: not paired
    outcome = PairOutcome(bench, model, tmp_path, "incomplete", records, tasks_total=4)
    assert paired_tasks(outcome, bench.paired_methods) == (["react", "stateflow", "oneshot"], [0, 2])
    section = results_section([outcome], command="c", tasks="dev", date="2026-11-24", images=[])
    assert "Paired, x: the 2 tasks that `react`, `stateflow`, `oneshot` have all finished" in section
    # stateflow: 1 of tasks 0 and 2 solved, prompt tokens 100 and 300 (0 and 100 cached), 2 and 4 s
    assert "| `stateflow` | 50.0 | 9.5-90.5 | 200 | 0.75 | 10 | 3.0 |" in section
    assert "| `oneshot` | 100.0 | 34.2-100.0 | 200 | 0.75 | 10 | 3.0 |" in section
    assert "| `react` | 0.0 | 0.0-65.8 | 200 | 0.75 | 10 | 3.0 |" in section
    headline = headline_section([outcome], date="2026-11-24", results_link="docs/results.md")
    assert headline.endswith(
        "| intercode-sql | same tasks (while partial) | 2 tasks: `react` 0.0 [0.0-65.8], `stateflow` 50.0 [9.5-90.5], "
        "`oneshot` 100.0 [34.2-100.0] |"
    )
    complete = PairOutcome(bench, model, tmp_path, "complete", records, tasks_total=4)
    assert "Paired" not in results_section([complete], command="c", tasks="dev", date="2026-11-24", images=[])
    assert "same tasks" not in headline_section([complete], date="2026-11-24", results_link="r.md")


def test_no_paired_rows_once_the_paired_methods_have_finished_the_same_tasks(tmp_path):
    """An incomplete pair whose headline methods and bars are all done compares them in its main table."""
    bench = replace(SQL, only=("react", "stateflow", "stateflow_no_verify"))
    model = PaperModel("x", ModelAssignment.of("local"), "default=x")
    records = [_record(m, t, t == 2) for m in ("react", "stateflow") for t in (0, 2)]
    records += [_record("stateflow_no_verify", 0, True)]  # only the ablation is behind
    outcome = PairOutcome(bench, model, tmp_path, "incomplete", records, tasks_total=2)
    assert paired_tasks(outcome, bench.paired_methods) == (["react", "stateflow"], [0, 2])
    assert "Paired" not in results_section([outcome], command="c", tasks="dev", date="2026-11-24", images=[])
    assert "same tasks" not in headline_section([outcome], date="2026-11-24", results_link="r.md")
    behind = replace(outcome, records=records[1:])  # react has not finished task 0 yet
    assert "Paired, x: the 1 tasks" in results_section([behind], command="c", tasks="dev", date="d", images=[])
    assert "| same tasks (while partial) | 1 tasks:" in headline_section([behind], date="d", results_link="r.md")


def test_a_partial_baseline_is_paired_in_the_results_but_not_in_the_headline(tmp_path):
    bench = replace(SQL, only=("react", "stateflow", "plan_solve", "stateflow_no_verify"))
    model = PaperModel("x", ModelAssignment.of("local"), "default=x")
    records = [_record(m, t, t == 2) for m in ("react", "stateflow") for t in (0, 2, 3)]
    records += [_record("plan_solve", t, True) for t in (0, 3)]  # behind, and not a headline method
    records += [_record("stateflow_no_verify", 0, True)]  # an ablation: compared in its own table
    outcome = PairOutcome(bench, model, tmp_path, "incomplete", records, tasks_total=3)
    section = results_section([outcome], command="c", tasks="dev", date="d", images=[])
    assert "Paired, x: the 2 tasks that `react`, `stateflow`, `plan_solve` have all finished" in section
    assert "| `stateflow` | 0.0 | 0.0-65.8 | 250 | 0.70 | 10 | 3.5 |" in section  # tasks 0 and 3
    assert "same tasks" not in headline_section([outcome], date="d", results_link="r.md")


def test_a_partial_ablation_is_compared_with_its_flow_on_the_tasks_it_finished(tmp_path):
    bench = replace(SQL, only=("stateflow", "stateflow_no_verify"))
    model = PaperModel("x", ModelAssignment.of("local"), "default=x")
    records = [_record("stateflow", t, t in (0, 2)) for t in (0, 2, 3, 4)]  # 50 % on 4 tasks, 100 % on 0 and 2
    records += [_record("stateflow_no_verify", t, False) for t in (0, 2)]
    outcome = PairOutcome(bench, model, tmp_path, "incomplete", records, tasks_total=4)
    section = results_section([outcome], command="c", tasks="dev", date="d", images=[])
    # not 0 - 50: on tasks 0 and 2 the full flow solved both
    assert (
        "| `stateflow` | x | 50.0 (15.0-85.0) | 0.0 (0.0-65.8) [2/4, incomplete] "
        "(-100.0 on the same 2 tasks; 0 won, 2 lost, Holm p = 0.5) |" in section
    )
    done = records + [_record("stateflow_no_verify", t, t == 3) for t in (3, 4)]
    section = results_section([replace(outcome, records=done)], command="c", tasks="dev", date="d", images=[])
    assert "| `stateflow` | x | 50.0 (15.0-85.0) | 25.0 (4.6-69.9) (-25.0; 1 won, 2 lost, Holm p = 1) |" in section


def test_the_ablation_plot_draws_a_partial_group_on_the_tasks_all_its_bars_finished(tmp_path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from stateflow.tasks.reports.paper_report import _draw_ablations

    bench = replace(SQL, only=("stateflow", "stateflow_no_verify", "stateflow_no_error"))
    model = PaperModel("x", ModelAssignment.of("local"), "default=x")
    records = [_record("stateflow", t, t in (0, 2)) for t in (0, 2, 3, 4)]  # 50 % on 4 tasks, 100 % on 0 and 2
    records += [_record("stateflow_no_verify", t, t == 0) for t in (0, 2, 3)]
    records += [_record("stateflow_no_error", t, False) for t in (0, 2)]
    outcome = PairOutcome(bench, model, tmp_path, "incomplete", records, tasks_total=4)
    fig, ax = plt.subplots()
    _draw_ablations(ax, bench, [outcome])
    # tasks 0 and 2 are the ones all three finished: full flow 100 %, no verify 50 %, no error 0 %
    assert [round(b.get_height()) for b in ax.patches] == [100, 50, 0]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["stateflow\nx (2 of 4 tasks)"]
    ax.clear()
    done = [*records, _record("stateflow_no_verify", 4, False)]
    done += [_record("stateflow_no_error", t, True) for t in (3, 4)]
    _draw_ablations(ax, bench, [replace(outcome, status="complete", records=done)])
    assert [round(b.get_height()) for b in ax.patches] == [50, 25, 50]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["stateflow\nx"]
    plt.close(fig)


def test_pair_dirs_are_safe_for_any_model_name():
    assert pair_dir(Path("runs"), "intercode-sql", "openai:gpt-4o-mini") == Path(
        "runs/intercode-sql/openai_gpt-4o-mini"
    )
    assert pair_dir(Path("r"), "b", "../x") == Path("r/b/.._x")


def test_the_repositorys_readme_holds_the_headline_markers_once():
    """The real command writes the README's headline in place, never appended at its end."""
    root = Path(__file__).resolve().parent.parent.parent
    readme = (root / "README.md").read_text().splitlines()
    assert [x for x in readme if x.strip() in (HEADLINE_MARKERS.begin, HEADLINE_MARKERS.end)] == [
        HEADLINE_MARKERS.begin,
        HEADLINE_MARKERS.end,
    ]
    check_section(root / "README.md", HEADLINE_MARKERS)
    check_section(root / "docs" / "results.md", RESULTS_MARKERS)


def test_a_fixed_sample_of_a_dataset_without_one_is_refused_before_anything_runs(tmp_path):
    benches, _ = paper_benchmarks(["intercode-bash"], ["react"], {"intercode-bash": "demo"})
    run = PaperRun(benches, (_model("m-a"),), tmp_path / "runs", tasks="dev")
    with pytest.raises(ConfigError, match="--tasks dev: intercode-bash's dataset demo has no fixed samples"):
        run_paper(run, console=Console(file=io.StringIO()), progress=False, env_factory=lambda spec: FakeEnv(n=3))
    assert not (tmp_path / "runs").exists()


def test_no_run_reports_what_is_recorded_and_touches_nothing(tmp_path):
    benches, _ = paper_benchmarks(["intercode-bash"], ["react"], {"intercode-bash": "demo"})
    model = _model("m-a")
    ran, _ = run_paper(
        PaperRun(benches, (model,), tmp_path / "runs", tasks="0:2"),
        console=Console(file=io.StringIO()),
        progress=False,
        env_factory=lambda spec: FakeEnv(n=4),
    )
    results = ran[0].out / "results.jsonl"
    before = results.read_bytes(), (ran[0].out / "run.json").read_bytes()
    script = model.scripts["m-a"]
    calls = len(script.requests)
    report, _ = run_paper(
        PaperRun(benches, (model,), tmp_path / "runs", tasks="0:4", run_missing=False),
        console=Console(file=io.StringIO()),
        progress=False,
        env_factory=lambda spec: FakeEnv(n=4),
    )
    outcome = report[0]
    assert (outcome.status, outcome.tasks_total, outcome.ran, outcome.done("react")) == ("incomplete", 4, 0, 2)
    assert len(script.requests) == calls  # no model call
    assert (results.read_bytes(), (outcome.out / "run.json").read_bytes()) == before
    empty, _ = run_paper(
        PaperRun(benches, (model,), tmp_path / "elsewhere", tasks="0:4", run_missing=False),
        console=Console(file=io.StringIO()),
        progress=False,
        env_factory=lambda spec: FakeEnv(n=4),
    )
    assert empty[0].records == [] and not (tmp_path / "elsewhere").exists()


def test_the_comparison_runs_every_method_on_a_task_before_the_next_task(tmp_path):
    """A comparison stopped part-way must leave its methods on the same tasks (task order)."""
    benches, _ = paper_benchmarks(["intercode-bash"], ["react", "try_again"], {"intercode-bash": "demo"})
    run = PaperRun(benches, (_model("m-a"),), tmp_path / "runs", tasks="0:2")
    assert run.order == "task"
    (outcome,), _ = run_paper(
        run, console=Console(file=io.StringIO()), progress=False, env_factory=lambda s: FakeEnv(n=2)
    )
    lines = (outcome.out / "results.jsonl").read_text().splitlines()
    assert [(r["task"], r["method"]) for r in map(json.loads, lines)] == [
        (0, "react"),
        (0, "try_again"),
        (1, "react"),
        (1, "try_again"),
    ]


def test_a_method_has_one_style_in_every_panel_and_its_shape_says_its_kind(tmp_path, monkeypatch):
    from stateflow.tasks.reports import paper_report
    from stateflow.tasks.reports.paper_report import method_styles, write_paper_plots

    styles = method_styles(PAPER_BENCHMARKS)
    assert set(styles) == set(SQL.all_methods) | set(BASH.all_methods)
    assert len({s.color for s in styles.values()}) == len(styles)  # 17 methods, 20 colours: none shared
    assert {m: s.marker for m, s in styles.items() if s.marker != "o"} == {
        **{m: "s" for m in ("oneshot", "oneshot_direct")},
        **{m: "D" for m in SQL.best_flows},
        **{m: "^" for m in SQL.ablation_methods},
    }
    # the ablations take the colours left after every other method's
    order = list(styles)
    assert order[-len(SQL.ablation_methods) :] == list(SQL.ablation_methods)

    drawn: list[tuple[str, dict[str, object]]] = []
    real = paper_report.plot_success

    def spy(ax, rows, **kw):
        drawn.append((kw["title"], {r.group[0]: st for r, st in zip(rows, kw["styles"], strict=True)}))
        real(ax, rows, **kw)

    monkeypatch.setattr(paper_report, "plot_success", spy)
    stacked: list[tuple[dict[str, object], list[tuple[str, ...]]]] = []
    real_tokens = paper_report.plot_tokens_by_state

    def spy_tokens(ax, per_state, **kw):
        stacked.append((kw["state_colors"], kw["order"]))
        real_tokens(ax, per_state, **kw)

    monkeypatch.setattr(paper_report, "plot_tokens_by_state", spy_tokens)
    bench = replace(SQL, only=("stateflow", "oneshot", "stateflow_no_verify"))
    records = [_record(m, t, t == 0) for m in ("stateflow", "oneshot", "stateflow_no_verify") for t in (0, 2)]
    a = PairOutcome(bench, PaperModel("a", ModelAssignment.of("local"), "default=a"), tmp_path, "complete", records, 2)
    # the other panel lists its methods in another order, which used to give them other colours
    b = replace(a, model=replace(a.model, name="b"), records=records[::-1])
    write_paper_plots([a, b], tmp_path / "img")
    assert [t for t, _ in drawn] == ["intercode-sql x a", "intercode-sql x b"]
    assert drawn[0][1] == drawn[1][1] == {m: styles[m] for m in ("stateflow", "oneshot", "stateflow_no_verify")}
    # tokens by state: one colour map for both panels, bars in the method table's order
    assert len(stacked) == 2 and stacked[0][0] is stacked[1][0]
    assert stacked[0][1] == [("stateflow",), ("oneshot",), ("stateflow_no_verify",)]


def test_every_method_is_compared_with_react_and_the_p_values_are_holm_corrected_over_the_column(tmp_path):
    from statsmodels.stats.contingency_tables import mcnemar
    from statsmodels.stats.multitest import multipletests

    bench = replace(SQL, only=("react", "stateflow", "sf_agent"))
    model = PaperModel("x", ModelAssignment.of("local"), "default=x")
    tasks = range(20)
    records = [_record("react", t, t < 2) for t in tasks]  # 2 of 20
    records += [_record("stateflow", t, t < 12) for t in tasks]  # 12: won 10, lost 0
    records += [_record("sf_agent", t, 1 <= t < 5) for t in tasks]  # 4: won 3, lost 1
    outcome = PairOutcome(bench, model, tmp_path, "complete", records, tasks_total=20)
    section = results_section([outcome], command="c", tasks="0:20", date="d", images=[])
    raw = [mcnemar([[1, 0], [10, 9]], exact=True).pvalue, mcnemar([[1, 1], [3, 15]], exact=True).pvalue]
    holm_p = multipletests(raw, method="holm")[1]
    assert f"| 10 / 0, {holm_p[0]:.2g} |" in section and f"| 3 / 1, {holm_p[1]:.2g} |" in section
    assert holm_p[0] > raw[0]  # corrected, not the raw p
    assert "Holm-corrected over every method compared with `react`" in section

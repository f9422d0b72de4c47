"""`stateflow optimize` end to end: the real runner, flows, AutoGen and the SQL demo databases, with
models served over HTTP by the fake OpenAI server (``good`` answers each task's gold, ``bad`` a
wrong statement), plus the racing rule and the space checks on their own."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from stateflow.tasks.harness.identity import flow_fingerprint
from stateflow.tasks.harness.records import ResultsFile
from stateflow.tasks.kit.stats import holm, mcnemar_exact_p
from stateflow.tasks.optimize.front import mark_front
from stateflow.tasks.optimize.outcome import CandidateResult, OptimizeSummary
from stateflow.tasks.optimize.racing import Standing, next_rung, pareto_keys, trait_effects
from stateflow.tasks.optimize.rewrite import resolve_recorded
from stateflow.tasks.optimize.search import OptimizeRun, optimize, rung_sizes
from stateflow.tasks.optimize.space import Candidate, SearchSpace, SpaceError, expand, load_space
from stateflow.tasks.sql.benchmark import INTERCODE_SQL

from stateflow import ModelAssignment, ModelProfile
from stateflow.testing.fake_openai import FakeOpenAIServer

# -- the racing rule -------------------------------------------------------------------------


def _standing(key: str, solved: list[int], n: int, cost: float) -> Standing:
    return Standing(key, {t: t in solved for t in range(n)}, cost)


def test_racing_drops_a_candidate_significantly_beaten_by_a_cheaper_one():
    cheap_good = _standing("a", list(range(8)), 8, cost=1.0)
    dear_bad = _standing("b", [], 8, cost=3.0)
    middling = _standing("c", [0, 1, 2, 3], 8, cost=2.0)
    verdicts = {v.key: v for v in next_rung([cheap_good, dear_bad, middling], eta=3, alpha=0.05)}
    # b: 8 discordant tasks all won by a -> p = 2/256; c: 4 -> p = 0.125; Holm over the two
    expected_b = holm([mcnemar_exact_p(8, 0), mcnemar_exact_p(4, 0)])[0]
    assert not verdicts["b"].kept and f"p = {expected_b:.3g}" in verdicts["b"].reason
    assert "raced out" in verdicts["b"].reason and "won 8, lost 0" in verdicts["b"].reason
    assert not verdicts["c"].kept and "halved out" in verdicts["c"].reason  # not significant, but halved
    assert verdicts["a"].kept


def test_halving_keeps_the_best_share_and_every_front_candidate():
    # d solves least but costs least: on the front, so it goes on although halving would cut it
    s = [
        _standing("a", [0, 1, 2], 6, cost=5.0),
        _standing("b", [0, 1], 6, cost=6.0),
        _standing("c", [0], 6, cost=7.0),
        _standing("d", [3], 6, cost=0.5),
    ]
    kept = {v.key for v in next_rung(s, eta=2, alpha=0.05) if v.kept}
    assert kept == {"a", "b", "d"}
    assert pareto_keys(s) == {"a", "d"}


def test_a_cheap_candidate_that_solved_nothing_is_not_kept_for_the_front():
    s = [_standing("a", [0, 1], 4, cost=5.0), _standing("b", [0], 4, cost=6.0), _standing("idle", [], 4, cost=0.1)]
    verdicts = {v.key: v for v in next_rung(s, eta=3, alpha=0.05)}
    assert verdicts["a"].kept and not verdicts["idle"].kept and "halved out: 0 solved" in verdicts["idle"].reason


def test_a_tie_at_the_cut_goes_to_the_candidate_whose_traits_did_better_not_the_cheaper():
    # 4 tasks; the "vote=on" candidates solve 3 and 2, the "vote=off" ones 2 and 1: vote's pooled
    # effect is +0.25. Eta 2 gives two places, and on_b and off_a tie for the second
    on_a = Standing("on_a", {0: True, 1: True, 2: True, 3: False}, 9.0, frozenset({"vote=on"}))
    on_b = Standing("on_b", {0: True, 1: True, 2: False, 3: False}, 9.0, frozenset({"vote=on"}))
    off_a = Standing("off_a", {0: True, 1: True, 2: False, 3: False}, 1.0, frozenset({"vote=off"}))
    off_b = Standing("off_b", {0: True, 1: False, 2: False, 3: False}, 1.0, frozenset({"vote=off"}))
    standings = [on_a, on_b, off_a, off_b]
    assert trait_effects(standings) == {"vote=off": -0.25, "vote=on": 0.25}
    verdicts = {v.key: v for v in next_rung(standings, eta=2, alpha=0.05)}
    # on_b and off_a tie at 2 for the second place: on_b goes on although it costs 9 times more
    assert verdicts["on_b"].kept and "among the best 2" in verdicts["on_b"].reason
    # off_a still goes on, as the front's cheapest solver of 2, and says so
    assert verdicts["off_a"].kept and "on the front" in verdicts["off_a"].reason
    # without traits the old order (cheaper first) is what is left
    bare = [Standing(s.key, s.outcomes, s.cost) for s in standings]
    assert {v.key for v in next_rung(bare, eta=2, alpha=0.05) if v.reason.startswith("among the best")} == {
        "on_a",
        "off_a",
    }


def test_trait_effects_of_a_trait_all_share_are_zero():
    s = [_standing("a", [0], 2, 1.0), _standing("b", [], 2, 1.0)]
    s = [Standing(x.key, x.outcomes, x.cost, frozenset({"base=x", f"k={x.key}"})) for x in s]
    assert trait_effects(s) == {"base=x": 0.0, "k=a": 0.5, "k=b": -0.5}


def test_candidate_traits_name_every_lever_and_state_model():
    c = Candidate("sf_agent_hint+values+answer_vote", (("default", "local"),))
    traits = c.traits(["values", "question_last", "answer_vote"], ["Solve"])
    assert traits == frozenset(
        {"base=sf_agent_hint", "default=local", "Solve=local", "values=on", "question_last=off", "answer_vote=on"}
    )


def test_rung_sizes_grow_by_eta_up_to_the_pool():
    assert rung_sizes(10, 2, 100) == [10, 20, 40, 80, 100]
    assert rung_sizes(5, 3, 5) == [5]
    assert rung_sizes(10, 2, 4) == [4]


# -- the space ---------------------------------------------------------------------------------


def _profiles(url: str) -> list[ModelProfile]:
    return [
        ModelProfile(name=n, model=n, provider="openai", base_url=url, api_key_env=None, max_retries=0)
        for n in ("good", "bad")
    ]


def _space(**kw) -> SearchSpace:
    body = {
        "name": "t",
        "dataset": "demo",
        "tasks": "0:8",
        "heldout": "8:12",
        "bases": ["sf_agent"],
        "levers": ["schema"],
        "max_levers": 1,
        "profiles": ["good", "bad"],
        "states": ["Solve"],
        "search": {"first_rung": 2, "eta": 2},
        "budget": {"unit": "tokens", "limit": 1e6, "per_episode": 100},
    }
    return SearchSpace.model_validate(body | kw)


def test_expand_builds_recipes_times_assignments():
    models = ModelAssignment.of("good", profiles=_profiles("http://127.0.0.1:9/v1"))
    plan = expand(_space(), INTERCODE_SQL, models)
    labels = [c.label for c in plan.candidates]
    # 2 recipes x (default good|bad) x (Solve good|bad, dropped when equal to the default)
    assert len(labels) == 8 and len(set(c.key for c in plan.candidates)) == 8
    assert "sf_agent+schema | default=bad,Solve=good" in labels and "sf_agent | default=good" in labels


def test_bad_space_is_one_error_listing_every_problem():
    models = ModelAssignment.of("good", profiles=_profiles("http://127.0.0.1:9/v1"))
    space = _space(levers=["schema", "shema"], profiles=["good", "nosuch"], states=["Solv"], bases=["sf_agent", "x"])
    with pytest.raises(SpaceError) as err:
        expand(space, INTERCODE_SQL, models, where="space.toml")
    text = str(err.value)
    assert text.startswith("space.toml: ") and len(err.value.problems) == 4
    for part in ("unknown lever 'shema'", "unknown profile 'nosuch'", "unknown state 'Solv'", "unknown base 'x'"):
        assert part in text
    with pytest.raises(SpaceError, match="no candidate"):
        expand(_space(bases=[], levers=[]), INTERCODE_SQL, models)


def test_space_file_refuses_unknown_keys_and_bad_values(tmp_path):
    p = tmp_path / "s.toml"
    p.write_text('name = "x"\nlever = ["schema"]\n[search]\neta = 1\n[budget]\nlimit = 5\n')
    with pytest.raises(SpaceError) as err:
        load_space(p)
    assert str(p) in str(err.value) and "lever" in str(err.value) and "search.eta" in str(err.value)


# -- end to end on the fake model ----------------------------------------------------------


@pytest.fixture(scope="module")
def golds() -> dict[str, str]:
    from stateflow.envs.sql import open_sql_env

    env = open_sql_env("demo")
    try:
        return {env.task(i).query: env.task(i).gold for i in range(len(env))}
    finally:
        env.close()


_HELPS = "Check every column against the schema before you answer."


def _responder(golds: dict[str, str]):
    def reply(model: str, messages: list[dict], body: dict) -> str:
        text = "\n".join(str(m.get("content") or "") for m in messages)
        if "You improve the instruction" in text:  # the rewrite request: an instruction that helps, fenced
            return f"```\n{_HELPS}\nReply as Thought: ... then Action: execute[...] or Action: submit.\n```"
        question = next((q for q in golds if q in text), None)
        solves = model == "good" or _HELPS in text  # the bad model follows a rewritten instruction
        statement = golds[question] if solves and question else "SELECT 12345"
        # each statement runs once (in SF_Agent other states' replies come as user messages), then submit
        ran = f"execute[{statement}]" in text
        return "Thought: done\nAction: submit" if ran else f"Thought: t\nAction: execute[{statement}]"

    return reply


@pytest.fixture
def server(golds, sql_available) -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer(_responder(golds)) as srv:
        yield srv


def _run(srv: FakeOpenAIServer, out: Path, space: SearchSpace, archive: Path | None = None) -> OptimizeRun:
    models = ModelAssignment.of("good", profiles=_profiles(srv.url))
    return OptimizeRun(space, expand(space, INTERCODE_SQL, models), INTERCODE_SQL, models, out, archive=archive)


def test_search_finds_the_good_solver_resumes_for_free_and_archives(server, tmp_path):
    archive = tmp_path / "archive.jsonl"
    run = _run(server, tmp_path / "opt", _space(), archive)
    summary = optimize(run)
    pick = next(r for r in summary.candidates if r.key == summary.pick)
    assert "Solve=good" in pick.models or pick.models.startswith("default=good")
    assert pick.success == 100.0 and summary.heldout is not None and summary.heldout.n == 4
    assert summary.heldout.success == 100.0 and summary.heldout.method == pick.method
    # every all-bad candidate solves nothing and is gone after the first rung
    for r in summary.candidates:
        if "good" not in r.models:
            assert r.solved == 0 and r.dropped.startswith("rung 0 (2 tasks)")
    assert summary.spent > 0 and summary.spent < summary.exhaustive and 0 < summary.ratio < 1
    assert any(r.on_front for r in summary.candidates)
    # each candidate's records are the runner's, one per task it reached
    for r in summary.candidates:
        recorded = ResultsFile(tmp_path / "opt" / "candidates" / r.key / "results.jsonl").load().records
        assert sorted(x.task for x in recorded) == sorted(set(x.task for x in recorded)) and len(recorded) == r.n
    archived = ResultsFile(archive).load().records
    assert len(archived) == sum(r.n for r in summary.candidates) + 4 and not any(x.history for x in archived)
    assert json.loads((tmp_path / "opt" / "optimize.json").read_text())["pick"] == summary.pick
    calls = len(server.requests)
    again = optimize(run)
    assert len(server.requests) == calls  # everything recorded: not one model call
    assert again.pick == summary.pick and again.spent == summary.spent
    # the same cuts, each made on its rung's tasks although the directories now hold deeper ones
    assert again.rungs == summary.rungs and again.candidates == summary.candidates


def test_rewritten_instruction_is_saved_run_on_the_picks_tasks_and_adopted_when_it_solves_more(server, tmp_path):
    space = _space(levers=[], profiles=["bad"], states=[], rewrite={"state": "Solve", "profile": "good", "failures": 2})
    archive = tmp_path / "archive" / "t.jsonl"
    summary = optimize(_run(server, tmp_path / "opt", space, archive))
    w = summary.rewrite
    assert w is not None and w.adopted and w.text.startswith(_HELPS) and "```" not in w.text
    assert (w.won, w.lost) == (8, 0) and summary.pick == w.key
    rewritten = next(r for r in summary.candidates if r.key == w.key)
    assert rewritten.method == f"sf_agent@Solve-{w.sha256[:12]}" and rewritten.n == 8 and rewritten.success == 100.0
    assert summary.heldout is not None and summary.heldout.method == rewritten.method
    ledger = json.loads((tmp_path / "opt" / "rewrite.json").read_text())
    assert (tmp_path / "opt" / ledger["file"]).read_text() == w.text and len(ledger["failures"]) == 2
    assert "Submitted: SELECT 12345" in ledger["failures"][0] and "Expected (gold): " in ledger["failures"][0]
    # the rewrite request saw the current instruction and the failures
    request = next(r for r in server.requests if "You improve the instruction" in json.dumps(r))
    assert "SELECT 12345" in json.dumps(request)
    # the archive carries the prompt set, so its records' flows rebuild from their identities alone
    archived = ResultsFile(archive).load().records
    assert any(x.method == rewritten.method for x in archived)
    for x in archived:
        _, method = resolve_recorded(INTERCODE_SQL, x.method, [archive.parent])
        assert flow_fingerprint(method.build(x.identity["grammar"])) == x.identity["flow_sha256"]
    calls = len(server.requests)
    again = optimize(_run(server, tmp_path / "opt", space, archive))
    assert len(server.requests) == calls and again.rewrite.sha256 == w.sha256  # read back, never asked again


def test_rewrite_of_an_unknown_state_is_refused_with_the_space():
    models = ModelAssignment.of("good", profiles=_profiles("http://127.0.0.1:9/v1"))
    with pytest.raises(SpaceError, match=r"rewrite.state 'End' is no state with an instruction"):
        expand(_space(rewrite={"state": "End", "profile": "good"}), INTERCODE_SQL, models)


def test_budget_too_small_for_one_candidate_is_refused_before_any_model_call(server, tmp_path):
    space = _space(budget={"unit": "tokens", "limit": 150, "per_episode": 100})
    with pytest.raises(SpaceError, match=r"cannot pay for one candidate's first rung \(2 tasks x 100 tokens"):
        optimize(_run(server, tmp_path / "opt", space))
    assert server.requests == [] and not (tmp_path / "opt").exists()


def test_budget_stops_the_search_and_the_front_uses_what_ran(server, tmp_path):
    space = _space(budget={"unit": "tokens", "limit": 4000, "per_episode": 500})
    summary = optimize(_run(server, tmp_path / "opt", space))
    assert summary.stop == "budget" and summary.spent <= 4000
    assert 0 < sum(1 for r in summary.candidates if r.n) < len(summary.candidates)


def test_a_budget_share_caps_the_search_at_that_share_of_the_exhaustive_cost(server, tmp_path):
    # without a share this search runs to the end at more than 40 % of the exhaustive cost
    free = optimize(_run(server, tmp_path / "free", _space(heldout=None)))
    assert free.stop == "complete" and free.spent > 0.4 * free.exhaustive
    capped = _space(heldout=None, budget={"unit": "tokens", "limit": 1e9, "per_episode": 100, "share": 0.4})
    summary = optimize(_run(server, tmp_path / "capped", capped))
    assert summary.stop == "budget" and summary.spent <= 0.4 * summary.exhaustive
    assert 0 < sum(1 for r in summary.candidates if r.n) <= len(summary.candidates)


def test_another_space_in_the_same_directory_is_refused(server, tmp_path):
    optimize(_run(server, tmp_path / "opt", _space(levers=[], profiles=["good"], states=[])))
    with pytest.raises(SpaceError, match=r"another space .*levers"):
        optimize(_run(server, tmp_path / "opt", _space(profiles=["good"], states=[])))


def test_context_order_runs_each_rung_grouped_by_database(server, golds, tmp_path):
    from stateflow.envs.sql import open_sql_env

    env = open_sql_env("demo")
    try:
        db = {i: env.task(i).context for i in range(len(env))}
    finally:
        env.close()
    space = _space(
        levers=[], profiles=["good"], states=[], heldout=None, tasks="0:20", search={"first_rung": 6, "eta": 4}
    )
    space = space.model_copy(update={"search": space.search.model_copy(update={"order": "context"})})
    run = _run(server, tmp_path / "opt", space)
    summary = optimize(run)
    (only,) = summary.candidates
    recorded = ResultsFile(tmp_path / "opt" / "candidates" / only.key / "results.jsonl").load().records
    # the shuffled pool mixes databases; each rung's new tasks ran one database after another
    first = [db[x.task] for x in recorded[:6]]
    rest = [db[x.task] for x in recorded[6:]]
    assert len(set(first)) > 1 and len(recorded) == 20
    for seq in (first, rest):
        assert seq == sorted(seq, key=seq.index), f"databases interleaved: {seq}"
    plan = json.loads((tmp_path / "opt" / "plan.json").read_text())
    assert plan["search"]["order"] == "context"


# -- the command, killed and resumed -------------------------------------------------------


DATA = Path(__file__).parents[2] / "docs" / "data" / "optimize" / "intercode-sql"


def _cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "stateflow.cli.main", *args]


def _recorded(out: Path) -> int:
    return sum(p.read_bytes().count(b"\n") for p in out.glob("candidates/*/results.jsonl"))


def test_killed_optimize_resumes_without_rerunning_a_finished_evaluation(golds, sql_available, tmp_path):
    with FakeOpenAIServer(_responder(golds), latency_s=0.05) as srv:
        config = tmp_path / "models.toml"
        config.write_text(
            "".join(
                f'[profiles.{m}]\nmodel = "{m}"\nprovider = "openai"\nbase_url = "{srv.url}"\napi_key_env = ""\n'
                for m in ("good", "bad")
            )
        )
        space = tmp_path / "space.toml"
        space.write_text(
            'name = "kill"\ndataset = "demo"\ntasks = "0:8"\nheldout = "8:10"\nbases = ["sf_agent"]\n'
            'levers = ["schema"]\nmax_levers = 1\nprofiles = ["good", "bad"]\nstates = ["Solve"]\n'
            '[search]\nfirst_rung = 2\neta = 2\n[budget]\nunit = "tokens"\nlimit = 1000000\n'
        )
        out, archive = tmp_path / "opt", tmp_path / "archive.jsonl"
        cmd = _cli("optimize", str(space), "--config", str(config), "--out", str(out), "--archive", str(archive))
        proc = subprocess.Popen(
            [*cmd, "--no-progress"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True
        )
        end = time.monotonic() + 120
        while _recorded(out) < 6 and time.monotonic() < end and proc.poll() is None:
            time.sleep(0.05)
        assert proc.poll() is None, proc.communicate()[1].decode()[-800:]
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate(timeout=60)
        before = {p: p.read_text().splitlines() for p in out.glob("candidates/*/results.jsonl")}
        done = subprocess.run([*cmd, "--no-progress"], capture_output=True, timeout=600)
        assert done.returncode == 0, done.stderr.decode()[-1500:]
    for path, lines in before.items():
        after = path.read_text().splitlines()
        complete = [line for line in lines if line.endswith("}")]
        assert after[: len(complete)] == complete  # finished episodes kept as they were, not re-run
        tasks = [json.loads(line)["task"] for line in after]
        assert len(tasks) == len(set(tasks))
    summary = json.loads((out / "optimize.json").read_text())
    assert summary["heldout"]["n"] == 2 and (out / "front.png").stat().st_size > 0
    assert "| yes |" in (out / "front.md").read_text()


def test_command_refuses_a_bad_space_in_one_message_before_anything_is_written(tmp_path):
    space = tmp_path / "bad.toml"
    space.write_text(
        'name = "bad"\ndataset = "demo"\ntasks = "0:4"\nlevers = ["shema"]\nprofiles = ["local-small", "nosuch"]\n'
        'states = ["Solv"]\n[budget]\nlimit = 100\n'
    )
    out = tmp_path / "opt"
    done = subprocess.run(_cli("optimize", str(space), "--out", str(out)), capture_output=True, text=True, timeout=120)
    assert done.returncode == 1 and not out.exists()
    error = done.stderr.strip()
    assert error.startswith(f"error: {space}: ") and error.count("\n") == 0  # one line, naming the file
    for part in ("unknown lever 'shema'", "unknown profile 'nosuch'", "unknown state 'Solv'"):
        assert part in error


def test_the_front_is_drawn_among_the_candidates_run_on_the_most_tasks():
    def result(key: str, n: int, solved: int, tokens: float, seconds: float) -> CandidateResult:
        return CandidateResult(
            key, "m", "default=x", n=n, solved=solved, success=100 * solved / n, prompt_tokens=tokens, seconds=seconds
        )

    early = result("early", 10, 9, 100, 1.0)  # 90 % and cheapest, but on 10 tasks only
    best, cheap = result("best", 100, 63, 1000, 9.0), result("cheap", 100, 54, 400, 4.0)
    dominated, idle = result("dominated", 100, 50, 1200, 9.5), result("idle", 100, 0, 10, 0.1)
    results = [early, best, cheap, dominated, idle]
    mark_front(results)
    assert [r.key for r in results if r.on_front] == ["best", "cheap"]


def test_a_summary_reads_back_and_a_bad_one_is_named():
    summary = OptimizeSummary.from_json((DATA / "sql-part4-summary.json").read_text())
    assert OptimizeSummary.from_json(summary.to_json()) == summary
    assert summary.heldout is not None and summary.heldout.solved == 64 and len(summary.candidates) == 36
    with pytest.raises(ValueError, match=r"not an optimize summary: KeyError: 'candidates'"):
        OptimizeSummary.from_json('{"space": "x"}')


def test_report_redraws_the_archived_sql_front_with_the_mixed_assignments_on_it(tmp_path):
    """The SQL search of issue 46 part 4 (docs/results.md): its front, redrawn from the archived
    summary, is the four candidates that ran all 100 dev tasks, two of them mixed 0.5B / 1.5B."""
    (tmp_path / "optimize.json").write_text((DATA / "sql-part4-summary.json").read_text())
    space = Path(__file__).parents[2] / "examples" / "optimize" / "sql-part4.toml"
    done = subprocess.run(
        _cli("optimize", str(space), "--out", str(tmp_path), "--report"), capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-1500:]
    rows = [
        line for line in (tmp_path / "front.md").read_text().splitlines() if line.startswith("| ") and "| yes |" in line
    ]
    assert len(rows) == 4 and all("| 100 |" in row for row in rows)
    assert sum("default=local-small,Solve=local" in row for row in rows) == 2
    assert (tmp_path / "front.png").stat().st_size > 10_000
    missing = subprocess.run(
        _cli("optimize", str(space), "--out", str(tmp_path / "none"), "--report"),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert missing.returncode == 1 and "no search summary here" in missing.stderr


@pytest.mark.parametrize(
    ("space_name", "count", "mixed", "rungs"),
    [
        ("sql-part4", 36, 9, "10, 30, 90, 100"),
        ("bash-part4", 8, 0, "10, 30, 50"),
        ("bash-part4-listing", 8, 0, "10, 30, 50"),
    ],
)
def test_dry_run_of_the_part4_spaces_lists_their_candidates_and_rungs_and_writes_nothing(
    space_name, count, mixed, rungs, shared_data, tmp_path
):
    """The spaces of the long runs (examples/optimize/*-part4.toml) must stay valid as frozen: the
    SQL one has 36 candidates with mixed 0.5B/1.5B assignments and rungs 10/30/90/100 of the dev
    sample, the Bash ones 8 recipes each on the 1.5B model over the 50 dev tasks."""
    space = Path(__file__).parents[2] / "examples" / "optimize" / f"{space_name}.toml"
    out = tmp_path / "opt"
    done = subprocess.run(
        _cli("optimize", str(space), "--out", str(out), "--data", str(shared_data), "--dry-run"),
        capture_output=True,
        text=True,
        timeout=300,
        env=os.environ | {"COLUMNS": "300"},
    )
    assert done.returncode == 0, done.stderr[-1500:]
    listed = [line for line in done.stderr.splitlines() if " | default=" in line]
    assert len(listed) == count and f"{count} candidate(s)" in done.stderr
    assert sum("default=local-small,Solve=local" in line for line in listed) == mixed
    assert f"rungs of {rungs} tasks (eta 3, order context)" in done.stderr
    if space_name == "sql-part4":
        assert any(line.startswith("sf_agent_hint+values+question_last+prefix_first+answer_vote |") for line in listed)
    elif space_name == "bash-part4":
        assert "oneshot | default=local" in listed and "sf_agent+submit_first | default=local" in listed
    else:
        assert "sf_agent+listing+verify_budget+no_check | default=local" in listed
        assert "oneshot_prefix_first | default=local" in listed
    assert not out.exists()


def test_dev_search_on_spider_and_its_heldout_run_counted_by_the_heldout_ledger(server, shared_data, tmp_path):
    """The real pools: Spider's dev sample searched, the pick run on the held-out sample, and that run
    found by the held-out discipline (stateflow bench heldout) as one evaluation of its recipe."""
    from stateflow.tasks.reports.heldout import heldout_evaluations, heldout_tasks, load_unarchived
    from stateflow.tasks.reports.metrics import load_results

    space = SearchSpace.model_validate(
        {
            "name": "spider",
            "bases": [],
            "recipes": ["oneshot", "sf_agent_hint"],
            "profiles": ["bad"],
            "search": {"first_rung": 5},
            "budget": {"unit": "tokens", "limit": 1e8},
        }
    )
    archive = tmp_path / "archive.jsonl"
    summary = optimize(_run(server, tmp_path / "opt", space, archive))
    assert summary.pool == 100 and summary.heldout is not None and summary.heldout.n == 100
    assert sorted(r.n for r in summary.candidates) == [5, 100]  # one cut at the first rung, the other ran all
    records = load_results([str(archive)])
    (evaluation,) = heldout_evaluations(records, heldout_tasks(records, None), load_unarchived(tmp_path / "none.json"))
    assert (evaluation.method, evaluation.n, evaluation.before) == (summary.heldout.method, 100, 0)

"""pdoctor through the runner: flows with scripted agents, records, resume, report, CLI."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from stateflow.envs.pdoctor import PDoctorEnv, SynthesisConfig
from stateflow.tasks.agents.methods import build_method
from stateflow.tasks.harness.records import ResultsFile, latest_records
from stateflow.tasks.harness.runner import RunSpec, evaluate
from stateflow.tasks.kit.blackboard import episode_vars
from stateflow.tasks.pdoctor.benchmark import PDOCTOR
from stateflow.tasks.pdoctor.dissect import diagnose
from stateflow.tasks.pdoctor.flows import (
    PlanNotes,
    dataset_label,
    episode_error_class,
    order_from_requirements,
    parse_reply,
    parse_requirements,
)
from stateflow.tasks.pdoctor.report import markdown, summarize_pdoctor
from stateflow.tasks.ui.static_report import write_report

from stateflow import ModelAssignment, ModelProfile, run
from stateflow.backends.scripted import ScriptedLLM

ROOT = Path(__file__).resolve().parents[2]
CONFIG = SynthesisConfig(n=6, actions=(3, 5), sentences=(2, 3), seed=3)
PROFILE = ModelProfile(name="scripted", model="s", provider="scripted", api_key_env=None)


def _task_text(messages) -> str:
    return next(str(m["content"]) for m in messages if str(m.get("content", "")).startswith("Task: "))[6:]


def agent(env: PDoctorEnv, *, skip_last: bool = False, reverse: bool = False, wrong_name: bool = False):
    """A scripted agent that knows the answer (from the environment) and errs as told."""
    by_text = {env.task(i).query: i for i in range(len(env))}

    def reply(messages, params):
        r = env.request(by_text[_task_text(messages)])
        extracting = any("Before anything runs" in str(m.get("content")) for m in messages)
        if extracting:
            pairs = [(o.then, o.first) if reverse else (o.first, o.then) for o in r.orders]
            return "\n".join(f"{r.tools[a]} before {r.tools[b]}" for a, b in pairs) + "\ndone"
        plan = env.task(by_text[_task_text(messages)]).gold.split(" -> ")
        if reverse:
            plan = plan[::-1]
        if skip_last:
            plan = plan[:-1]
        done = sum(str(m.get("content", "")).startswith(("Done:", "Error:")) for m in messages)
        if wrong_name and done == 0:
            return "Thought: start\nAction: call[doing_everything]"
        if done < len(plan) + wrong_name:
            return f"Thought: next\nAction: call[{plan[done - wrong_name]}]"
        return "Thought: finished\nAction: submit"

    return ScriptedLLM(reply)


def _evaluate(tmp_path, methods, script, workers=2):
    spec = RunSpec(
        benchmark=PDOCTOR,
        methods=methods,
        models=ModelAssignment.of(PROFILE),
        models_label="scripted",
        out=tmp_path,
        dataset=CONFIG.label,
        workers=workers,
        scripts={"scripted": script},
    )
    return evaluate(spec, progress=False)


def test_a_perfect_agent_passes_every_request_with_every_method(tmp_path):
    s = _evaluate(tmp_path, ("react", "stateflow", "sf_agent"), agent(PDoctorEnv(CONFIG)))
    assert s.finished == 18
    assert [(r["method"], r["task"]) for r in s.records if not r["success"]] == []
    for r in s.records:
        assert r["verdict"]["success"] and r["dataset"] == CONFIG.label and r["hardness"].endswith("actions")
        assert episode_error_class(r) is None
    plan_paths = {tuple(r["path"]) for r in s.records if r["method"] != "react"}
    assert plan_paths == {("Init", "Extract", "Check", "Execute", "End")}


def test_error_classes_are_recorded_per_episode(tmp_path):
    env = PDoctorEnv(CONFIG)
    lost = _evaluate(tmp_path / "lost", ("react",), agent(env, skip_last=True)).records
    assert {episode_error_class(r) for r in lost} == {"Action Lost"}
    order = _evaluate(tmp_path / "order", ("react", "stateflow"), agent(env, reverse=True)).records
    assert {episode_error_class(r) for r in order} == {"Order Error"}
    assert all(r["verdict"]["violated"] for r in order)
    act = _evaluate(tmp_path / "act", ("react",), agent(env, wrong_name=True)).records
    assert all(r["success"] for r in act)  # a recovered bad call does not fail the episode
    assert all(r["verdict"]["act_errors"] == ["doing_everything"] for r in act)
    mute = _evaluate(tmp_path / "mute", ("react",), ScriptedLLM(["I am not sure."], cycle=True)).records
    assert {episode_error_class(r) for r in mute} == {"Timeout"}
    assert all(r["turns"] == max(10, 2 * r["verdict"]["n_actions"] + 2) for r in mute)  # the step budget
    assert all(r["verdict"]["act_errors"] for r in mute)  # malformed replies are logged calls


def test_resume_skips_recorded_requests(tmp_path):
    env = PDoctorEnv(CONFIG)
    first = _evaluate(tmp_path, ("stateflow",), agent(env))
    again = _evaluate(tmp_path, ("stateflow",), agent(env))
    assert (first.finished, again.skipped, again.finished) == (6, 6, 0)
    lines = (tmp_path / "results.jsonl").read_text().splitlines()
    assert sorted(json.loads(x)["task"] for x in lines) == list(range(6))


def test_report_shows_success_by_actions_and_error_classes(tmp_path):
    env = PDoctorEnv(CONFIG)
    _evaluate(tmp_path, ("stateflow",), agent(env))
    _evaluate(tmp_path, ("react",), agent(env, skip_last=True))
    records = latest_records(ResultsFile(tmp_path / "results.jsonl").load().records)  # both runs' records
    assert len(records) == 12
    rows = {r.method: r for r in summarize_pdoctor(records)}
    assert rows["stateflow"].by_actions == {3: (2, 2), 4: (2, 2), 5: (2, 2)}
    assert rows["react"].successes == 0 and rows["react"].classes == {"Action Lost": 6}
    paths = write_report(records, tmp_path)
    assert paths["planning_limit"].stat().st_size > 5000
    saved = json.loads((tmp_path / "pdoctor.json").read_text())
    assert {r["method"] for r in saved} == {"react", "stateflow"}
    md = markdown(records)
    assert "| stateflow / scripted | 6 | 100.0 |" in md and "6 (100%)" in md


def test_the_planning_flow_rejects_unknown_names_then_accepts_a_repair():
    env = PDoctorEnv(CONFIG)
    env.reset(0)
    r = env.current
    replies = iter(
        [
            "feed_everyone before " + r.tools[0] + "\ndone",
            "\n".join(f"{r.tools[o.first]} before {r.tools[o.then]}" for o in r.orders) + "\ndone",
        ]
    )
    flow, view = build_method("stateflow", PDOCTOR)
    result = run(
        flow,
        f"Task: {r.text}",
        models=PROFILE,
        view=view,
        env=env,
        scripts={"scripted": ScriptedLLM(lambda m, p: next(replies))},
    )
    assert result.path == ["Init", "Extract", "Check", "Extract", "Check", "Execute", "End"]
    assert "not tool names: feed_everyone" in result.history.to_list()[4]["content"]
    assert episode_vars(result).reward == 1.0 and result.vars == {}
    assert result.board.get(PlanNotes).repairs == 1


def test_parsers_and_the_topological_order():
    assert parse_reply("Thought: a\nAction: call[x_y]") == ("call", "x_y")
    assert parse_reply("Thought: a\nAction: submit") == ("submit", "")
    assert parse_reply("Thought: a\nAction: call the lions")[0] == "invalid"
    orders, starts, ends = parse_requirements("- a before b\n`b` before c\nc starts after 10:30\nnoise\ndone")
    assert (orders, starts, ends) == ([("a", "b"), ("b", "c")], {"c": 630}, {})
    order, dropped = order_from_requirements(["a", "b", "c"], [("b", "a"), ("a", "b"), ("c", "b")])
    assert dropped == [("a", "b")] and order.index("b") < order.index("a") and order.index("c") < order.index("b")
    assert order_from_requirements(["a", "b"], [], {"b": 600})[0] == ["b", "a"]  # earliest deadline first


def test_dissection_with_a_real_flow_names_the_sentence_the_agent_misreads():
    from stateflow.envs.pdoctor.dissection import mutations

    from tests.envs.pdoctor.helpers import before, hand_request, one

    request = hand_request(one(before(0, 1)), one(before(2, 3)))
    known = {m.request.text: m.request for m in mutations(request)}

    def reply(messages, params):  # reads every requirement, but always reverses "action 2 before 3"
        r = known[_task_text(messages)]
        pairs = [(o.then, o.first) if (o.first, o.then) == (2, 3) else (o.first, o.then) for o in r.orders]
        return "\n".join(f"{r.tools[a]} before {r.tools[b]}" for a, b in pairs) + "\ndone"

    d = diagnose(request, "stateflow", PROFILE, scripts={"scripted": ScriptedLLM(reply)})
    assert d.cause == "drop sentence" and "sentence 2 dropped" in d.mutation.description
    assert d.tried > 2  # the meaning-preserving edits were tried first and did not help


def test_cli_validates_pdoctor_options():
    def sf(*args):
        return subprocess.run(
            [sys.executable, "-m", "stateflow.cli.main", *args], capture_output=True, text=True, timeout=120, cwd=ROOT
        )

    p = sf("run", "pdoctor", "--actions", "8:3", "--model", "local-small")
    assert p.returncode == 1 and "--actions '8:3'" in p.stderr and "Traceback" not in p.stderr
    p = sf("run", "pdoctor", "--policy", "oracle")
    assert p.returncode == 1 and "does not apply to pdoctor" in p.stderr
    p = sf("run", "pdoctor", "--list-methods")
    lines = {line.split()[0]: line for line in p.stdout.splitlines()}
    assert all("pdoctor" in lines[m] for m in ("react", "stateflow", "sf_agent"))
    assert dataset_label("3:8", "2:6", 50, 1, 10, False) == "n=50;actions=3:8;sentences=2:6;tries=10;seed=1"


def test_the_planning_flow_schedules_extended_requests_from_correct_requirements():
    from stateflow.envs.pdoctor.grammar import clock

    env = PDoctorEnv(SynthesisConfig.from_label("n=3;actions=4:4;seed=2;extended"))
    flow, view = build_method("stateflow", PDOCTOR)
    for i in range(3):
        env.reset(i)
        r = env.current
        lines = [f"{r.tools[o.first]} before {r.tools[o.then]}" for o in r.orders]
        lines += [
            f"{r.tools[b.action]} {'starts after' if b.kind == 'start_after' else 'ends by'} {clock(b.minute)}"
            for b in r.bounds
        ]
        script = ScriptedLLM(["\n".join(lines) + "\ndone"], cycle=True)
        res = run(flow, f"Task: {r.text}", models=PROFILE, view=view, env=env, scripts={"scripted": script})
        verdict = episode_vars(res).submit_info["verdict"]
        assert episode_vars(res).reward == 1.0 and verdict["extended"], verdict
        assert all("(start=" in c.raw for c in env.toolkit.calls)

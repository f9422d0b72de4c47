"""`stateflow bench paper` as a user runs it: a 3-task smoke run of the real command.

A child process runs the real CLI with its default methods on both benchmarks (real MariaDB for
InterCode-SQL, the real bubblewrap sandbox for InterCode-Bash) on the first 3 demo tasks, with
two model columns served by a fake OpenAI-compatible server (real HTTP, real AutoGen), chosen
explicitly through a TOML config. The fake model runs the task's gold command once, then
submits, so episodes end quickly; the test never checks a score, only that the command ran
every episode without crashing, wrote the documents with every row and column, and resumes
without running any episode again.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from stateflow.envs.sql.tasks import load_task_file
from stateflow.tasks.harness.paper import PAPER_BENCHMARKS

from stateflow.paths import resource_path
from stateflow.testing.fake_openai import FakeOpenAIServer

ROOT = Path(__file__).resolve().parent.parent.parent
MODELS = ("fake-big", "fake-small")


def _golds() -> dict[str, str]:
    sql = load_task_file(resource_path("stateflow.envs.sql") / "demo" / "demo_tasks.json")[:3]
    bash = json.loads((resource_path("stateflow.envs.bash") / "demo" / "tasks.json").read_text())[:3]
    return {t.query: t.gold for t in sql} | {t["query"]: t["gold"] for t in bash}


def _responder(golds: dict[str, str]):
    """Runs the task's gold command once, then submits (any method, any state)."""

    def reply(model: str, messages: list[dict[str, Any]], body: dict[str, Any]) -> str:
        text = "\n".join(str(m.get("content") or "") for m in messages)
        mine = "\n".join(str(m.get("content") or "") for m in messages if m["role"] == "assistant")
        question = next((q for q in golds if q in text), None)
        if question is None or "Action: execute[" in mine:
            return "Thought: the result answers it.\nAction: submit"
        return f"Thought: run it.\nAction: execute[{golds[question]}]"

    return reply


def _run(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}  # the checkout under test
    return subprocess.run(
        [sys.executable, "-m", "stateflow.cli.main", *args],
        capture_output=True,
        text=True,
        timeout=1500,
        env=env,
        cwd=cwd,
    )


def _section(text: str, name: str) -> str:
    return text.split(f"<!-- {name}-begin -->", 1)[1].split(f"<!-- {name}-end -->", 1)[0]


def _table_rows(text: str, heading: str = "") -> list[list[str]]:
    """The rows (cells) of the first table after ``heading`` (header row first, rule row dropped)."""
    lines = text.split(heading, 1)[1].splitlines() if heading else text.splitlines()
    first = next(i for i, line in enumerate(lines) if line.startswith("|"))
    block = []
    for line in lines[first:]:
        if not line.startswith("|"):
            break
        block.append(line)
    return [[c.strip() for c in row.strip("|").split("|")] for row in block if not row.startswith("|---")]


def test_bench_paper_smoke_runs_writes_and_resumes(tmp_path, sql_available, bash_available):
    golds = _golds()
    out, results, readme = tmp_path / "runs", tmp_path / "docs" / "results.md", tmp_path / "README.md"
    images = tmp_path / "docs" / "img" / "paper"
    results.parent.mkdir()
    results.write_text("# Results\n\nhand-written text above\n")
    readme.write_text("# Project\n\n<!-- paper-headline-begin -->\nold\n<!-- paper-headline-end -->\n\nbelow\n")
    args = ["bench", "paper", "--models", ",".join(MODELS), "--dataset", "demo", "--tasks", "0:3"]
    args += ["--out", str(out), "--results", str(results), "--images", str(images), "--readme", str(readme)]
    args += ["--config", "models.toml", "--no-progress"]
    with FakeOpenAIServer(_responder(golds)) as srv:
        (tmp_path / "models.toml").write_text(
            "".join(
                f'[profiles.{m}]\nmodel = "{m}"\nprovider = "openai"\nbase_url = "{srv.url}"\napi_key_env = ""\n'
                for m in MODELS
            )
        )
        first = _run(tmp_path, *args)
        assert first.returncode == 0, first.stderr[-3000:]
        calls = len(srv.requests)
        assert calls > 0
        files = {p: p.read_bytes() for p in out.rglob("results.jsonl")}
        again = _run(tmp_path, *args)
        assert again.returncode == 0, again.stderr[-3000:]
        assert len(srv.requests) == calls, "the second invocation ran episodes again"
    assert {p: p.read_bytes() for p in out.rglob("results.jsonl")} == files

    # every (benchmark, model) pair has every method on every task, and no episode crashed
    for bench in PAPER_BENCHMARKS:
        for m in MODELS:
            records = [json.loads(x) for x in (out / bench.name / m / "results.jsonl").read_text().splitlines()]
            assert sorted((r["method"], r["task"]) for r in records) == sorted(
                (method, t) for method in bench.all_methods for t in range(3)
            )
            assert [r for r in records if r["status"] != "ok"] == [], f"{bench.name} x {m}: errored episodes"
    assert "resuming" in again.stderr and again.stderr.count("0 run now") == 4

    text = results.read_text()
    assert text.startswith("# Results\n\nhand-written text above\n\n<!-- paper-begin -->")
    section = _section(text, "paper")
    assert "every pair is complete" in section and "Command: `stateflow bench paper --models" in section
    assert "tasks `0:3` of demo (3 per method)" in section
    for bench in PAPER_BENCHMARKS:
        rows = _table_rows(section, f"### {bench.name}")
        head, body = rows[0], rows[1:]
        # per model: success %, its 95 % interval, n, tokens, eval/sent, seconds, errored (and "vs react" when it ran)
        per_model = (len(head) - 1) // len(MODELS)
        assert head[0] == "method" and len(head) == 1 + per_model * len(MODELS) and per_model in (8, 9)
        shares = [i for i, h in enumerate(head) if h.endswith(": eval/sent")]
        assert [head[i] for i in shares] == [f"{m}: eval/sent" for m in MODELS]
        assert all(0.0 <= float(r[i]) <= 1.0 for r in body for i in shares)
        assert [h for h in head if h.endswith(": 95 % CI")] == [f"{m}: 95 % CI" for m in MODELS]
        n_columns = [i for i, h in enumerate(head) if h.endswith(": n")]
        assert [head[i] for i in n_columns] == [f"{m}: n" for m in MODELS]
        assert [r[0] for r in body] == [f"`{m}`" for m in bench.all_methods]
        assert all(r[i] == "3" for r in body for i in n_columns)  # n per model column: 3 of 3, complete
    ablation = _table_rows(section, "Ablations")
    assert ablation[0] == ["view", "model", "full flow", "no observe", "no verify", "no error"]
    assert [(r[0], r[1]) for r in ablation[1:]] == [(f"`{b}`", m) for b in ("stateflow", "sf_agent") for m in MODELS]
    for name in ("success_vs_prompt_tokens.png", "tokens_by_state.png", "ablations.png"):
        assert (images / name).read_bytes().startswith(b"\x89PNG")
        assert f"](img/paper/{name})" in section

    # The records behind the section are archived (default --archive docs/data/paper, from the
    # working directory), and another clone rebuilds the same tables from the archive alone.
    archived = sorted(p.relative_to(tmp_path).as_posix() for p in (tmp_path / "docs" / "data").rglob("*.jsonl"))
    assert archived == sorted(f"docs/data/paper/{b.name}/{m}.jsonl" for b in PAPER_BENCHMARKS for m in MODELS)
    clone = tmp_path / "clone"
    (clone / "docs").mkdir(parents=True)
    (clone / "docs" / "results.md").write_text("<!-- paper-begin -->\n<!-- paper-end -->\n")
    (clone / "docs" / "data").symlink_to(tmp_path / "docs" / "data", target_is_directory=True)
    rebuild = [*args[: args.index("--out")], "--no-run", "--no-readme", "--config", str(tmp_path / "models.toml")]
    rebuilt = _run(clone, *rebuild, "--no-progress")
    assert rebuilt.returncode == 0, rebuilt.stderr[-3000:]
    clone_section = _section((clone / "docs" / "results.md").read_text(), "paper")
    strip = lambda text: [ln for ln in text.splitlines() if not ln.startswith(("Command:", "Per (benchmark"))]  # noqa: E731
    assert strip(clone_section) == strip(section) and not (clone / "runs").exists()

    readme_text = readme.read_text()
    assert readme_text.startswith("# Project\n\n<!-- paper-headline-begin -->\n") and readme_text.endswith("\nbelow\n")
    headline = _table_rows(_section(readme_text, "paper-headline"))
    assert headline[0] == ["benchmark", "method", *MODELS]
    assert [(r[0], r[1]) for r in headline[1:]] == [
        (b.name, m)
        for b in PAPER_BENCHMARKS
        for m in [*(f"`{x}`" for x in b.headline_methods), f"best of {len(b.all_methods)} methods"]
    ]


def test_when_every_pair_crashes_the_command_fails_and_leaves_the_documents_alone(tmp_path):
    results, readme = tmp_path / "results.md", tmp_path / "README.md"
    results.write_text("<!-- paper-begin -->\npublished numbers\n<!-- paper-end -->\n")
    readme.write_text("# Project\n")
    (tmp_path / "models.toml").write_text(
        '[profiles.never]\nmodel = "m"\nprovider = "openai"\nbase_url = "http://127.0.0.1:9/v1"\napi_key_env = ""\n'
    )
    proc = _run(
        tmp_path,
        *("bench", "paper", "--models", "never", "--benchmarks", "intercode-sql", "--methods", "react"),
        *("--dataset", "spider", "--data", str(tmp_path / "no-data"), "--tasks", "0:1", "--config", "models.toml"),
        *("--out", str(tmp_path / "runs"), "--results", str(results), "--readme", str(readme), "--no-progress"),
    )
    assert proc.returncode == 1, proc.stderr[-2000:]
    assert "[1/1] intercode-sql x never: crashed after" in proc.stderr and "DataNotFoundError" in proc.stderr
    assert "no episode recorded in any pair: the documents were left as they were" in proc.stderr
    assert results.read_text() == "<!-- paper-begin -->\npublished numbers\n<!-- paper-end -->\n"
    assert readme.read_text() == "# Project\n" and not (tmp_path / "docs").exists()

"""`stateflow spec show|graph|check|run` through the real CLI entry point."""

from __future__ import annotations

import json

from stateflow.cli.main import main

BAD_SPEC = "(define broken\n  (:states A B)\n  (:behavior (nxt A B)))\n"


def test_show_lists_states_automaton_and_warnings(capsys):
    assert main(["spec", "show", "react"]) == 0
    out = capsys.readouterr().out
    assert "Final Thought:" in out and "env-input" in out
    assert "automaton: 7 states, 7 edges" in out
    assert "share no common text prefix" in out


def test_graph_formats(capsys, tmp_path):
    assert main(["spec", "graph", "direct"]) == 0
    assert "q0 --> q1: Question [env]" in capsys.readouterr().out
    assert main(["spec", "graph", "direct", "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["transitions"]["0"] == {"Question": 1} and data["accepting"] == [2]
    target = tmp_path / "g.mmd"
    assert main(["spec", "graph", "pass", "-o", str(target)]) == 0
    assert target.read_text().startswith("stateDiagram-v2")


def test_check_reports_examples_and_traces_with_exit_code(capsys, tmp_path):
    ex = tmp_path / "ex.txt"
    ex.write_text("Question: q\nThought: t\nAnswer: a\n---\nQuestion: q\nAnswer: a\n")
    assert main(["spec", "check", "chain-of-thought", "--examples", str(ex)]) == 1
    out = capsys.readouterr().out
    assert "example 1 (line 1): valid (3 steps)" in out
    assert "example 2 (line 5): step 2 (line 6): Answer cannot come after Question; valid here: Thought" in out
    assert main(["spec", "check", "direct", "-t", "Question,Answer"]) == 0
    assert "accepted" in capsys.readouterr().out


def test_malformed_spec_file_is_one_located_error_line(capsys, tmp_path):
    bad = tmp_path / "bad.lisp"
    bad.write_text(BAD_SPEC)
    assert main(["spec", "check", str(bad)]) == 1
    err = capsys.readouterr().err
    assert f"{bad}:3:15: unknown operator 'nxt'; did you mean 'next'" in " ".join(err.split())


def test_unknown_spec_name_lists_the_library(capsys):
    assert main(["spec", "show", "no-such-spec"]) == 1
    assert "library: chain-of-thought, chat-bot" in " ".join(capsys.readouterr().err.split())


def test_run_with_a_scripted_profile_is_rejected_clearly(capsys, tmp_path):
    cfg = tmp_path / "m.toml"
    cfg.write_text(
        '[profiles.fake]\nmodel = "x"\nprovider = "scripted"\napi_key_env = ""\n[models]\ndefault = "fake"\n'
    )
    assert main(["spec", "run", "direct", "--task", "hi", "--config", str(cfg), "--engine", "monitor"]) == 1
    assert "test double" in capsys.readouterr().err

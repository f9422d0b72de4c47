"""`stateflow spec show|graph|check|run` through the real CLI entry point."""

from __future__ import annotations

import json

import pytest

from stateflow.cli.main import main
from stateflow.testing.fake_openai import FakeOpenAIServer

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
    assert main(["spec", "graph", "react", "--format", "flow"]) == 0
    assert '-->|"2. spec: next is Final-Thought"| s_Final_Thought' in capsys.readouterr().out
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


def _answer_server():
    def reply(model, messages, body):
        last = body["messages"][-1]
        if last["role"] == "assistant":  # the monitor's prefill: a chat model repeats the cue
            return "Answer: 42\nQuestion: another one?"
        return "42"

    return FakeOpenAIServer(reply).start()


@pytest.mark.filterwarnings("ignore:profile 'fake' .* cannot take a grammar")
def test_run_over_http_with_both_engines(capsys, tmp_path):
    server = _answer_server()
    try:
        cfg = tmp_path / "m.toml"
        cfg.write_text(
            f'[profiles.fake]\nmodel = "fake-model"\nbase_url = "{server.url}"\napi_key_env = "NO_SUCH_KEY"\n'
            '[models]\ndefault = "fake"\n'
        )
        args = ["spec", "run", "direct", "--task", "What is 6*7?", "--config", str(cfg)]
        assert main(args) == 0
        out = capsys.readouterr().out
        assert "Question: What is 6*7?" in out and "Answer: 42" in out and "trace valid: True" in out
        flow_request = server.requests[-1]
        assert flow_request["messages"][-1]["content"] == "Answer:"
        assert "\nQuestion:" in flow_request["stop"]

        assert main([*args, "--engine", "monitor"]) == 0
        out = capsys.readouterr().out
        assert "Answer: 42" in out and "violations 0" in out
        mon_request = server.requests[-1]
        assert mon_request["messages"][-1] == {"role": "assistant", "content": "Question: What is 6*7?\nAnswer:"}
        assert mon_request["stop"] == ["\nQuestion:"]
    finally:
        server.close()


@pytest.mark.filterwarnings("ignore:profile 'fake' .* cannot take a grammar")
def test_chat_bot_ended_by_the_user_with_both_engines(capsys, tmp_path):
    server = FakeOpenAIServer(lambda model, messages, body: "Bot: Hello, how can I help?").start()
    try:
        cfg = tmp_path / "m.toml"
        cfg.write_text(
            f'[profiles.fake]\nmodel = "m"\nbase_url = "{server.url}"\napi_key_env = "NO_SUCH_KEY"\n'
            '[models]\ndefault = "fake"\n'
        )
        args = ["spec", "run", "chat-bot", "--task", "hi", "--config", str(cfg), "-i", "User=/done"]
        assert main([*args, "--ending", "input"]) == 0
        out = capsys.readouterr().out
        assert out.count("Bot: Hello, how can I help?") == 2 and "User: hi" in out and "trace valid: True" in out
        assert main([*args, "--engine", "monitor"]) == 0
        out = capsys.readouterr().out
        assert "stop: env_ended" in out and out.count("Bot: Hello") == 2
    finally:
        server.close()

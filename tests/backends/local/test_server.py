"""The managed server with the REAL local-small model, driven from a child process.

Every scenario runs in ``real_model_driver.py`` (a subprocess), so a native crash cannot kill the
test run; these tests assert on the JSON it prints and check that no server outlives its parent.
They skip (naming scripts/setup_local_llm.sh) when the runtime or the model is absent.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from stateflow.backends.local import CATALOG, ModelStore, runtime_available

DRIVER = Path(__file__).with_name("real_model_driver.py")
THOUGHT_ACTION = r"Thought: [^\n]{1,200}\nAction: (execute\[[^\n]{1,200}\]|submit)"

pytestmark = pytest.mark.local_model


def _require_real_model() -> None:
    missing = runtime_available()
    if missing:
        pytest.skip(f"llama-cpp-python runtime absent ({missing}); run scripts/setup_local_llm.sh")
    if not ModelStore().status(CATALOG["local-small"]).present:
        pytest.skip("local-small model not in the cache; run scripts/setup_local_llm.sh")


def _running(pid: int) -> bool:
    """True while ``pid`` is a live (non-zombie) process."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False
    return state not in ("Z", "X")


def _wait_gone(pid: int, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not _running(pid):
            return True
        time.sleep(0.1)
    return not _running(pid)


@pytest.fixture(scope="module")
def run() -> dict:
    _require_real_model()
    proc = subprocess.run([sys.executable, str(DRIVER), "scenarios"], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, f"driver failed (exit {proc.returncode}):\n{proc.stderr[-4000:]}"
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_one_server_started_once_for_concurrent_callers(run):
    assert run["starts"] == 1
    assert len(run["urls"]) == 1
    assert re.fullmatch(r"http://127\.0\.0\.1:\d+/v1", run["urls"][0])
    assert run["health"]["status"] == "ok" and run["health"]["pid"] == run["pid1"]
    assert run["health"]["alias"] == "qwen2.5-coder-0.5b-instruct"


def test_openai_client_chat_answers_with_sql(run):
    t1 = run["turn1"]
    assert "select" in t1["content"].lower() and "singer" in t1["content"].lower()
    assert t1["prompt_tokens"] > 20 and t1["completion_tokens"] > 0


def test_cached_tokens_reported_and_prefix_reused(run):
    t1, t2, t3, other = run["turn1"], run["turn2"], run["turn3"], run["other"]
    assert t1["cached_tokens"] is not None
    # Turn 2 extends turn 1: at least turn 1's prompt is not evaluated again.
    assert t2["cached_tokens"] >= t1["prompt_tokens"] - 1
    assert t2["cached_tokens"] < t2["prompt_tokens"]
    # Another conversation came in between; turn 3 still reuses turn 2's state (prompt cache).
    assert other["cached_tokens"] < other["prompt_tokens"] // 2
    assert t3["cached_tokens"] >= t2["prompt_tokens"] - 1


def test_server_totals_and_pruned_prompt_cache(run):
    stats = run["stats_before_crash"]
    # every request the scenarios above made, the grammar ones included, less the one whose
    # malformed grammar was refused (a 400 is not an answered request)
    assert stats["requests"] == 10
    assert 0 < stats["evaluated_prompt_tokens"] < stats["prompt_tokens"]
    # Each turn of a conversation extends the previous one: older entries are pruned.
    assert 0 < stats["cache_entries"] < stats["requests"]


def test_completions_route_reports_cached_tokens(run):
    c1, c2 = run["completion1"], run["completion2"]
    assert c1["cached_tokens"] is not None
    assert c2["cached_tokens"] >= c1["prompt_tokens"] - 1 and c2["cached_tokens"] < c2["prompt_tokens"]


def test_grammar_makes_the_model_follow_thought_action(run):
    g = run["grammar"]
    assert re.fullmatch(THOUGHT_ACTION, g["content"]), g["content"]
    assert g["matches"]


def test_sql_answer_grammar_closes_the_action_at_its_first_bracket(run):
    # With the old `command ::= [^\n]{1,600}` the model copied the whole run-on line (checked).
    assert run["action_only"]["content"] == "Action: execute[SELECT name FROM singer]"


def test_a_malformed_grammar_is_a_clear_400_and_the_server_goes_on(run):
    bad = run["bad_grammar"]
    assert bad["status"] == 400, bad
    assert "invalid grammar" in bad["message"] and 'root ::= ("a"' in bad["message"]
    assert run["pid_after_bad_grammar"] == run["pid1"]  # no crash, no restart
    assert run["after_bad_grammar"]["content"] == run["action_only"]["content"]


def test_real_autogen_agent_talks_to_the_server(run):
    assert "select" in run["autogen_reply"].lower()
    usage = run["autogen_usage"]["qwen2.5-coder-0.5b-instruct"]
    assert usage["prompt_tokens"] > 0 and usage["cost"] == 0.0


def test_forked_child_leaves_the_parents_server_alone(run):
    assert run["alive_after_fork_close"] is True


def test_crash_gives_clear_error_and_restart_on_next_use(run):
    assert run["after_crash"] == "APIConnectionError"
    assert "SIGSEGV" in run["check"] and "restarted on next use" in run["check"]
    assert run["url_after_restart"] == run["urls"][0]  # same port: clients keep their URL
    assert run["pid2"] != run["pid1"] and run["starts_after_restart"] == 2
    assert "select" in run["after_restart"]["content"].lower()
    # Server-side totals count only requests since the restart.
    assert run["stats"]["requests"] == 1


def test_port_clash_is_a_clear_error(run):
    assert "already in use" in run["clash"]


def test_no_server_outlives_the_driver(run):
    for pid in run["server_pids"]:
        assert _wait_gone(pid, 10), f"server pid {pid} still running after its parent exited"


def test_server_dies_with_a_killed_parent():
    _require_real_model()
    proc = subprocess.run([sys.executable, str(DRIVER), "orphan"], capture_output=True, text=True, timeout=300)
    assert proc.returncode == -9, proc.stderr[-2000:]
    pid = json.loads(proc.stdout.strip().splitlines()[-1])["server_pid"]
    assert _wait_gone(pid, 10), f"server pid {pid} outlived its SIGKILLed parent"


def test_cli_chat_quick_check():
    _require_real_model()
    env = {**os.environ, "COLUMNS": "200"}
    proc = subprocess.run(
        [sys.executable, "-m", "stateflow.cli.main", "llm", "chat", "Reply with the word yes.", "--max-tokens", "8"],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "qwen2.5-coder-0.5b-instruct via http://127.0.0.1:" in proc.stdout
    assert "cached 0" in proc.stdout


@pytest.fixture(scope="module")
def sampled() -> dict:
    _require_real_model()
    proc = subprocess.run([sys.executable, str(DRIVER), "sampling"], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, f"driver failed (exit {proc.returncode}):\n{proc.stderr[-4000:]}"
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_grammar_checked_after_sampling_gives_the_stock_greedy_tokens(sampled):
    # Issue 15: the server samples first and applies the grammar only to a rejected token; at
    # temperature 0 that must be exactly what the grammar inside llama.cpp's chain produces.
    for case in ("thought_action", "forced"):
        replies = sampled[case]
        assert replies["ours"] == replies["stock"], case
    assert re.fullmatch(THOUGHT_ACTION, sampled["thought_action"]["ours"])


def test_rejected_tokens_are_resampled_under_the_grammar(sampled):
    forced = sampled["forced"]
    for reply in (forced["ours"], forced["ours_warm"]):
        assert re.fullmatch(r"Answer: [0-9]{2,4}\.", reply), reply
    assert re.fullmatch(THOUGHT_ACTION, sampled["thought_action"]["ours_warm"])
    # The model wanted SQL, not "Answer: 12.": its first choices were rejected and redrawn.
    assert sampled["forced_timings"]["grammar_resamples"] >= 1


def test_each_response_says_where_its_time_went(sampled):
    timings = sampled["thought_action_timings"]
    for key in ("total_s", "prompt_eval_s", "decode_eval_s", "sample_s"):
        assert timings[key] > 0, key
    assert timings["prompt_eval_s"] + timings["decode_eval_s"] + timings["sample_s"] <= timings["total_s"]


def test_a_reply_that_becomes_a_run_stops_there(run):
    """The server ends a periodic run at ~48 characters instead of decoding to max_tokens (300)."""
    got = run["run"]  # the prompt ends in "LIMIT 1000...0": the model goes on writing zeros
    assert set(got["content"]) == {"0"} and got["stopped_by"] == "run of '0'"
    assert got["completion_tokens"] < 60


def test_a_request_whose_client_gave_up_stops_at_the_next_token(run):
    """Counting to 1000 is ~4000 tokens (1500 allowed); the client leaves after 2 s."""
    assert run["abandoned"] == "APITimeoutError"
    # Counted: the model started on it (a request abandoned while waiting raises ClientGoneError
    # and is never counted), so the stop rule inside generation is what ended it ...
    assert run["abandoned_counted"] == 1
    # ... soon after the client left, not at 1500 tokens. 0 is possible: on a loaded machine the
    # prompt alone can outlast the client's 2 s, and the rule then stops at the first token.
    assert 0 <= run["abandoned_tokens"] < 300


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="one pinned replica per core needs 2 cores")
def test_two_pinned_replicas_route_by_context_and_survive_a_killed_one():
    _require_real_model()
    proc = subprocess.run([sys.executable, str(DRIVER), "replicas"], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, f"driver failed (exit {proc.returncode}):\n{proc.stderr[-4000:]}"
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert len(out["pids"]) == 2 and out["threads"] == [1, 1]
    assert len(set(out["cpus"])) == 2 and all("," not in c and "-" not in c for c in out["cpus"])
    assert out["urls"]["db1"] != out["urls"]["db2"]  # two databases in flight: two replicas
    assert all("select" in a.lower() for a in out["answers"].values())
    assert out["after_kill"] == "APIConnectionError"
    assert "replica" in out["check"] and "SIGKILL" in out["check"] and "restarted on next use" in out["check"]
    assert out["restarted_cpus"] == ",".join(map(str, out["victim_cpus"]))  # back on its own core
    assert "select" in out["after_restart"].lower()
    assert out["db1_still"] == out["urls"]["db1"]
    for pid in out["pids"]:
        assert _wait_gone(pid, 10)

"""Degenerate replies (digit runs, runaway lines) are cut and recorded as such."""

from __future__ import annotations

import pytest

from stateflow import LLM, Flow, Prompt, State, Tool, ToolResult, Transition, run
from stateflow.backends.scripted import ScriptedLLM
from stateflow.degenerate import DegenerateCut
from tests.core.helpers import scripted

RUNAWAY = "Thought: all rows\nAction: execute[SELECT name FROM singer LIMIT 1" + "0" * 400 + "]"


def test_a_digit_run_is_cut_at_its_start_and_a_normal_answer_is_left_whole():
    cut = DegenerateCut()
    text, found = cut.apply(RUNAWAY)
    assert found is not None and "'0'" in found.reason
    assert text.endswith("LIMIT 10") and found.original_chars == len(RUNAWAY)
    sane = "Thought: count\nAction: execute[SELECT count(*) FROM singer WHERE age > 100000]"
    assert cut.apply(sane) == (sane, None)


def test_short_periodic_runs_and_runaway_lines_are_found():
    cut = DegenerateCut(max_run=24, max_period=4, max_line_chars=100)
    assert cut.find("x = " + ", 1" * 20) is not None
    long_line = "SELECT " + ", ".join(f"col{i}" for i in range(40))
    found = cut.find(long_line)
    assert found is not None and found.at == 100 and "line" in found.reason
    assert cut.find("a" * 10 + "\n" + " " * 80) is None  # indentation is not a run


def test_bad_bounds_are_refused():
    with pytest.raises(ValueError, match="max_run"):
        DegenerateCut(max_run=4, max_period=4)


def test_the_runtime_cuts_the_reply_before_the_tool_reads_it_and_traces_the_cut():
    seen: list[str] = []

    def execute(ctx) -> ToolResult:
        seen.append(ctx.history.last("llm").content)
        return ToolResult("ok", {"ok": True})

    ask = State("Ask", Prompt("p"), LLM(cut=DegenerateCut()), Tool(execute, "execute"))
    flow = Flow("cut", initial=ask, transitions=[Transition(ask, State("End", final=True))])
    r = run(flow, "T", models=scripted(), scripts={"fake": ScriptedLLM([RUNAWAY])})
    assert seen == [RUNAWAY[: RUNAWAY.index("LIMIT 1") + len("LIMIT 10")]]
    step = next(s for s in r.steps if s.output == "llm")
    assert step.detail["degenerate"]["original_chars"] == len(RUNAWAY)
    assert "'0'" in step.detail["degenerate"]["reason"]

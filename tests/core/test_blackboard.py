"""The run's blackboard: typed records of the flow's own tools, kept apart from the user's vars."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from stateflow import ANY, Blackboard, Context, Flow, State, Tool, ToolResult, Transition, meta_is, run


@dataclass
class Counter:
    n: int = 0


def test_one_record_per_class_created_on_first_use():
    board = Blackboard()
    assert board.get(Counter) is None and Counter not in board
    first = board.setdefault(Counter)
    first.n += 2
    assert board.setdefault(Counter) is first and board.get(Counter) == Counter(2)
    board.put(Counter(7))
    assert board.get(Counter) == Counter(7) and len(board) == 1 and list(board) == [Counter(7)]
    with pytest.raises(TypeError, match="the factory for Counter made a int"):
        Blackboard().setdefault(Counter, lambda: 3)  # type: ignore[arg-type,return-value]


def test_tools_keep_their_records_on_the_board_and_the_user_vars_stay_the_users():
    def count(ctx: Context) -> ToolResult:
        c = ctx.board.setdefault(Counter)
        c.n += 1
        return ToolResult(f"n={c.n}", {"done": c.n >= ctx.vars["limit"]})

    tick = State("Tick", Tool(count, "count"))
    end = State("End", final=True)
    flow = Flow(
        "count", initial=tick, transitions=[Transition(ANY, end, when=meta_is("done", True)), Transition(tick, tick)]
    )
    first = run(flow, "go", vars={"limit": 3})
    second = run(flow, "go", vars={"limit": 2})
    assert first.board.get(Counter) == Counter(3) and first.vars == {"limit": 3}
    assert second.board.get(Counter) == Counter(2)  # a fresh board per run

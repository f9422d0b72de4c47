"""Small flows shared by the core tests."""

from __future__ import annotations

from stateflow import LLM, Flow, ModelProfile, Prompt, State, Tool, ToolResult, Transition, meta_is


def scripted(name: str = "fake", **kw) -> ModelProfile:
    return ModelProfile(name=name, model=f"{name}-model", provider="scripted", api_key_env=None, **kw)


def counter_tool(ctx) -> ToolResult:
    n = ctx.vars.get("n", 0) + 1
    ctx.vars["n"] = n
    return ToolResult(f"count={n}", {"ok": True, "done": n >= ctx.vars.get("limit", 3)})


def plan_act_flow(max_transitions: int = 30) -> Flow:
    plan = State("Plan", Prompt("PLAN-INSTRUCTION"), LLM())
    act = State("Act", Prompt("ACT-INSTRUCTION"), LLM(), Tool(counter_tool, "count"))
    end = State("End", final=True)
    return Flow(
        "plan-act",
        initial=plan,
        transitions=[Transition(plan, act), Transition(act, end, when=meta_is("done")), Transition(act, act)],
        max_transitions=max_transitions,
    )

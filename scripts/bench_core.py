#!/usr/bin/env python3
"""Framework overhead per transition, with a zero-latency scripted LLM.

A loop flow (Think -> Act -> Think ...) runs N transitions; each state has a prompt, an LLM call
and a tool. The baseline does the same work without StateFlow or AutoGen's group chat: it calls
the same scripted model through the same AutoGen client (``OpenAIWrapper.create``) and the same
tool in a plain Python loop. overhead/transition = (flow time - baseline time) / transitions.

Usage: .venv/bin/python scripts/bench_core.py [--transitions 200] [--repeats 5]
"""

from __future__ import annotations

import argparse
import statistics
import time

from autogen import OpenAIWrapper
from stateflow.sf_agent import SFAgentView

from stateflow import LLM, Flow, ModelProfile, Prompt, State, Tool, ToolResult, Transition, meta_is, run
from stateflow.backends.endpoint import open_endpoint
from stateflow.backends.scripted import ScriptedClient, ScriptedLLM


def tool(ctx) -> ToolResult:
    n = ctx.vars.get("n", 0) + 1
    ctx.vars["n"] = n
    return ToolResult(f"obs {n}", {"ok": True, "done": n >= ctx.vars["limit"]})


def make_flow(max_transitions: int) -> Flow:
    think = State("Think", Prompt("think"), LLM())
    act = State("Act", Prompt("act"), LLM(), Tool(tool, "step"))
    end = State("End", final=True)
    return Flow(
        "bench",
        initial=think,
        transitions=[Transition(act, end, when=meta_is("done")), Transition(think, act), Transition(act, think)],
        max_transitions=max_transitions + 5,
    )


PROFILE = ModelProfile(name="zero", model="zero", provider="scripted", api_key_env=None)


def flow_time(transitions: int, view) -> float:
    # Think->Act is one transition, Act->Think another: limit = transitions/2 tool calls.
    flow = make_flow(transitions)
    t = time.perf_counter()
    r = run(
        flow,
        "task",
        models=PROFILE,
        scripts={"zero": ScriptedLLM(["ok"], cycle=True)},
        view=view,
        vars={"limit": transitions // 2},
    )
    elapsed = time.perf_counter() - t
    assert r.stop_reason == "final", r.stop_reason
    return elapsed, len(r.transitions)


def baseline_time(transitions: int) -> float:
    wrapper = OpenAIWrapper(
        config_list=[{**open_endpoint(PROFILE).config_entry(), "model_client_cls": "ScriptedClient"}], cache_seed=None
    )
    wrapper.register_model_client(ScriptedClient, script=ScriptedLLM(["ok"], cycle=True))
    messages = [{"role": "user", "content": "task"}]
    vars_ = {"limit": transitions // 2}

    class Ctx:
        pass

    ctx = Ctx()
    ctx.vars = vars_
    t = time.perf_counter()
    steps = 0
    while True:
        for _ in range(2):  # Think and Act each: prompt + LLM
            messages.append({"role": "user", "content": "instruction"})
            resp = wrapper.create(messages=messages)
            messages.append({"role": "assistant", "content": wrapper.extract_text_or_completion_object(resp)[0]})
            steps += 1
        res = tool(ctx)
        messages.append({"role": "user", "content": res.content})
        if res.meta["done"]:
            break
    return time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--transitions", type=int, default=200)
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    flow_time(20, None)  # warm-up (imports, first client)
    base = statistics.median(baseline_time(args.transitions) for _ in range(args.repeats))
    print(f"baseline (same client + tool, plain loop): {base * 1000:.1f} ms for {args.transitions} transitions")
    for name, view in (("stateflow", None), ("sf_agent", SFAgentView())):
        samples = [flow_time(args.transitions, view) for _ in range(args.repeats)]
        t = statistics.median(s for s, _ in samples)
        n = samples[0][1]
        per = (t - base) / n * 1000
        print(
            f"{name:9}: {t * 1000:7.1f} ms for {n} transitions = {t / n * 1000:.3f} ms/transition; "
            f"framework overhead {per:.3f} ms/transition; ratio to baseline {t / base:.2f}x"
        )


if __name__ == "__main__":
    main()

"""The paper's baselines, defined as flows so they run on exactly the same harness.

* **ReAct**: one looping state; the system message holds few-shot Thought/Action/Observation
  trajectories.
* **ReAct_Refined**: the same, with examples that start by inspecting (SHOW TABLES/DESC, ls).
* **Plan & Solve**: a Plan state writes a plan (no action), then an Execute state loops.
All baselines resample once at a higher temperature when a reply repeats the previous command,
exactly like the StateFlow flows, so the comparison stays on equal terms.

* **One-shot**: no loop at all. An optional set-up tool (for SQL: every table with its columns)
  runs without an LLM call, the model writes one action, it is executed and submitted. It is the
  bar a flow must clear: on small local models a single prompt with the schema beats agents that
  wander.
* **Try Again** (InterCode's n-turn runner): after every action the last observation is scored;
  the agent sees the score and tries again until it reaches 1 or runs out of turns. The episode's
  reward is the best score seen.
"""

from __future__ import annotations

import re
from dataclasses import replace

from stateflow.tasks.kit.actions import parse_action
from stateflow.tasks.kit.blackboard import EpisodeVars, Observation
from stateflow.tasks.kit.grammar import ACTION_ONLY_GBNF, THOUGHT_ACTION_GBNF
from stateflow.tasks.kit.prompts import load_prompt
from stateflow.tasks.kit.tools import (
    REPEAT_NOTE,
    ObservationFormat,
    StatementRewrite,
    env_done,
    execute,
    repeats_last_action,
    submit,
    turns_exhausted,
)

from stateflow import ANY, LLM, Context, Flow, Kind, Prompt, State, Tool, ToolResult, Transition, meta_is
from stateflow.stable_id import stable_id
from stateflow.vote import Vote

__all__ = ["build_oneshot", "build_plan_solve", "build_react", "build_try_again"]


def _system(domain: str, key: str) -> str:
    return load_prompt(domain, "system") + "\n\n" + load_prompt(domain, key)


def build_react(domain: str, *, fmt: ObservationFormat, refined: bool = False, grammar: bool = False) -> Flow:
    """ReAct (or ReAct_Refined) reading ``prompts/<domain>/``, showing observations with ``fmt``."""
    act = State(
        "Act",
        LLM(grammar=THOUGHT_ACTION_GBNF if grammar else None, retry_when=repeats_last_action),
        execute(fmt=fmt),
        description="think, act, observe",
    )
    end = State("End", final=True)
    return Flow(
        f"{domain}-react{'-refined' if refined else ''}",
        initial=act,
        transitions=[
            Transition(ANY, end, when=env_done),
            Transition(ANY, end, when=turns_exhausted()),
            Transition(act, act),
        ],
        max_transitions=40,
        system_message=_system(domain, "react_refined" if refined else "react"),
        description="ReAct baseline (Yao et al. 2023)",
    )


def build_plan_solve(domain: str, *, fmt: ObservationFormat, grammar: bool = False) -> Flow:
    """Plan & Solve: plan once, then execute step by step."""
    plan = State("Plan", Prompt(load_prompt(domain, "plan")), LLM(), description="write a plan, no action")
    solve = State(
        "Execute",
        Prompt(load_prompt(domain, "plan_execute")),
        LLM(grammar=THOUGHT_ACTION_GBNF if grammar else None, retry_when=repeats_last_action),
        execute(fmt=fmt),
        description="carry out the plan",
    )
    end = State("End", final=True)
    return Flow(
        f"{domain}-plan-solve",
        initial=plan,
        states=[plan, solve, end],
        transitions=[
            Transition(ANY, end, when=env_done),
            Transition(ANY, end, when=turns_exhausted()),
            Transition(plan, solve),
            Transition(solve, solve),
        ],
        max_transitions=40,
        system_message=load_prompt(domain, "system"),
        description="Plan & Solve baseline (Wang et al. 2023)",
    )


def _execute_and_score(fmt: ObservationFormat) -> Tool:
    plain = execute(fmt=fmt).fn

    @stable_id("stateflow.tasks.baselines._execute_and_score.<locals>.run")
    def run(ctx: Context) -> ToolResult:
        last = ctx.history.last(Kind.LLM)
        if last is not None and parse_action(last.content).kind == "submit":
            return plain(ctx)  # the agent may still end the episode itself
        result = plain(ctx)
        seen = Observation.of(result.meta)
        if seen is None or seen.action is None:  # malformed response: nothing to score
            return result
        _, reward, _, info = ctx.env.step("submit")  # scores the last observation; env stays usable
        ep = EpisodeVars.of(ctx)
        if ep.best_reward is None or reward > ep.best_reward:
            ep.best_reward, ep.best_info = reward, dict(info)
        solved = reward == 1
        if solved:
            ep.done = True
            ep.reward = reward
        text = result.content.removesuffix(REPEAT_NOTE) + f"\nScore: {reward}" + ("" if solved else ". Try again.")
        return ToolResult(text, replace(seen, reward=reward, solved=solved).meta())

    return Tool(run, "execute_and_score")


def build_try_again(domain: str, *, fmt: ObservationFormat, grammar: bool = False) -> Flow:
    """InterCode's Try-Again loop: act, get scored, retry until solved or out of turns."""
    attempt = State(
        "Attempt",
        LLM(grammar=THOUGHT_ACTION_GBNF if grammar else None, retry_when=repeats_last_action),
        _execute_and_score(fmt),
        description="run a command and see its score",
    )
    end = State("End", final=True)
    return Flow(
        f"{domain}-try-again",
        initial=attempt,
        transitions=[
            Transition(ANY, end, when=env_done),
            Transition(ANY, end, when=meta_is("solved", True, name="scored 1")),
            Transition(ANY, end, when=turns_exhausted()),
            Transition(attempt, attempt),
        ],
        max_transitions=40,
        system_message=_system(domain, "try_again"),
        description="InterCode Try-Again baseline (Yang et al. 2023)",
    )


_REPLY_LINE = re.compile(r"^Reply with .*$", re.MULTILINE)
_NO_THOUGHT = "Reply with one line and nothing else: Action: execute[<the statement>]."


def build_oneshot(
    domain: str,
    *,
    fmt: ObservationFormat,
    setup: Tool | tuple[Tool, ...] | None = None,
    grammar: bool = False,
    rebind: StatementRewrite | None = None,
    thought: bool = True,
    vote: Vote | None = None,
) -> Flow:
    """One-shot: ``setup`` (if any) shows the context, the model writes one action, it is submitted.

    Args:
        domain: the prompts folder (``prompts/<domain>/oneshot.md`` is the instruction).
        fmt: how the action's observation is shown (it is recorded; the model never reads it).
        setup: a tool (or tools, in order) run first without an LLM call (for SQL,
            :func:`~stateflow.tasks.kit.tools.describe_schema`).
        grammar: constrain the reply with the Thought/Action grammar.
        rebind: rewrites the statement before it runs (SQL: columns read through the wrong alias
            are re-bound; see :func:`~stateflow.tasks.kit.tools.execute`); ``None``: runs as written.
        thought: the reply starts with a Thought line; off, it is only ``Action: execute[...]``
            (the instruction's last line says so, and the grammar, when on, allows nothing else).
        vote: the answer is chosen by execution-guided self-consistency (:class:`~stateflow.vote.Vote`).

    Raises:
        ValueError: ``thought`` is off and the instruction has no "Reply with ..." line to replace.
    """
    instruction = load_prompt(domain, "oneshot")
    if not thought:
        instruction, found = _REPLY_LINE.subn(_NO_THOUGHT, instruction)
        if not found:
            raise ValueError(f"prompts/{domain}/oneshot.md: no line starting 'Reply with' to replace (thought=False)")
    answer_grammar = THOUGHT_ACTION_GBNF if thought else ACTION_ONLY_GBNF
    answer = State(
        "Answer",
        Prompt(instruction),
        LLM(grammar=answer_grammar if grammar else None, vote=vote),
        execute(fmt=fmt, rebind=rebind),
        description="write one action",
    )
    done = State("Submit", submit(), description="submit the result (no LLM call)")
    end = State("End", final=True)
    setups = (setup,) if isinstance(setup, Tool) else setup or ()
    first = [State("Setup", *setups, description="show the context (no LLM call)")] if setups else []
    return Flow(
        f"{domain}-oneshot" + ("-rebind" if rebind is not None else ""),
        initial=first[0] if first else answer,
        states=[*first, answer, done, end],
        transitions=[
            Transition(ANY, end, when=env_done),  # the model wrote `submit` itself
            *[Transition(s, answer) for s in first],
            Transition(answer, done),
        ],
        max_transitions=5,
        system_message=load_prompt(domain, "system"),
        description="one-shot baseline: one action, submitted",
    )

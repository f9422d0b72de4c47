"""Prompt layout for reuse: what is the same across episodes before what belongs to one episode.

An episode's first message is normally its question (the benchmark's ``task_prompt``). Every
prompt the model then sees starts with the system message and that question, so two episodes on
the same database share only the system message: the schema listing that follows (identical for
every task on the database) is evaluated again each time, although the embedded server keeps a
prompt cache keyed by token prefixes.

A flow that states the question itself after its context (:func:`state_question` in its initial
state, after the schema listing) opens with :data:`CONTEXT_FIRST_OPENING` instead, the same
sentence for every task. Its prompts then read ``system, opening, schema, question, ...``: every
task on a database shares everything before the question, and the server evaluates only the
question and what follows. This changes what the model is told (the question is no longer the
first user message), so it is a lever (SQL: ``prefix_first``) measured against the flow it
changes, never a silent change of a recorded method.
"""

from __future__ import annotations

from collections.abc import Callable

from stateflow.envs.base import Task

from stateflow import Context, Flow, Tool, ToolResult
from stateflow.stable_id import stable_id

__all__ = [
    "CONTEXT_FIRST_OPENING",
    "opening_message",
    "state_question",
    "state_task",
    "states_question",
]

#: the first message of an episode whose flow states the question after its context; one
#: sentence for every task, so it belongs to the prefix that episodes share
CONTEXT_FIRST_OPENING = "Your question comes after the information below."

_STATE_QUESTION = "state_question"


@stable_id("stateflow.tasks.kit.layout.run_state_question")
def _run_state_question(ctx: Context) -> ToolResult:
    from stateflow.tasks.kit.blackboard import Observation

    task = getattr(ctx.env, "current_task", None)
    if task is None:
        raise RuntimeError("state_question needs an environment with a current task: run(..., env=ENV)")
    return ToolResult(f"Question: {task.query}", Observation(ok=True).meta())


@stable_id("stateflow.tasks.kit.layout.run_state_task")
def _run_state_task(ctx: Context) -> ToolResult:
    from stateflow.tasks.kit.blackboard import Observation

    task = getattr(ctx.env, "current_task", None)
    if task is None:
        raise RuntimeError("state_task needs an environment with a current task: run(..., env=ENV)")
    return ToolResult(f"Task: {task.query}", Observation(ok=True).meta())


def state_task() -> Tool:
    """:func:`state_question` for benchmarks whose prompt says ``Task: ...`` (Bash)."""
    return Tool(_run_state_task, "state_task")


_STATES_IT = (_run_state_question, _run_state_task)


def state_question() -> Tool:
    """A tool that states the episode's question (``Question: ...``) where the flow places it.

    No LLM call, no environment action and no turn (like ``restate_question``); its presence in
    a flow's initial state also makes the episode open with :data:`CONTEXT_FIRST_OPENING`
    instead of the question (:func:`opening_message`), so the question is said once, after the
    context.
    """
    return Tool(_run_state_question, _STATE_QUESTION)


def states_question(flow: Flow) -> bool:
    """Whether ``flow``'s initial state states the question itself (:func:`state_question`)."""
    return any(isinstance(o, Tool) and o.fn in _STATES_IT for o in flow.states[flow.initial].outputs)


def opening_message(flow: Flow, task: Task, task_prompt: Callable[[Task], str]) -> str:
    """The first message of an episode of ``flow`` on ``task``.

    ``task_prompt(task)`` (the benchmark's: the question) unless the flow states the question
    after its context, then :data:`CONTEXT_FIRST_OPENING`.
    """
    return CONTEXT_FIRST_OPENING if states_question(flow) else task_prompt(task)

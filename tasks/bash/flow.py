"""The paper's InterCode-Bash flow (Init, Solve, Verify, Error, End), defined once.

Grammar on/off and resampling are parameters of the one definition; the states are those the
rules name.

Transitions depend only on whether the last command succeeded, read from its output:

1. any state: the agent submitted → End
2. any state: the environment turn limit is used up → End
3. any state: the output shows an error (``command not found``, ``No such file or directory``,
   ``syntax error``...) or the response was malformed → Error
4. Init → Solve (Init adds nothing: the task is already the first message)
5. Solve / Error → Verify
6. Verify → Verify (check the effect, fix, or submit)
"""

from __future__ import annotations

from stateflow.tasks.kit.grammar import THOUGHT_ACTION_GBNF
from stateflow.tasks.kit.prompts import load_prompt
from stateflow.tasks.kit.tools import (
    ObservationFormat,
    env_done,
    execute,
    failure_text,
    repeats_last_action,
    turns_exhausted,
)

from stateflow import ANY, LLM, Flow, Prompt, State, Transition

__all__ = ["BASH_FAILURE_MARKERS", "BASH_FLOW", "build_bash_flow"]

BASH_FAILURE_MARKERS = (
    "command not found",
    "No such file or directory",
    "syntax error",
    "invalid option",
    "missing argument",
    "missing operand",
    "Command timed out",
    "exec failed",
    "Malformed command",
)


def build_bash_flow(
    *,
    grammar: bool = False,
    resample_repeats: bool = True,
    fmt: ObservationFormat | None = None,
    name: str = "intercode-bash",
    prefix_first: bool = False,
) -> Flow:
    """Build the Bash flow (see the module docstring for its rules; options as in the SQL flow).

    ``prefix_first``: Init lists the file system (:func:`~stateflow.tasks.bash.listing.describe_filesystem`)
    and then states the task, and the episode opens with a sentence shared by every task
    (:mod:`stateflow.tasks.kit.layout`): every prompt on one file system then starts with the same
    system message, opening and listing, which the embedded server's prompt cache reuses (issue 49).
    Not the paper's flow: the listing is information the paper's Init did not give.
    """
    retry = repeats_last_action if resample_repeats else None
    llm = LLM(grammar=THOUGHT_ACTION_GBNF if grammar else None, retry_when=retry)
    fmt = fmt or ObservationFormat(full_schema=False)
    act = execute(fmt=fmt)
    if prefix_first:
        from stateflow.tasks.bash.listing import describe_filesystem
        from stateflow.tasks.kit.layout import state_task

        init = State(
            "Init", describe_filesystem(), state_task(), description="list the file system, then state the task"
        )
    else:
        init = State("Init", description="the task is the first message; nothing to run")
    solve = State("Solve", Prompt(load_prompt("bash", "solve")), llm, act, description="run a command")
    verify = State("Verify", Prompt(load_prompt("bash", "verify")), llm, act, description="check the effect or submit")
    error = State("Error", Prompt(load_prompt("bash", "error")), llm, act, description="fix a failed command")
    end = State("End", final=True)
    return Flow(
        name,
        initial=init,
        transitions=[
            Transition(ANY, end, when=env_done),
            Transition(ANY, end, when=turns_exhausted()),
            Transition(ANY, error, when=failure_text(BASH_FAILURE_MARKERS)),
            Transition(init, solve),
            Transition([solve, error], verify),
            Transition(verify, verify),
        ],
        max_transitions=40,
        system_message=load_prompt("bash", "system"),
        description="StateFlow for InterCode-Bash (Wu et al. 2024)",
    )


BASH_FLOW = build_bash_flow()

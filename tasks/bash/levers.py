"""The Bash flow's levers, as data: what the recorded Bash episodes fail on, turned into switches.

:data:`BASH_LEVERS` lists the switches of the paper's Bash flow (:func:`~stateflow.tasks.bash.flow.build_bash_flow`)
in the order their transforms run. ``stateflow`` and ``sf_agent`` are recipes over this table
with no lever on (the same flows, and fingerprints, as before the table existed), so levers
compose on them on the command line and in ``stateflow optimize`` spaces:
``sf_agent+submit_first``, ``stateflow+no_check+verify_budget=2``.

Why these four (docs/results.md, "Why Bash episodes fail"): InterCode scores a Bash episode on
the output of the *last* command run before ``submit`` and on the file system. On the paper
archive with the 1.5B model, ``sf_agent`` (22 %) does no better than ``oneshot`` (24 %), and 12 of
its 39 failures are the flow's own: in 8 Verify kept answering until the 10-turn limit, and in
4 more Verify's check (``ls``, as its own instruction's example shows) replaced the answer's
output just before the submission; in 8 more the model guessed a file name or the scope of a
search without looking. The levers attack those causes, for any Bash task:

* ``listing``: Init lists the file system's task directories before the task (the same flow as
  ``sf_agent_prefix_first``; SQL's flows list the schema the same way);
* ``submit_first``: no Verify; the first command that runs without an error is submitted, and
  Error still repairs a failed one (a one-shot with repair: 9 of ``oneshot``'s 38 failures
  submitted a command that failed);
* ``verify_budget``: Verify replies at most N times (default 1), then the episode submits;
* ``no_check``: Verify is told that a check command would replace the graded output, and to
  submit or run one corrected command that does the whole task.

Example:
    >>> flow = bash_recipe_flow({"submit_first"})
    >>> sorted(flow.states)
    ['End', 'Error', 'Init', 'Solve', 'Submit']
"""

from __future__ import annotations

import warnings
from collections.abc import Collection, Mapping
from typing import Any

from stateflow.tasks.bash.flow import build_bash_flow
from stateflow.tasks.kit.levers import Lever, LeverContext, LeverTable
from stateflow.tasks.kit.prompts import load_prompt
from stateflow.tasks.kit.tools import submit

from stateflow import ANY, Flow, Prompt, State, Transition, replies_in
from stateflow.flow import FlowWarning

__all__ = ["BASH_LEVERS", "bash_recipe_flow", "submit_when_ran", "with_verify_budget", "without_checks"]

_BASH = ("intercode-bash",)
_WHY = 'docs/results.md, "Why Bash episodes fail"'


def _with_submit_state(flow: Flow) -> tuple[Flow, State]:
    """``flow`` with a ``Submit`` state (a submit tool, no LLM call) added, and that state."""
    give_up = flow.states.get("Submit") or State("Submit", submit(), description="submit the last output (no LLM call)")
    states = {**flow.states, give_up.name: give_up}
    with warnings.catch_warnings():
        # no rule leads to Submit yet (the caller's variant adds one): not worth a warning here
        warnings.simplefilter("ignore", FlowWarning)
        rebuilt = Flow(
            flow.name,
            initial=states[flow.initial],
            states=list(states.values()),
            transitions=flow.transitions,
            max_transitions=flow.max_transitions,
            system_message=flow.system_message,
            description=flow.description,
        )
    return rebuilt, give_up


def submit_when_ran(flow: Flow) -> Flow:
    """No Verify: every rule into Verify goes to a ``Submit`` state instead.

    A command that fails still goes to Error first (the failure rule comes earlier), which
    repairs it; the repair that runs is submitted.

    Raises:
        ValueError: the flow has no Verify state.
    """
    if "Verify" not in flow.states:
        raise ValueError(f"submit_when_ran: flow {flow.name!r} has no Verify state")
    with_submit, _ = _with_submit_state(flow)
    return with_submit.variant(flow.name, drop=["Verify"], reroute={"Verify": "Submit"})


def with_verify_budget(flow: Flow, *, replies: int = 1) -> Flow:
    """Verify replies at most ``replies`` times per episode; then the episode submits.

    A rule ``Verify -> Submit when replies_in("Verify", at_least=replies)`` goes in just ahead of
    every other rule out of Verify that is not about the episode ending or a failure, so the
    budget is one more row of the flow's table. A failed command still goes to Error first.

    Raises:
        ValueError: ``replies`` below 1, or no Verify state.
    """
    if replies < 1:
        raise ValueError(f"with_verify_budget: replies must be >= 1, got {replies}")
    if "Verify" not in flow.states:
        raise ValueError(f"with_verify_budget: flow {flow.name!r} has no Verify state")
    with_submit, give_up = _with_submit_state(flow)
    verify = with_submit.states["Verify"]
    budget = Transition(verify, give_up, when=replies_in("Verify", at_least=replies))
    rules: list[Transition] = []
    placed = False
    for rule in with_submit.transitions:
        # ahead of the first rule out of Verify that neither ends the episode nor handles a failure
        if not placed and rule.target not in ("Error", "End") and _from_verify(rule):
            rules.append(budget)
            placed = True
        rules.append(rule)
    if not placed:
        raise ValueError(f"with_verify_budget: flow {flow.name!r} has no rule out of Verify to budget")
    return with_submit.variant(flow.name, transitions=rules)


def _from_verify(rule: Transition) -> bool:
    """The rule names Verify among its sources (an ``ANY`` rule does not count)."""
    return rule.sources is not ANY and "Verify" in rule.sources  # type: ignore[operator]


def without_checks(flow: Flow) -> Flow:
    """Verify's instruction replaced by one saying that a check command replaces the graded output.

    Raises:
        ValueError: the flow has no Verify state or Verify has no instruction.
    """
    verify = flow.states.get("Verify")
    if verify is None or not any(isinstance(o, Prompt) for o in verify.outputs):
        raise ValueError(f"without_checks: flow {flow.name!r} has no Verify state with an instruction")
    text = load_prompt("bash-levers", "verify_no_check")
    outputs = [Prompt(text) if isinstance(o, Prompt) else o for o in verify.outputs]
    return flow.variant(flow.name, replace=[verify.with_outputs(*outputs)])


BASH_LEVERS_LIST: tuple[Lever, ...] = (
    Lever(
        "listing",
        "Init lists the file system's task directories (two levels deep), then states the task",
        applies_to=_BASH,
        effect=(
            f"{_WHY}: 8 of sf_agent's 39 failures on 1.5B were a wrong scope or a guessed file name; "
            "measured by the Bash search (examples/optimize/bash-part4-listing.toml)"
        ),
        # the same flow as the *_prefix_first methods (issue 49): the listing before the task is
        # also a prefix every task on one file system shares
        base={"prefix_first": True},
    ),
    Lever(
        "no_check",
        "Verify is told a check command (ls, cat) would replace the graded output: submit or redo the whole task",
        applies_to=_BASH,
        conflicts=("submit_first",),
        effect=f"{_WHY}: 4 of sf_agent's 39 failures on 1.5B; measured by the Bash search (examples/optimize)",
        apply=lambda flow, ctx: without_checks(flow),
    ),
    Lever(
        "verify_budget",
        "Verify replies at most N (default 1) times, then the episode submits",
        applies_to=_BASH,
        setting=1,
        conflicts=("submit_first",),
        effect=f"{_WHY}: 8 of sf_agent's 39 failures on 1.5B looped to the turn limit; measured by the Bash search",
        apply=lambda flow, ctx: with_verify_budget(flow, replies=ctx.setting("verify_budget")),
    ),
    Lever(
        "submit_first",
        "no Verify: the first command that runs is submitted; Error still repairs a failed one",
        applies_to=_BASH,
        effect=f"{_WHY}: 9 of oneshot's 38 failures submitted a failed command; measured by the Bash search",
        apply=lambda flow, ctx: submit_when_ran(flow),
    ),
)


def _base(args: Mapping[str, Any], ctx: LeverContext) -> Flow:
    return build_bash_flow(
        grammar=ctx.grammar,
        resample_repeats=ctx.options.get("resample_repeats", True),
        fmt=ctx.options.get("fmt"),
        prefix_first=bool(args.get("prefix_first", False)),
    )


#: the Bash flow's levers, in application order (see the module docstring)
BASH_LEVERS = LeverTable("intercode-bash", BASH_LEVERS_LIST, _base)


def bash_recipe_flow(
    levers: Collection[str], *, grammar: bool = False, settings: Mapping[str, int] | None = None
) -> Flow:
    """The Bash flow with ``levers`` on (``()``: the paper's flow, unchanged).

    Raises:
        LeverError: the levers do not fit together (unknown, conflicting), all in one error.
    """
    return BASH_LEVERS.build(levers, grammar=grammar, settings=settings)

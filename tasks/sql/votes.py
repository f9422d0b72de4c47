"""Votes on a state's answer: execution-guided self-consistency and the vote among prompts.

Not the paper's flow; levers ``vote``, ``answer_vote``, ``wide_vote`` and ``error_vote`` of
:mod:`stateflow.tasks.sql.levers`.
"""

from __future__ import annotations

from dataclasses import dataclass
from dataclasses import replace as dc_replace

from stateflow.tasks.kit.grammar import (
    THOUGHT_ACTION_GBNF,
)
from stateflow.tasks.kit.prompts import load_prompt
from stateflow.tasks.kit.tools import (
    strip_values,
)
from stateflow.tasks.sql.flow import executed_statement
from stateflow.tasks.sql.grammar import (
    schema_action_grammar,
    schema_action_only_grammar,
    schema_thought_action_grammar,
)
from stateflow.tasks.sql.rebind import RebindingExecutor
from stateflow.tasks.sql.transforms import _TWO_LINES

from stateflow import LLM, Flow, Prompt, Tool
from stateflow.stable_id import stable_id
from stateflow.vote import Variant, Vote

__all__ = ["with_answer_vote", "with_vote"]


def with_vote(flow: Flow, *, k: int = 5, state: str = "Solve", rebind: bool = False) -> Flow:
    """``state`` answers by execution-guided self-consistency: :class:`~stateflow.vote.Vote` samples
    ``k`` statements, runs each read-only on the task's database
    (:class:`~stateflow.envs.sql.readonly.EpisodeReader`) and keeps the one whose result most
    candidates share. Each candidate is traced with its usage. With ``rebind``, candidates are
    re-bound before they run (:class:`~stateflow.tasks.sql.rebind.RebindingExecutor`), as the
    flow's own ``execute(rebind=True)`` will run the winner.
    """
    from stateflow.envs.sql.readonly import EpisodeReader  # here: defining other flows needs no MySQL driver

    target = flow.states[state]
    reader = EpisodeReader()
    vote = Vote(parse=executed_statement, executor=RebindingExecutor(reader) if rebind else reader, k=k)
    outs = [dc_replace(o, vote=vote) if isinstance(o, LLM) else o for o in target.outputs]
    return flow.variant(flow.name, replace=[target.with_outputs(*outs)])


@dataclass(frozen=True)
@stable_id("stateflow.tasks.intercode_sql._WithThought")
class _WithThought:
    """A vote variant's rewrite: the one-line reply format back to Thought + Action, and the
    schema without its example values unless ``keep_values``."""

    one_line_system: str
    two_line_system: str
    keep_values: bool = False

    def __call__(self, text: str) -> str:
        text = text.replace(self.one_line_system, self.two_line_system)
        return text if self.keep_values else strip_values(text)


def with_answer_vote(flow: Flow, *, state: str = "Solve", rebind: bool = False, wide: bool = False) -> Flow:
    """``state`` answers by a vote among three differently prompted greedy answers (not the
    paper's flow): its own request; its own without the example values; and the same with a
    Thought line before the action (the system message's two-line format) and the schema
    without values. Each statement runs read-only (re-bound when the flow re-binds) and the
    result most of them share is the answer; a tie keeps the state's own. When the first two
    agree, the third is not asked (``Vote.stop_when_decided``): it is the costly one (another
    system message, so no cached prompt prefix, and a Thought to write) and could not change
    the answer.

    It needs a flow whose replies have no Thought line and whose schema shows values
    (``build_sql_flow(schema=True, thoughts=False, values=n)``): the variants switch those two
    levers back off (without values the third answer is the first one again). With ``rebind``,
    candidates are re-bound before they run, as the flow's own ``execute(rebind=True)`` will
    run the winner. Why: on the development sample, the methods with and without each lever
    solved different tasks (docs/results.md, issue 15), and a vote over differently prompted
    answers can keep what each gets right, which k samples of one prompt (``with_vote``) did not.

    With ``wide``, two more variants follow: the Thought format with the values kept, and the
    state's own request sampled (temperature 0.7); candidates are asked in order until two
    share a result (``Vote.quorum=2``), at most five. Why: on the development sample the
    three-way vote lost most tasks where its answers all differed or all failed, and the
    methods around it solved some of those (docs/results.md, issue 15); a quorum keeps the
    cost of the usual case (the first two agree) unchanged.

    Raises:
        ValueError: the flow has no such state, or it still asks for Thought lines.
    """
    if state not in flow.states:
        raise ValueError(f"with_answer_vote: flow {flow.name!r} has no state {state!r}")
    system = flow.system_message or ""
    if _TWO_LINES in system:
        raise ValueError("with_answer_vote: the flow's replies already have Thought lines (use thoughts=False)")
    from stateflow.envs.sql.readonly import EpisodeReader  # here: defining other flows needs no MySQL driver

    target = flow.states[state]
    two_lines = load_prompt("sql", "system")  # the system message before without_thoughts rewrote it
    reader = EpisodeReader()

    def voting(out: Prompt | LLM | Tool) -> Prompt | LLM | Tool:
        if not isinstance(out, LLM):
            return out
        thought_grammar = (
            None
            if out.grammar is None
            else schema_thought_action_grammar
            if out.grammar in (schema_action_grammar, schema_action_only_grammar)
            else THOUGHT_ACTION_GBNF
        )
        variants = (
            Variant("own"),
            Variant("no values", rewrite=strip_values),
            Variant("with thought, no values", rewrite=_WithThought(system, two_lines), grammar=thought_grammar),
        )
        if wide:
            variants += (
                Variant(
                    "with thought", rewrite=_WithThought(system, two_lines, keep_values=True), grammar=thought_grammar
                ),
                Variant("own, sampled", sampled=True),
            )
        executor = RebindingExecutor(reader) if rebind else reader
        vote = Vote(
            parse=executed_statement,
            executor=executor,
            variants=variants,
            stop_when_decided=not wide,
            quorum=2 if wide else None,
        )
        return dc_replace(out, vote=vote)

    return flow.variant(flow.name, replace=[target.with_outputs(*(voting(o) for o in target.outputs))])

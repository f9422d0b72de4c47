"""How a visit of an InterCode state may end, for replaying counterexamples (issue 60).

:func:`intercode_outcomes` lists, per state of an InterCode flow, the outcomes
:func:`~stateflow.spec.replay.replay` may choose from: a state that only lists the tables (SQL
Init) ends with the listing or with the listing failing; a state where the model acts ends with
a submit, a successful SELECT, a successful DESC, another successful command, or a failed one
(a database error, or the Bash flow's error text). States without outputs end with nothing.

Example:
    >>> from stateflow.tasks.sql.flow import sql_flow
    >>> pool = intercode_outcomes(sql_flow())
    >>> [o.label for o in pool["Init"]], [o.label for o in pool["Solve"]]
    (['tables listed', 'listing failed'], ['submit', 'SELECT ok', 'DESC ok', 'other ok', 'failed'])
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Hashable, Sequence

from stateflow.tasks.kit.blackboard import Observation

from stateflow.flow import Flow
from stateflow.messages import Kind, Message
from stateflow.outputs import LLM, Prompt, ToolResult
from stateflow.spec.replay import Outcome

__all__ = ["intercode_key", "intercode_outcomes"]


def _result(content: str, **observed: object) -> ToolResult:
    return ToolResult(content, Observation(**observed).meta())  # type: ignore[arg-type]


_LISTING = [
    Outcome("tables listed", tool=_result("[('book',), ('member',)]", ok=True, action="SHOW TABLES", statement="SHOW")),
    Outcome("listing failed", tool=_result("Error: no database selected", ok=False, action="SHOW TABLES")),
]


def _acting(failure: str) -> list[Outcome]:
    def act(label: str, command: str, content: str, **observed: object) -> Outcome:
        reply = f"Thought: {label}.\nAction: {command}"
        return Outcome(label, reply, _result(content, **observed))

    return [
        act("submit", "submit", "Submitted. Reward: 0.0", ok=True, done=True, action="submit", reward=0.0),
        act("SELECT ok", "execute[SELECT 1]", "[(1,)]", ok=True, action="SELECT 1", statement="SELECT"),
        act("DESC ok", "execute[DESC book]", "[('id', 'int')]", ok=True, action="DESC book", statement="DESC"),
        act("other ok", "execute[ls]", "book.txt", ok=True, action="ls", statement="LS"),
        act(
            "failed", "execute[SELECT x FROM nope]", failure, ok=False, action="SELECT x FROM nope", statement="SELECT"
        ),
    ]


def intercode_outcomes(flow: Flow, *, failure: str = "Error: No such file or directory") -> dict[str, list[Outcome]]:
    """``state -> outcomes`` for the states of an InterCode (SQL or Bash) flow.

    Args:
        flow: the flow (its states' outputs decide which pool each gets).
        failure: the text of a failed command (it contains one of the Bash flow's error markers
            and reads as a database error too).
    """
    pools: dict[str, list[Outcome]] = {}
    for name, st in flow.states.items():
        acts = any(isinstance(o, LLM) for o in st.outputs)
        tools = any(not isinstance(o, (LLM, Prompt)) for o in st.outputs)
        if acts:
            pools[name] = _acting(failure)
        elif tools:
            pools[name] = list(_LISTING)
    return pools


def intercode_key(state: str, history: Sequence[Message]) -> Hashable:
    """A ``merge_key`` for :func:`~stateflow.spec.replay.shortest_replayable` on InterCode flows.

    Two run prefixes are merged when their last tool result (text and ``meta``) and their
    reply counts per state, counted up to 3, are equal. Sound for the InterCode conditions: they
    read the last tool result (submitted, failed, ran SELECT/DESC, error text) and reply counts
    (``replies_in`` budgets of at most 3); the turn limit reads a counter the outcomes do not keep.

    >>> from stateflow.messages import Kind, Message
    >>> a = [Message("assistant", "llm", "Solve", Kind.LLM, "x")]
    >>> intercode_key("Solve", a) == intercode_key("Solve", a + a[:0])
    True
    """
    last = next((m for m in reversed(history) if m.kind is Kind.TOOL), None)
    seen = (last.content, tuple(sorted(last.meta.items()))) if last is not None else None
    counts = Counter(m.state for m in history if m.kind is Kind.LLM)
    return seen, tuple(sorted((s, min(n, 3)) for s, n in counts.items()))

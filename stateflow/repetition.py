"""Repetition guard: the same action after the same observation never burns the turn budget.

Small models at temperature 0 re-send a failing action until the turn limit. Two framework parts
stop that for any flow whose LLM replies carry an action followed by a tool observation:

* :class:`RepeatGuard` - an :class:`~stateflow.outputs.LLM` option. When a reply's action was
  already executed, the reply is discarded (its usage traced) and the model is asked again with an
  instruction naming the repeated action and the observation it got, at increasing temperatures
  with distinct seeds. If every re-ask still repeats, the last reply stands and is marked, so...
* :func:`repeated_action` - a transition condition - can route the flow elsewhere (typically to
  submit the best result so far) instead of executing the action again.

An action is whatever the user's ``parse(reply) -> Hashable | None`` returns (``None``: the
reply carries no action). Its observation is the content of the first tool message after the LLM
message that carried it.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass

from stateflow.conditions import Condition
from stateflow.context import Context
from stateflow.messages import Kind, Message

__all__ = ["ActionParser", "Executed", "RepeatGuard", "executed_actions", "repeated_action"]

ActionParser = Callable[[str], Hashable | None]
"""``parse(reply_text) -> action`` (``None`` when the reply carries no action)."""


@dataclass(frozen=True)
class Executed:
    """One action the run executed and the observation it got."""

    action: Hashable
    observation: str


def executed_actions(messages: Iterable[Message], parse: ActionParser) -> list[Executed]:
    """Every (action, observation) pair in ``messages``, oldest first.

    An LLM message whose parsed action is not ``None`` is paired with the next tool message; an
    action never followed by a tool message (not executed yet) is left out.
    """
    pairs: list[Executed] = []
    pending: Hashable | None = None
    for m in messages:
        if m.kind == Kind.LLM:
            pending = parse(m.content)
        elif m.kind == Kind.TOOL and pending is not None:
            pairs.append(Executed(pending, m.content))
            pending = None
    return pairs


def _earlier(executed: list[Executed], action: Hashable) -> Executed | None:
    for pair in reversed(executed):
        if pair.action == action:
            return pair
    return None


@dataclass(frozen=True)
class RepeatGuard:
    """Re-ask the model when its reply repeats an action already executed.

    Attributes:
        parse: extracts the action from a reply (``None``: no action, never a repeat).
        temperatures: one re-ask per entry, at that temperature (each with a distinct seed).
        note: the instruction appended for a re-ask; ``{action}`` and ``{observation}`` are filled
            with the repeated action and the observation it got.
        max_observation_chars: the observation is cut to this length in the note.
    """

    parse: ActionParser
    temperatures: tuple[float, ...] = (0.7, 1.0)
    note: str = (
        "You already ran {action} and got: {observation}\n"
        "Running it again gives the same result. Write a different action."
    )
    max_observation_chars: int = 300

    def __post_init__(self) -> None:
        if not callable(self.parse):
            raise TypeError("RepeatGuard: parse must be callable")
        object.__setattr__(self, "temperatures", tuple(self.temperatures))
        if not self.temperatures:
            raise ValueError("RepeatGuard: temperatures must hold at least one re-ask")
        if any(t < 0 for t in self.temperatures):
            raise ValueError(f"RepeatGuard: temperatures must be >= 0, got {self.temperatures}")

    def repeat_of(self, ctx: Context, reply: str) -> Executed | None:
        """The earlier execution ``reply``'s action repeats, or ``None``."""
        action = self.parse(reply)
        if action is None:
            return None
        return _earlier(executed_actions(ctx.history, self.parse), action)

    def instruction(self, earlier: Executed) -> str:
        """The re-ask text naming the repeated action and its observation."""
        obs = earlier.observation
        if len(obs) > self.max_observation_chars:
            obs = obs[: self.max_observation_chars] + "..."
        return self.note.format(action=repr(earlier.action), observation=obs)


def repeated_action(parse: ActionParser, name: str | None = None) -> Condition:
    """The last LLM reply's action was already executed earlier in the run (and not yet again).

    Put it on a rule before the one that executes the action, e.g. ``Transition(solve, submit,
    when=repeated_action(parse))``, so a reply the :class:`RepeatGuard` could not change ends in
    the flow's fallback (submitting the best result so far) instead of burning a turn.
    """

    def check(ctx: Context) -> bool:
        messages = ctx.history.messages
        last_llm = next((i for i in range(len(messages) - 1, -1, -1) if messages[i].kind == Kind.LLM), None)
        if last_llm is None:
            return False
        action = parse(messages[last_llm].content)
        if action is None:
            return False
        return _earlier(executed_actions(messages[:last_llm], parse), action) is not None

    return Condition(check, name or "repeated_action")

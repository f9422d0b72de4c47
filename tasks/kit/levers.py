"""Levers as data: one :class:`Lever` record per switch of a flow, and recipes built from them.

A *lever* is a named change to a base flow (list the schema in Init, vote on Solve's answer,
repeat the question last...). A *recipe* is a base flow plus a set of levers; a named method
(``sf_agent_vote_question_last``) is a recipe with a name, not a copy of a flow. A
:class:`LeverTable` holds one benchmark's levers in their application order and builds a
recipe's flow, after checking the whole recipe at once: unknown levers, levers whose needs are
missing and pairs that conflict are reported together in one :class:`LeverError`.

Why the table's order is the application order: several levers rewrite the same state (each
appends to Solve's instruction, each arms the same LLM call), so applying them in a fixed order
keeps a recipe's flow, and with it the flow's fingerprint that identifies recorded runs, the
same whatever order a user lists the levers in.

Example:
    >>> from stateflow.tasks.sql.levers import SQL_LEVERS
    >>> SQL_LEVERS.check({"values", "no_thoughts", "typo"})
    Traceback (most recent call last):
    ...
    stateflow.tasks.kit.levers.LeverError: recipe intercode-sql+values+no_thoughts+typo: ...
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from stateflow import Flow
from stateflow.errors import ConfigError

__all__ = ["RECIPE_SEPARATOR", "Lever", "LeverContext", "LeverError", "LeverTable", "Recipe", "split_recipe"]

#: separates a base method from the levers added to it on the command line
RECIPE_SEPARATOR = "+"


class LeverError(ConfigError, ValueError):
    """A recipe's levers do not fit together; :attr:`problems` lists every reason, one line each.

    Also a :class:`ValueError`, like the other ways a method cannot be built.
    """

    def __init__(self, recipe: str, problems: list[str]) -> None:
        self.recipe = recipe
        self.problems = tuple(problems)
        super().__init__(f"recipe {recipe}: " + "; ".join(problems))


@dataclass(frozen=True)
class LeverContext:
    """What a lever's transform may read besides the flow: the whole recipe and the run options.

    Attributes:
        levers: the names of every lever in the recipe (a transform may depend on another lever,
            e.g. a vote runs its candidates the way the re-binding lever runs statements).
        grammar: the run constrains replies with grammars (``--grammar``).
        options: the benchmark's extra build options (e.g. SQL's observation format).
    """

    levers: frozenset[str]
    grammar: bool = False
    options: Mapping[str, Any] = field(default_factory=dict)
    settings: Mapping[str, int] = field(default_factory=dict)

    def has(self, lever: str) -> bool:
        """``lever`` is part of the recipe."""
        return lever in self.levers

    def setting(self, lever: str) -> int:
        """The amount of a lever that has one (how many values, samples, replies).

        Raises:
            KeyError: ``lever`` has no setting (a bug in the lever's transform).
        """
        return self.settings[lever]


@dataclass(frozen=True)
class Lever:
    """One switch of a flow, as data.

    Attributes:
        name: the name used in recipes (``values``; ``sf_agent+schema+values`` on the command line).
        about: one line: what the lever changes.
        needs: levers that must be in the same recipe.
        conflicts: levers that must not be in the same recipe (checked both ways).
        applies_to: the base flows (by name) this lever can change.
        effect: where its measured effect is documented (a docs/results.md section), or why it
            has none.
        base: keyword arguments it passes to the base flow's builder (e.g. which execute tool
            the states use); applied before any transform.
        apply: the transform ``(flow, context) -> flow``; ``None`` for a lever that only sets
            :attr:`base` or that another lever's transform reads (see :class:`LeverContext`).
        setting: the default amount of a lever that has one (``None``: an on/off switch).
    """

    name: str
    about: str
    needs: tuple[str, ...] = ()
    conflicts: tuple[str, ...] = ()
    applies_to: tuple[str, ...] = ()
    effect: str = ""
    base: Mapping[str, Any] = field(default_factory=dict)
    apply: Callable[[Flow, LeverContext], Flow] | None = None
    setting: int | None = None


@dataclass(frozen=True)
class Recipe:
    """A method as data: a base flow, the view that runs it and the levers on it.

    Attributes:
        base: the base flow's name (a :attr:`LeverTable.base`).
        view: ``stateflow`` (one agent, instructions in the history) or ``sf_agent`` (one agent
            per state, private instructions).
        levers: lever names in application order.
        parent: the preset this one extends by the levers it adds (``None``: the base itself);
            for listings (``sf_agent_prompt_vote + question_last``).
        settings: ``(lever, amount)`` for the levers given an amount (``verify_budget=2``);
            the others keep their default.
    """

    base: str
    view: str
    levers: tuple[str, ...] = ()
    parent: str | None = None
    settings: tuple[tuple[str, int], ...] = ()

    def text(self) -> str:
        """``view+lever+lever=N``: the recipe as the command line takes it, amounts included."""
        amounts = dict(self.settings)
        parts = [f"{lever}={amounts[lever]}" if lever in amounts else lever for lever in self.levers]
        return RECIPE_SEPARATOR.join([self.view, *parts])


@dataclass(frozen=True)
class LeverTable:
    """A benchmark's levers, in application order, and how a recipe of them becomes a flow.

    Attributes:
        base: the name of the base flow (``intercode-sql``), as in :attr:`Lever.applies_to`.
        levers: the levers; their order is the order their transforms run in.
        build_base: ``(base keyword arguments, context) -> Flow``: the base flow.
        finish: ``(flow, context) -> Flow``: run after every transform (e.g. the flow's name).

    Raises:
        ConfigError: (at construction) two levers share a name, or a lever names an unknown
            lever in ``needs`` or ``conflicts``.
    """

    base: str
    levers: tuple[Lever, ...]
    build_base: Callable[[Mapping[str, Any], LeverContext], Flow]
    finish: Callable[[Flow, LeverContext], Flow] = lambda flow, ctx: flow

    def __post_init__(self) -> None:
        names = [lv.name for lv in self.levers]
        dup = sorted({n for n in names if names.count(n) > 1})
        bad = [
            f"{lv.name}.{kind} names {other!r}"
            for lv in self.levers
            for kind, others in (("needs", lv.needs), ("conflicts", lv.conflicts))
            for other in others
            if other not in names
        ]
        if dup or bad:
            raise ConfigError(f"lever table {self.base}: " + "; ".join([*(f"{n!r} twice" for n in dup), *bad]))

    def __iter__(self):
        return iter(self.levers)

    def names(self) -> tuple[str, ...]:
        """Every lever name, in application order."""
        return tuple(lv.name for lv in self.levers)

    def get(self, name: str) -> Lever:
        """The lever called ``name``.

        Raises:
            LeverError: no such lever; the message lists the valid ones.
        """
        for lv in self.levers:
            if lv.name == name:
                return lv
        raise LeverError(f"{self.base}+{name}", [f"unknown lever {name!r} (levers: {', '.join(self.names())})"])

    def problems(self, levers: Collection[str], settings: Mapping[str, int] | None = None) -> list[str]:
        """Every reason the set ``levers`` cannot be built: unknown, missing needs, conflicts, and
        settings given to a lever that has none, is not in the recipe, or is below 1."""
        known = {lv.name: lv for lv in self.levers}
        unknown = sorted(set(levers) - set(known))
        out = [f"unknown lever {n!r} (levers: {', '.join(self.names())})" for n in unknown]
        for name, value in (settings or {}).items():
            if name not in levers:
                out.append(f"a setting for {name!r}, which is not in the recipe")
            elif name in known and known[name].setting is None:
                out.append(f"lever {name!r} is a switch and takes no setting (={value})")
            elif value < 1:
                out.append(f"lever {name!r}: setting {value} is below 1")
        chosen = [lv for lv in self.levers if lv.name in levers]  # table order: stable messages
        for lv in chosen:
            if self.base not in lv.applies_to:
                out.append(f"lever {lv.name!r} does not apply to {self.base} (only to {', '.join(lv.applies_to)})")
            out += [f"lever {lv.name!r} needs {need!r}" for need in lv.needs if need not in levers]
        pairs = {
            tuple(sorted((lv.name, other)))
            for lv in chosen
            for other in (*lv.conflicts, *(o.name for o in chosen if lv.name in o.conflicts))
            if other in levers and other != lv.name
        }
        out += [f"levers {a!r} and {b!r} conflict" for a, b in sorted(pairs)]
        return out

    def check(self, levers: Collection[str], settings: Mapping[str, int] | None = None) -> frozenset[str]:
        """``levers`` as a set, after checking them all.

        Raises:
            LeverError: one error listing every unknown lever, missing need and conflict.
        """
        found = self.problems(levers, settings)
        if found:
            label = RECIPE_SEPARATOR.join([self.base, *self.ordered(levers)])
            raise LeverError(label, found)
        return frozenset(levers)

    def ordered(self, levers: Iterable[str]) -> tuple[str, ...]:
        """``levers`` in application order (unknown names last, as given)."""
        wanted = list(dict.fromkeys(levers))
        return tuple([n for n in self.names() if n in wanted] + [n for n in wanted if n not in self.names()])

    def build(
        self,
        levers: Collection[str],
        *,
        grammar: bool = False,
        settings: Mapping[str, int] | None = None,
        **options: Any,
    ) -> Flow:
        """The flow of the base with ``levers`` on, each transform applied in table order.

        Args:
            levers: lever names (order does not matter).
            grammar: the run constrains replies with grammars.
            settings: amounts for levers that have one (default: each lever's :attr:`Lever.setting`).
            options: passed to the transforms as :attr:`LeverContext.options`.

        Raises:
            LeverError: the levers do not fit together (see :meth:`check`).
        """
        chosen_names = self.check(levers, settings)
        amounts = {lv.name: lv.setting for lv in self.levers if lv.name in chosen_names and lv.setting is not None}
        amounts.update(settings or {})
        ctx = LeverContext(chosen_names, grammar, options, amounts)
        chosen = [lv for lv in self.levers if lv.name in ctx.levers]
        base_args: dict[str, Any] = {}
        for lv in chosen:
            base_args.update(lv.base)
        flow = self.build_base(base_args, ctx)
        for lv in chosen:
            if lv.apply is not None:
                flow = lv.apply(flow, ctx)
        return self.finish(flow, ctx)


def split_recipe(text: str) -> tuple[str, tuple[str, ...], dict[str, int]]:
    """``"sf_agent+schema+values=5"`` -> ``("sf_agent", ("schema", "values"), {"values": 5})``.

    Raises:
        ConfigError: an empty part (``a++b``, a trailing ``+``) or a setting that is not a number.
    """
    head, *parts = (part.strip() for part in text.split(RECIPE_SEPARATOR))
    if not head or any(not p for p in parts):
        raise ConfigError(f"recipe {text!r}: write METHOD+LEVER[+LEVER=N...] with no empty part")
    levers: list[str] = []
    settings: dict[str, int] = {}
    for part in parts:
        name, eq, amount = part.partition("=")
        if eq:
            if not amount.strip().isdigit():
                raise ConfigError(f"recipe {text!r}: {part!r}: a setting is a whole number (LEVER=N)")
            settings[name.strip()] = int(amount)
        levers.append(name.strip())
    return head, tuple(levers), settings

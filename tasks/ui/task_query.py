"""The tasks page's query: filters, sort order and page, parsed from the URL and checked.

Every value comes from a client and is checked against what the index holds: an unknown method,
outcome, sort column or a page that is not a positive number is a :class:`QueryError` naming the
parameter and the valid values (the server answers 400 with it).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from stateflow.tasks.ui.index import IndexedEpisode

from stateflow.errors import StateFlowError

__all__ = ["OUTCOMES", "PAGE_SIZE", "SORTS", "QueryError", "TaskPage", "TaskQuery", "run_query"]

PAGE_SIZE = 50
OUTCOMES = ("success", "failed", "errored")


class QueryError(StateFlowError):
    """A request parameter is not one the page accepts (the message names it and the valid values)."""


def _tokens(ep: IndexedEpisode) -> int:
    return ep.record.prompt_tokens + ep.record.completion_tokens


SORTS: dict[str, Callable[[IndexedEpisode], Any]] = {
    "task": lambda ep: (ep.record.task, ep.record.method),
    "method": lambda ep: (ep.record.method, ep.record.task),
    "reward": lambda ep: ep.record.reward_raw,
    "turns": lambda ep: ep.record.turns,
    "tokens": _tokens,
    "seconds": lambda ep: ep.record.wall_s,
    "finished": lambda ep: ep.record.finished_at,
}


@dataclass(frozen=True)
class TaskQuery:
    """What the tasks page shows. Empty strings / ``None`` mean "no filter"."""

    method: str = ""
    outcome: str = ""
    hardness: str = ""
    context: str = ""
    state: str = ""
    error: str = ""  # "yes": errored or an error message; "no": neither
    text: str = ""  # a substring of the question, gold, last action or error
    turns_min: int | None = None
    turns_max: int | None = None
    sort: str = "task"
    desc: bool = False
    page: int = 1

    @classmethod
    def parse(cls, params: Mapping[str, str], choices: Mapping[str, Sequence[str]]) -> TaskQuery:
        """Parse URL parameters; ``choices`` lists the valid values of ``method``, ``hardness``,
        ``context`` and ``state`` (what the index holds).

        Raises:
            QueryError: a value outside its choices, or a number that is not one.
        """

        def pick(name: str, valid: Sequence[str]) -> str:
            value = params.get(name, "")
            if value and value not in valid:
                shown = ", ".join(valid[:20]) + (" ..." if len(valid) > 20 else "")
                raise QueryError(f"{name}={value!r} is not one of: {shown or '(none recorded)'}")
            return value

        def number(name: str, lowest: int) -> int | None:
            value = params.get(name, "").strip()
            if not value:
                return None
            if not value.isdigit() or int(value) < lowest or len(value) > 9:
                raise QueryError(f"{name}={value!r}: give a whole number >= {lowest}")
            return int(value)

        return cls(
            method=pick("method", choices.get("method", ())),
            outcome=pick("outcome", OUTCOMES),
            hardness=pick("hardness", choices.get("hardness", ())),
            context=pick("context", choices.get("context", ())),
            state=pick("state", choices.get("state", ())),
            error=pick("error", ("yes", "no")),
            text=params.get("q", "")[:200],
            turns_min=number("turns_min", 0),
            turns_max=number("turns_max", 0),
            sort=pick("sort", tuple(SORTS)) or "task",
            desc=pick("desc", ("0", "1")) == "1",
            page=number("page", 1) or 1,
        )

    def params(self, **change: Any) -> dict[str, str]:
        """The query as URL parameters (only the set ones), with ``change`` applied."""
        values = {
            "method": self.method,
            "outcome": self.outcome,
            "hardness": self.hardness,
            "context": self.context,
            "state": self.state,
            "error": self.error,
            "q": self.text,
            "turns_min": "" if self.turns_min is None else str(self.turns_min),
            "turns_max": "" if self.turns_max is None else str(self.turns_max),
            "sort": "" if self.sort == "task" else self.sort,
            "desc": "1" if self.desc else "",
            "page": "" if self.page == 1 else str(self.page),
        } | {k: str(v) for k, v in change.items()}
        return {k: v for k, v in values.items() if v}

    def matches(self, ep: IndexedEpisode) -> bool:
        r = ep.record
        errored = r.status != "ok" or bool(r.error)
        outcome = "errored" if r.status != "ok" else ("success" if r.success else "failed")
        needle = self.text.lower()
        return (
            (not self.method or r.method == self.method)
            and (not self.outcome or outcome == self.outcome)
            and (not self.hardness or r.hardness == self.hardness)
            and (not self.context or r.context == self.context)
            and (not self.state or self.state in r.path)
            and (not self.error or (self.error == "yes") == errored)
            and (self.turns_min is None or r.turns >= self.turns_min)
            and (self.turns_max is None or r.turns <= self.turns_max)
            and (not needle or any(needle in (s or "").lower() for s in (r.query, r.gold, r.last_action, r.error)))
        )


@dataclass(frozen=True)
class TaskPage:
    """One page of matching episodes, and how many matched in all."""

    rows: list[IndexedEpisode]
    matched: int
    page: int
    pages: int
    choices: dict[str, list[str]] = field(default_factory=dict)


def choices_of(episodes: Sequence[IndexedEpisode]) -> dict[str, list[str]]:
    """The values each select of the filter form offers: what the episodes hold."""
    return {
        "method": sorted({ep.record.method for ep in episodes}),
        "hardness": sorted({ep.record.hardness for ep in episodes if ep.record.hardness}),
        "context": sorted({ep.record.context for ep in episodes if ep.record.context}),
        "state": sorted({s for ep in episodes for s in ep.record.path}),
    }


def run_query(episodes: Sequence[IndexedEpisode], query: TaskQuery) -> TaskPage:
    """Filter, sort and cut out the asked page (a page past the end shows the last one)."""
    matched = [ep for ep in episodes if query.matches(ep)]
    matched.sort(key=SORTS[query.sort], reverse=query.desc)
    pages = max(1, -(-len(matched) // PAGE_SIZE))
    page = min(query.page, pages)
    return TaskPage(matched[(page - 1) * PAGE_SIZE : page * PAGE_SIZE], len(matched), page, pages)

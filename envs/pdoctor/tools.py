"""Mock tools: one per action of a request, logging every call.

A :class:`MockToolkit` serves one episode. The agent calls a tool by name (``checking_vitals``;
extended version: with a start time, ``checking_vitals(start=09:30)``); the toolkit logs the call
and answers with a short success message (extended: the tool's duration, which the agent did not
know before). A call to a name that is not a tool, or a malformed call, is logged as an Act Error
and answered with an error that lists the real tools.

:func:`flow_tools` gives the same tools as StateFlow :class:`~stateflow.Tool` objects, so a flow
can run a fixed tool in a state like any other tool (``State("X", *flow_tools(request)[:1])``).
"""

from __future__ import annotations

import re

from stateflow.envs.pdoctor.grammar import clock
from stateflow.envs.pdoctor.oracle import Call
from stateflow.envs.pdoctor.request import Request

from stateflow import Context, Tool, ToolResult

__all__ = ["MockToolkit", "flow_tools", "parse_call"]

_NAME = r"([A-Za-z_][A-Za-z0-9_]*)"
_TIME = r"(\d{1,2}):(\d{2})"
_BASIC = re.compile(rf"^{_NAME}\s*(?:\(\s*\)|\[\s*\])?$")
_WITH_TIME = re.compile(rf"^{_NAME}\s*(?:\(\s*(?:start\s*=\s*)?{_TIME}\s*\)|\s+(?:at\s+|start\s*=\s*)?{_TIME})$")


def parse_call(text: str, extended: bool) -> tuple[str | None, int | None]:
    """``(tool name, start minute)`` of a call; ``(None, None)`` when it is malformed.

    >>> parse_call("testing_radios", False)
    ('testing_radios', None)
    >>> parse_call("testing_radios(start=09:30)", True)
    ('testing_radios', 570)
    >>> parse_call("testing radios", False)
    (None, None)
    """
    text = text.strip().strip("`").strip()
    m = _BASIC.match(text)
    if m:
        return m.group(1), None
    if extended:
        m = _WITH_TIME.match(text)
        if m:
            h, mi = (int(m.group(2)), int(m.group(3))) if m.group(2) else (int(m.group(4)), int(m.group(5)))
            if h < 24 and mi < 60:
                return m.group(1), h * 60 + mi
    return None, None


def _took(minutes: int) -> str:
    h, m = divmod(minutes, 60)
    return f"{h}h{m:02d}" if h and m else (f"{h}h" if h else f"{m} min")


class MockToolkit:
    """The tools of one episode and the log of its calls (not thread-safe: one per episode)."""

    def __init__(self, request: Request):
        self.request = request
        self.calls: list[Call] = []
        self._index = {t: i for i, t in enumerate(request.tools)}

    def describe(self) -> str:
        """The tool list shown to the agent."""
        lines = [f"- {t}: {a}" for t, a in zip(self.request.tools, self.request.actions, strict=True)]
        how = "NAME(start=HH:MM), e.g. " + self.request.tools[0] + "(start=09:00)" if self.request.extended else "NAME"
        return "Tools (call one per action as " + how + "):\n" + "\n".join(lines)

    def call(self, text: str) -> tuple[str, bool]:
        """Run the call ``text``; returns ``(observation, executed)`` and logs the call."""
        ext = self.request.extended
        name, start = parse_call(text, ext)
        if name is None:
            self.calls.append(Call(text, None))
            how = "NAME(start=HH:MM)" if ext else "just the tool NAME"
            return f"Error: malformed call {text.strip()[:80]!r}; write {how}.", False
        if name not in self._index:
            self.calls.append(Call(text, None))
            return f"Error: there is no tool named {name!r}. Tools: {', '.join(self.request.tools)}.", False
        a = self._index[name]
        if not ext:
            self.calls.append(Call(text, name))
            return f"Done: {self.request.actions[a]}.", True
        assert self.request.durations is not None
        previous = next((c.end for c in reversed(self.calls) if c.end is not None), self.request.day_start)
        given = start is not None
        begin = start if start is not None else previous
        end = begin + self.request.durations[a]
        self.calls.append(Call(text, name, begin, end, given))
        note = "" if given else f" (no start time given: started at {clock(begin)})"
        took = _took(self.request.durations[a])
        return f"Done: {self.request.actions[a]}, from {clock(begin)} to {clock(end)} (took {took}){note}.", True


def flow_tools(request: Request) -> tuple[Tool, ...]:
    """One StateFlow tool per action; each calls the episode's environment (``ctx.env``).

    The environment must be a :class:`~stateflow.envs.pdoctor.env.PDoctorEnv` reset on ``request``.
    """

    def make(name: str) -> Tool:
        def fn(ctx: Context) -> ToolResult:
            observation, _, _, info = ctx.env.step(name)
            ok = bool(info.get("action_executed"))
            return ToolResult(str(observation), {"ok": ok, "done": False, "action": name, "statement": "CALL"})

        return Tool(fn, name)

    return tuple(make(t) for t in request.tools)

"""Formal validation of few-shot examples against a spec.

Each example is split into (state, content) steps on the spec's state texts (line-anchored,
longest match) and walked through the automaton, bounded loops included. The report gives, per
example, either "valid" or the first violating step with its line and what was expected.

Example files: plain text with examples separated by lines of three or more dashes (``---``),
or a JSON list of strings.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from stateflow.spec.compiled import AgentSpec
from stateflow.spec.errors import SpecError

__all__ = ["ExampleReport", "check_example", "check_examples_file", "split_examples"]

_SEPARATOR = re.compile(r"^-{3,}[ \t]*$", re.MULTILINE)


@dataclass(frozen=True)
class ExampleReport:
    """The verdict on one example.

    Attributes:
        index: 1-based position of the example in its file.
        line: line (in the file) where the example starts.
        ok: the example is a complete valid run.
        step: 1-based index of the first violating step (``None`` when ok; ``len(trace) + 1``
            when the example ends too early).
        error_line: file line of the violating step.
        message: what is wrong and what was expected there.
        trace: the states the example visits, in order.
    """

    index: int
    line: int
    ok: bool
    step: int | None = None
    error_line: int | None = None
    message: str = "valid"
    trace: tuple[str, ...] = ()

    def __str__(self) -> str:
        head = f"example {self.index} (line {self.line})"
        if self.ok:
            return f"{head}: valid ({len(self.trace)} steps)"
        return f"{head}: step {self.step} (line {self.error_line}): {self.message}"


def split_examples(text: str) -> list[tuple[int, str]]:
    """Split plain text on ``---`` lines; returns ``(start line, text)`` for each non-blank example."""
    out: list[tuple[int, str]] = []
    pos = 0
    for m in [*_SEPARATOR.finditer(text), None]:
        end = m.start() if m else len(text)
        chunk = text[pos:end]
        if chunk.strip():
            lead = len(chunk) - len(chunk.lstrip("\n"))
            out.append((text.count("\n", 0, pos + lead) + 1, chunk.strip("\n")))
        if m:
            pos = m.end() + 1
    return out


def check_example(spec: AgentSpec, text: str, *, index: int = 1, line: int = 1) -> ExampleReport:
    """Check one example (``line`` is where it starts in its file, for messages)."""
    dfa = spec.dfa
    q = dfa.start
    trace: list[str] = []

    def fail(step: int, offset: int, message: str) -> ExampleReport:
        return ExampleReport(index, line, False, step, line + text.count("\n", 0, offset), message, tuple(trace))

    for i, seg in enumerate(spec.segmenter.split(text), start=1):
        if seg.state is None:
            return fail(i, seg.start, f"text before the first state text: {seg.content[:60]!r}")
        nxt = dfa.step(q, seg.state)
        if nxt is None:
            valid = ", ".join(dfa.next_states(q)) or "nothing (the run must end here)"
            after = f"after {trace[-1]}" if trace else "at the start"
            return fail(i, seg.start, f"{seg.state} cannot come {after}; valid here: {valid}")
        choices = spec.state(seg.state).choices
        if choices and seg.content not in choices:
            return fail(i, seg.content_start, f"{seg.state} content {seg.content!r} is not one of {list(choices)}")
        trace.append(seg.state)
        q = nxt
    if not dfa.may_stop(q):
        valid = ", ".join(dfa.next_states(q))
        return fail(
            len(trace) + 1, len(text), f"example ends after {trace[-1] if trace else 'nothing'}; expected {valid}"
        )
    return ExampleReport(index, line, True, trace=tuple(trace))


def check_examples_file(spec: AgentSpec, path: str | Path) -> list[ExampleReport]:
    """Check every example of a file (``.json``: a list of strings; otherwise ``---``-separated).

    Raises:
        FileNotFoundError: no such file.
        SpecError: a JSON file that is not a list of strings, or a file with no example.
    """
    p = Path(path)
    try:
        raw = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise FileNotFoundError(f"examples file not found: {p}") from None
    if p.suffix == ".json":
        try:
            data = json.loads(raw)
        except json.JSONDecodeError as err:
            raise SpecError(f"invalid JSON: {err.msg}", source=str(p), line=err.lineno, col=err.colno) from err
        if not isinstance(data, list) or not all(isinstance(x, str) for x in data):
            raise SpecError("a JSON examples file must hold a list of strings", source=str(p))
        items = [(1, x) for x in data]
    else:
        items = split_examples(raw)
    if not items:
        raise SpecError("no examples found (separate examples with a line of ---)", source=str(p))
    return [check_example(spec, t, index=i, line=ln) for i, (ln, t) in enumerate(items, start=1)]

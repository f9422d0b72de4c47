"""Degenerate-output detection: character or digit runs and runaway lines in a model reply.

Small models under a grammar sometimes write one character (or a short pattern such as ``00`` or
``, 1``) until ``max_tokens``: ``LIMIT 1000000000...``. :class:`DegenerateCut` is an
:class:`~stateflow.outputs.LLM` option that cuts such a reply at the start of the run (or a line at
``max_line_chars``) and records the cut in the step's ``detail["degenerate"]``, so the action that
reaches the environment is the sane prefix and the trace says what happened. It does not shorten
the call itself: bound that with the profile's ``max_tokens`` and, on llama.cpp servers,
``extra_body={"repeat_penalty": ...}``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["Cut", "DegenerateCut"]


@dataclass(frozen=True)
class Cut:
    """Where and why a reply was cut."""

    reason: str
    at: int
    original_chars: int


@dataclass(frozen=True)
class DegenerateCut:
    """Cut replies that contain a periodic run or a line longer than any real answer.

    Attributes:
        max_run: a pattern of period 1..``max_period`` characters repeated to at least this many
            characters is a degenerate run (``000000...``, ``ababab...``).
        max_period: the longest repeating unit considered.
        max_line_chars: a line longer than this is cut there (``None``: no line bound).
    """

    max_run: int = 24
    max_period: int = 4
    max_line_chars: int | None = 600

    def __post_init__(self) -> None:
        if self.max_period < 1 or self.max_run <= 2 * self.max_period:
            raise ValueError(
                f"DegenerateCut: need max_period >= 1 and max_run > 2*max_period, got {self.max_run}, {self.max_period}"
            )
        if self.max_line_chars is not None and self.max_line_chars < 1:
            raise ValueError(f"DegenerateCut: max_line_chars must be >= 1, got {self.max_line_chars}")

    def find(self, text: str) -> Cut | None:
        """The first degenerate spot in ``text`` (the earliest of a run or a runaway line), or ``None``."""
        best: Cut | None = None
        for period in range(1, self.max_period + 1):
            repeats = -(-self.max_run // period)  # ceil: the run spans at least max_run characters
            pattern = re.compile(rf"(.{{{period}}})\1{{{repeats - 1},}}", re.DOTALL)
            m = pattern.search(text)
            if m is not None and not m.group(1).isspace():
                # Keep one unit so "LIMIT 10000..." becomes "LIMIT 10", not a dangling "LIMIT ".
                at = m.start() + period
                if best is None or at < best.at:
                    best = Cut(f"run of {m.group(1)!r} x{len(m.group(0)) // period}", at, len(text))
        if self.max_line_chars is not None:
            start = 0
            for line in text.split("\n"):
                if len(line) > self.max_line_chars:
                    at = start + self.max_line_chars
                    if best is None or at < best.at:
                        best = Cut(f"line longer than {self.max_line_chars} characters", at, len(text))
                    break
                start += len(line) + 1
        return best

    def apply(self, text: str) -> tuple[str, Cut | None]:
        """``text`` cut at its first degenerate spot, and the cut (``None``: left whole)."""
        cut = self.find(text)
        return (text, None) if cut is None else (text[: cut.at], cut)

"""Split model text into (state, content) segments on state texts.

A state text counts only at the start of a line, and when several texts match there the
longest wins (``"Final Thought:"`` beats ``"Thought:"``). Content runs from after the text to
the start of the next marker line.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

__all__ = ["Segment", "Segmenter"]


@dataclass(frozen=True)
class Segment:
    """One piece of split text.

    Attributes:
        state: the declared state whose text starts the piece, or ``None`` for text before the
            first marker.
        content: the piece's content, stripped of surrounding blanks.
        start: offset of the marker (or of the piece) in the split text.
        content_start: offset just after the marker.
        end: offset where the piece ends (next marker or end of text).
    """

    state: str | None
    content: str
    start: int
    content_start: int
    end: int


class Segmenter:
    """Splits text on a fixed set of state texts (compiled once, reused for every chunk).

    Args:
        texts: declared state name -> its text.

    Example:
        >>> seg = Segmenter({"Thought": "Thought:", "Final": "Final Thought:"})
        >>> [(s.state, s.content) for s in seg.split("Thought: a\\nFinal Thought: b")]
        [('Thought', 'a'), ('Final', 'b')]
    """

    def __init__(self, texts: Mapping[str, str]):
        self._by_text = {t: name for name, t in texts.items()}
        ordered = sorted(self._by_text, key=len, reverse=True)  # longest alternative first
        self._re = re.compile("^(?:" + "|".join(re.escape(t) for t in ordered) + ")", re.MULTILINE)

    @property
    def texts(self) -> tuple[str, ...]:
        """The state texts, longest first."""
        return tuple(sorted(self._by_text, key=len, reverse=True))

    def settled_marker(self, line: str) -> str | None:
        """The state whose text starts the (possibly unfinished) ``line``, if more characters
        cannot turn it into a longer text; ``None`` otherwise."""
        m = self._re.match(line)
        if m is None:
            return None
        if any(len(t) > len(line) and t.startswith(line) for t in self._by_text):
            return None
        return self._by_text[m.group(0)]

    def split(self, text: str) -> list[Segment]:
        """Split ``text``; a leading piece with ``state=None`` holds text before any marker
        (only when it is not blank)."""
        out: list[Segment] = []
        matches = list(self._re.finditer(text))
        first = matches[0].start() if matches else len(text)
        if text[:first].strip():
            out.append(Segment(None, text[:first].strip(), 0, 0, first))
        for i, m in enumerate(matches):
            end = matches[i + 1].start() if i + 1 < len(matches) else len(text)
            out.append(Segment(self._by_text[m.group(0)], text[m.end() : end].strip(), m.start(), m.end(), end))
        return out

"""Generated sections of hand-written documents, kept between a pair of marker lines.

A generated section (a results table, a README headline) lives between a begin and an end
marker, each alone on its line (surrounding spaces allowed), e.g.::

    <!-- paper-begin -->
    ... written by `stateflow bench paper` ...
    <!-- paper-end -->

:func:`replace_section` swaps what lies between them (markers included) for a new section and
leaves every other byte of the document as it was; a document without the markers gets the
section appended at its end. A marker text that appears inside a line (quoted in prose) is not
a marker. Anything ambiguous (a marker twice, one without the other, the end before the begin)
is refused with the file and line, and nothing is written.

>>> doc = "# Results\\n\\n<!-- x-begin -->\\nold\\n<!-- x-end -->\\n\\nkept\\n"
>>> print(replace_section(doc, SectionMarkers("x"), "new"), end="")
# Results
<BLANKLINE>
<!-- x-begin -->
new
<!-- x-end -->
<BLANKLINE>
kept
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from stateflow.errors import ConfigError

__all__ = ["MarkerError", "SectionMarkers", "check_section", "replace_section", "write_section"]


class MarkerError(ConfigError):
    """A document's section markers are missing, repeated or out of order.

    Attributes:
        where: the document (a path, or ``"<text>"``).
        line: the 1-based line of the offending marker.
    """

    def __init__(self, where: str, line: int, problem: str):
        self.where, self.line = where, line
        super().__init__(f"{where}:{line}: {problem}; fix the markers by hand (nothing was written)")


@dataclass(frozen=True)
class SectionMarkers:
    """The begin and end lines of the generated section called ``name``.

    Attributes:
        name: e.g. ``paper`` gives ``<!-- paper-begin -->`` and ``<!-- paper-end -->``.
    """

    name: str

    @property
    def begin(self) -> str:
        return f"<!-- {self.name}-begin -->"

    @property
    def end(self) -> str:
        return f"<!-- {self.name}-end -->"


def _marker_lines(lines: list[str], marker: str) -> list[int]:
    return [i for i, line in enumerate(lines) if line.strip() == marker]


def replace_section(text: str, markers: SectionMarkers, body: str, *, where: str = "<text>") -> str:
    """``text`` with the section between ``markers`` replaced by ``body`` (markers kept).

    Without markers, the section (markers around ``body``) is appended after a blank line.
    ``body`` is written as given, without its trailing newlines; the rest of ``text`` is
    untouched byte for byte.

    Raises:
        MarkerError: a marker appears more than once, only one of the two appears, the end
            comes before the begin, or ``body`` itself holds a marker line (it could not be
            replaced again). ``where`` names the document in the message.
    """
    body_lines = body.rstrip("\n").split("\n")
    for marker in (markers.begin, markers.end):
        inside = _marker_lines(body_lines, marker)
        if inside:
            raise MarkerError(f"{where} (new section)", inside[0] + 1, f"the new section holds the marker {marker}")
    lines = text.split("\n")
    begins, ends = _marker_lines(lines, markers.begin), _marker_lines(lines, markers.end)
    for marker, found in ((markers.begin, begins), (markers.end, ends)):
        if len(found) > 1:
            raise MarkerError(where, found[1] + 1, f"{marker} appears again (first on line {found[0] + 1})")
    section = [markers.begin, *body_lines, markers.end]
    if not begins and not ends:
        head = text.rstrip("\n")
        return (head + "\n\n" if head else "") + "\n".join(section) + "\n"
    if not ends:
        raise MarkerError(where, begins[0] + 1, f"{markers.begin} has no {markers.end} after it")
    if not begins:
        raise MarkerError(where, ends[0] + 1, f"{markers.end} has no {markers.begin} before it")
    if ends[0] < begins[0]:
        raise MarkerError(where, ends[0] + 1, f"{markers.end} comes before {markers.begin} (line {begins[0] + 1})")
    b, e = begins[0], ends[0]
    return "\n".join([*lines[:b], *section, *lines[e + 1 :]])


def check_section(path: Path, markers: SectionMarkers) -> None:
    """Check that :func:`write_section` could write ``path`` (an absent file is fine).

    Raises:
        MarkerError: see :func:`replace_section`.
    """
    if path.exists():
        replace_section(path.read_text(encoding="utf-8"), markers, "", where=str(path))


def write_section(path: Path, markers: SectionMarkers, body: str) -> None:
    """Replace (or append) the section in the file ``path`` (created if absent).

    The file is read and checked completely before it is rewritten, so a marker error leaves it
    as it was. The new text is written to a temporary file next to it and renamed over it.

    Raises:
        MarkerError: see :func:`replace_section` (the message names ``path`` and the line).
    """
    text = path.read_text(encoding="utf-8") if path.exists() else ""
    new = replace_section(text, markers, body, where=str(path))
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(new, encoding="utf-8")
    tmp.replace(path)

"""A Griffe extension for the API reference (mkdocs.yml, mkdocstrings ``extensions``).

The docstrings are written to read well in ``help()`` and to run as doctests
(tests/core/test_doctests.py): interactive ``>>>`` examples in plain prose and Sphinx roles
such as ``:func:`run```. Markdown would read a doctest's output (``['Ask', 'Done']``) as a link
and print the roles literally, so before mkdocstrings renders a docstring this extension fences
each run of ``>>>`` lines with its output as a ``pycon`` code block and turns each role into
inline code of the name it refers to. The docstrings themselves are not changed.
"""

from __future__ import annotations

import re
from typing import Any

import griffe

__all__ = ["DocstringMarkdown"]

_ROLE = re.compile(r":(?:py:)?(?:func|meth|class|mod|data|attr|exc|obj|const)?:`~?([^`]+)`")
_PROMPT = re.compile(r"^(\s*)>>> ")


def _fence_doctests(text: str) -> str:
    lines, out, i = text.split("\n"), [], 0
    while i < len(lines):
        m = _PROMPT.match(lines[i])
        if not m or (out and out[-1].strip().startswith("```")):
            out.append(lines[i])
            i += 1
            continue
        indent = m.group(1)
        out.append(f"{indent}```pycon")
        while i < len(lines) and lines[i].strip() and lines[i].startswith(indent):
            out.append(lines[i])
            i += 1
        out.append(f"{indent}```")
    return "\n".join(out)


def _role(match: re.Match[str]) -> str:
    target = match.group(1)
    if match.group(0).count("~"):
        target = target.rsplit(".", 1)[-1]
    return f"`{target}`"


def to_markdown(text: str) -> str:
    """``text`` with doctest runs fenced and Sphinx roles turned into inline code."""
    if "```" in text:  # already Markdown: leave fenced blocks alone, convert roles only
        return _ROLE.sub(_role, text)
    return _ROLE.sub(_role, _fence_doctests(text))


class DocstringMarkdown(griffe.Extension):
    """Rewrites each docstring's doctests and roles as Markdown (see the module docstring)."""

    def on_object(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = to_markdown(obj.docstring.value)

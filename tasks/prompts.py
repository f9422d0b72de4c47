"""Prompt files shipped beside the code (``prompts/<domain>/<name>.md``).

Files are located relative to this package rather than imported as the ``prompts`` package:
a generic top-level name is easily shadowed by a ``prompts/`` folder in the current directory.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

__all__ = ["PROMPTS_DIR", "load_prompt"]

PROMPTS_DIR = Path(__file__).resolve().parent.parent / "prompts"


@cache  # prompt files are read-only package data: caching them is safe across runs
def load_prompt(domain: str, name: str) -> str:
    """The text of ``prompts/<domain>/<name>.md`` (surrounding whitespace stripped).

    Raises:
        FileNotFoundError: naming the missing file and the prompts available for the domain.
    """
    path = PROMPTS_DIR / domain / f"{name}.md"
    if not path.is_file():
        folder = PROMPTS_DIR / domain
        available = sorted(p.stem for p in folder.glob("*.md")) if folder.is_dir() else []
        raise FileNotFoundError(f"prompt {path} not found; available for {domain!r}: {available}")
    return path.read_text(encoding="utf-8").strip()

"""Prompt files shipped as package data (``prompts/<domain>/<name>.md``, installed as ``stateflow.prompts``).

Read with :mod:`importlib.resources`, so the same call works from a checkout and from a wheel, and
a ``prompts/`` folder in the user's working directory can never shadow ours.
"""

from __future__ import annotations

from functools import cache

from stateflow.paths import resource_path

__all__ = ["PROMPTS_DIR", "load_prompt"]

PROMPTS_DIR = resource_path("stateflow.prompts")


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

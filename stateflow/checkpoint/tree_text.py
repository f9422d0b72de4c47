"""Canonical JSON of the trees a run's encoder builds, written by orjson, byte for byte as ``json`` writes it.

A checkpoint's text is canonical JSON (:func:`stateflow.checkpoint.record.canonical_json`: sorted
keys, no spaces, UTF-8 characters kept, no NaN). A run's encoder
(:class:`stateflow.run_state.PayloadEncoder`) encodes each new message, step, transition and chat
message of a run once; with the standard library's C encoder that was the largest single piece of
a checkpoint inside an episode (scripts/bench_checkpoint.py, docs/checkpoints.md). orjson writes
the same text several times faster, with three differences, each handled here so that the text
stays exactly the standard encoder's:

- *floats*: orjson writes exponents without a sign or padding (``1e-7``, ``1e16``; ``json``:
  ``1e-07``, ``1e+16``) and writes numbers in ``[1e-5, 1e-4)`` out in full (``0.00001``;
  ``json``: ``1e-05``). Any text with a digit followed by ``e`` or with ``0.0000`` in it is
  written again by the standard encoder (a message that merely says such a thing costs the
  slower encoding, never a different text);
- *values ``json`` refuses or writes otherwise*: subclasses of ``str``, ``int``, ``float``,
  ``dict`` and ``list``, dataclasses, dates, integers beyond 64 bits, keys that are not ``str``
  and unpaired surrogates make orjson fail here (its ``passthrough`` options, and a ``default``
  that refuses everything), and the standard encoder writes the text or raises its own error;
- *NaN and infinity*, which orjson writes as ``null`` and ``json`` refuses: the caller promises
  that a tree holds none as a plain ``float`` (the run's encoder marks one as a ``float``
  subclass, which takes the standard encoder's path and fails there as before).

Enums, UUIDs and numpy values, which orjson writes natively and ``json`` refuses, never reach
these trees: the run's encoder has turned every such value into its ``str`` already
(:func:`stateflow.run_state._plain`). Values a user hands in as they are (``vars``, blackboard
records) are not written here: they keep the standard encoder and its errors.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, NoReturn

import orjson

__all__ = ["tree_dumper"]

_OPTIONS = (
    orjson.OPT_SORT_KEYS
    | orjson.OPT_PASSTHROUGH_SUBCLASS
    | orjson.OPT_PASSTHROUGH_DATACLASS
    | orjson.OPT_PASSTHROUGH_DATETIME
)

# where orjson's number text may differ from json's (see the module docstring); a string that
# happens to hold the same characters only sends its tree to the standard encoder
_MAY_DIFFER = re.compile(rb"[0-9][eE]|0\.0000")


def _refuse(value: Any) -> NoReturn:
    raise TypeError(f"{type(value).__name__} is left to the standard encoder")


def tree_dumper(exact: Callable[[Any], str]) -> Callable[[Any], str]:
    """A function that returns ``exact(tree)`` for a tree holding no plain-``float`` NaN or infinity,
    computed by orjson when its text is certainly the same.

    Args:
        exact: the standard encoder with canonical settings (its text, or its error, is the answer
            whenever orjson's could differ).

    Example:
        >>> from stateflow.checkpoint.record import canonical_json
        >>> dump = tree_dumper(canonical_json)
        >>> dump({"b": [1, 2.5e-05, "é"], "a": None})
        '{"a":null,"b":[1,2.5e-05,"é"]}'
    """
    dumps, options, may_differ = orjson.dumps, _OPTIONS, _MAY_DIFFER.search

    def dump(tree: Any) -> str:
        try:
            data = dumps(tree, default=_refuse, option=options)
        except TypeError:  # orjson.JSONEncodeError is a TypeError: a value for the standard encoder
            return exact(tree)
        if may_differ(data) is not None:
            return exact(tree)
        return data.decode()

    return dump

"""Reading one line of a results file: the record without its trace, or the problem with the line.

Both the UI's index (:mod:`stateflow.tasks.ui.index`) and the overview's summary
(:mod:`stateflow.tasks.ui.summary`) read lines with :func:`parse_line`, so they count the same
records and report the same problems.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from stateflow.tasks.kit.episode_record import SCHEMA_VERSION, EpisodeRecord, InvalidRecordError

__all__ = ["TRACE_FIELDS", "Problem", "ProblemKind", "Stamp", "parse_line"]

TRACE_FIELDS = ("history", "transitions", "calls", "eval", "bash_comparison")
"""Fields a list never shows; read from disk only for an episode's own page."""
ProblemKind = Literal["corrupt", "newer-schema", "invalid"]


@dataclass(frozen=True)
class Problem:
    """A line of a source that is not a readable record (shown on the pages, never fatal).

    Attributes:
        source: the file.
        line: its 1-based line number.
        kind: ``corrupt`` (not JSON), ``newer-schema`` (written by a newer StateFlow) or
            ``invalid`` (JSON, but not a valid record).
        message: what is wrong, as the record reader says it.
        summary: ``method / task`` when the line names them (so a newer record is recognisable).
    """

    source: str
    line: int
    kind: ProblemKind
    message: str
    summary: str = ""


@dataclass(frozen=True)
class Stamp:
    """What a source looked like at its last refresh (the live pages poll for a change)."""

    records: int
    problems: int
    size: int


# The results file writes a record's fields in EpisodeRecord's order, in which the trace is one
# stretch: `, "transitions": [...], "history": [...], "eval": {...}` right before `, "verdict": `.
# Cutting it out before parsing skips most of each line (10-100 KB of messages in a real run).
# A quote inside a JSON string is always escaped, so these byte patterns can only be keys; a line
# where either occurs more than once (a nested key of that name, or two records run together by
# a torn write) is parsed whole instead, as is any line the cut leaves unparsable.
_TRACE_START = b', "transitions": ['
_TRACE_END = b', "verdict": '
_TRACE_INNER = (b', "history": [', b', "eval": {')


def _without_trace(line: bytes) -> tuple[dict[str, Any] | None, bool]:
    """(the record of ``line`` without its trace, whether a vote ran), or ``(None, False)``
    when the fast cut does not apply (see above)."""
    if line.count(_TRACE_START) != 1 or line.count(_TRACE_END) != 1:
        return None, False
    start, end = line.find(_TRACE_START), line.find(_TRACE_END)
    trace = line[start:end]
    if end < start or not all(part in trace for part in _TRACE_INNER):
        return None, False
    try:
        data = json.loads(line[:start] + line[end:])
    except ValueError:
        return None, False
    if not isinstance(data, dict) or any(k in data for k in TRACE_FIELDS):
        return None, False
    return data, b'"vote": {' in trace


_CURRENT = b'{"schema_version": %d, ' % SCHEMA_VERSION  # how a line of this version's ResultsFile starts


def _validated_cut(line: bytes) -> tuple[EpisodeRecord, bool] | None:
    """A current record's cut line validated in one step by pydantic's JSON parser (no Python dict
    in between: about 3x faster), or ``None`` when the cut does not apply or the record is not
    valid; the caller then reads the line the careful way, which also names the problem."""
    if not line.startswith(_CURRENT) or line.count(_TRACE_START) != 1 or line.count(_TRACE_END) != 1:
        return None
    start, end = line.find(_TRACE_START), line.find(_TRACE_END)
    trace = line[start:end]
    if end < start or not all(part in trace for part in _TRACE_INNER):
        return None
    try:
        record = EpisodeRecord.model_validate_json(line[:start] + line[end:])
    except ValueError:  # pydantic's ValidationError, or bytes that are not JSON
        return None
    if record.history or record.transitions or record.calls or record.eval or record.bash_comparison is not None:
        return None  # a trace field outside the cut stretch: the careful way decides
    return record, b'"vote": {' in trace


def parse_line(
    line: bytes, path: Path, number: int, identities: dict[str, dict[str, Any]], *, light: bool = False
) -> tuple[EpisodeRecord, bool] | Problem | None:
    """Read one line of a results file: ``(record without its trace, whether a vote ran)``, a
    :class:`Problem` naming the line, or ``None`` for a blank line.

    A line this version wrote is validated in one step from its bytes (:func:`_validated_cut`);
    any other line, and any line that step refuses, is read the careful way
    (:func:`_parse_carefully`), which gives the same record or names the problem.

    Args:
        line: the line's bytes, without the newline.
        path, number: the file and the 1-based line number (for messages).
        identities: identity digest -> identity, shared over a file's lines: records of one
            setting carry the same identity (~40 fields), and keep one copy of it.
        light: the caller keeps only a few figures of each record (the summary): records need
            not share their identity object, which saves a copy of each.
    """
    if not line.strip():
        return None
    quick = _validated_cut(line)
    if quick is None:
        return _parse_carefully(line, path, number, identities)
    record, has_vote = quick
    digest, identity = record.identity_digest, record.identity
    if digest is not None and identity is not None:
        shared = identities.setdefault(digest, identity)
        if not light and shared is not identity and shared == identity:
            record = record.model_copy(update={"identity": shared})
    return record, has_vote


def _parse_carefully(
    line: bytes, path: Path, number: int, identities: dict[str, dict[str, Any]]
) -> tuple[EpisodeRecord, bool] | Problem:
    """:func:`parse_line` for any line: the JSON parsed to Python first, every problem named."""
    where = f"{path}:{number}"
    small, has_vote = _without_trace(line)
    if small is None:  # the fast cut did not apply: parse the whole line
        try:
            data = json.loads(line)
        except (json.JSONDecodeError, UnicodeDecodeError) as err:
            msg = err.msg if isinstance(err, json.JSONDecodeError) else str(err)
            return Problem(str(path), number, "corrupt", f"not a JSON record ({msg})")
        if not isinstance(data, dict):
            return Problem(str(path), number, "invalid", "not a JSON object")
        history = data.get("history")
        has_vote = isinstance(history, list) and any(
            isinstance(m, dict) and isinstance(m.get("meta"), dict) and "vote" in m["meta"] for m in history
        )
        small = {k: v for k, v in data.items() if k not in TRACE_FIELDS}
    digest, identity = small.get("identity_digest"), small.get("identity")
    shared = identities.get(digest) if isinstance(digest, str) else None
    if shared is not None and shared == identity:
        small["identity"] = None
    try:
        record = EpisodeRecord.from_dict(small, where=where)
    except InvalidRecordError as err:
        version = small.get("schema_version", 0)
        newer = isinstance(version, int) and version > SCHEMA_VERSION
        summary = f"{small.get('method', '?')} / task {small.get('task', '?')}"
        kind: ProblemKind = "newer-schema" if newer else "invalid"
        return Problem(str(path), number, kind, "; ".join(err.problems), summary)
    if shared is not None and small["identity"] is None:
        record = record.model_copy(update={"identity": shared})
    elif isinstance(digest, str) and record.identity is not None:
        identities[digest] = record.identity
    return record, has_vote

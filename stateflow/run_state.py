"""A run's state as a checkpoint saves it: where the run is and what it has produced so far.

This is the run state apart from its dependencies (the environment, model clients, HTTP pools
are injected again when a run continues; see the house style, "run state apart from
dependencies"). A :class:`RunState` is enough to continue a run exactly where it was: the
position (state and the index of the next output function in it), the history, the trace
(steps and transitions), the user's ``vars``, the blackboard records, and the AutoGen group
chat's messages, which :meth:`autogen.GroupChatManager.resume` loads back into every agent.

Encoding is JSON only. Blackboard records are dataclasses; each is saved with its class's
``module:qualname`` and restored only if that class is already imported in the resuming
process: a checkpoint never makes Python import a module or build anything but a dataclass
from plain values (a checkpoint store may be shared, so its rows are untrusted input).
"""

from __future__ import annotations

import dataclasses
import json
import math
import operator
import sys
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from pydantic import BaseModel

from stateflow.blackboard import Blackboard
from stateflow.checkpoint.payload_text import ItemTexts, PayloadText
from stateflow.checkpoint.tree_text import json_float, tree_dumper
from stateflow.errors import CheckpointCorrupt, ConfigError
from stateflow.messages import History, Kind, Message, Usage
from stateflow.trace import Step, TransitionRecord

__all__ = ["PayloadEncoder", "PendingQuestion", "RunState"]


@dataclass(frozen=True)
class PendingQuestion:
    """A question a deferred :class:`~stateflow.outputs.Human` asked; the run waits for its answer.

    Attributes:
        state: the state that asked.
        name: the name the answer will be recorded under.
        question: the text shown to the person (with the last message above it, if asked for).
    """

    state: str
    name: str
    question: str


def _usage_to(u: Usage | None) -> dict[str, Any] | None:
    if u is None:
        return None
    # the fields one by one: dataclasses.asdict deep-copies, and this runs for every call
    return {
        "prompt_tokens": u.prompt_tokens,
        "completion_tokens": u.completion_tokens,
        "cached_tokens": u.cached_tokens,
        "cost": json_float(u.cost),
        "latency_s": json_float(u.latency_s),
        "model": u.model,
        "profile": u.profile,
        **({"calls": u.calls} if u.calls != 1 else {}),  # one call: the form every older checkpoint has
    }


def _usage_from(d: Any) -> Usage | None:
    return None if d is None else Usage(**d)


def _message_to(m: Message) -> dict[str, Any]:
    return {
        "role": m.role,
        "name": m.name,
        "state": m.state,
        "kind": m.kind.value,
        "content": m.content,
        "usage": _usage_to(m.usage),
        "meta": _plain(dict(m.meta)) if m.meta else {},
    }


def _message_from(d: Mapping[str, Any]) -> Message:
    return Message(
        d["role"],
        d["name"],
        d["state"],
        Kind(d["kind"]),
        d["content"],
        _usage_from(d.get("usage")),
        MappingProxyType(dict(d.get("meta") or {})),
    )


def _step_to(s: Step, *, with_message: bool = True) -> dict[str, Any]:
    return {
        "index": s.index,
        "state": s.state,
        "output": s.output,
        "message": None if s.message is None or not with_message else _message_to(s.message),
        "usage": _usage_to(s.usage),
        "latency_s": json_float(s.latency_s),
        "detail": _plain(s.detail),
        "started_at": json_float(s.started_at),
    }


def _step_from(d: Mapping[str, Any]) -> Step:
    message = d.get("message")
    return Step(
        d["index"],
        d["state"],
        d["output"],
        None if message is None else _message_from(message),
        _usage_from(d.get("usage")),
        d["latency_s"],
        dict(d.get("detail") or {}),
        d.get("started_at", 0.0),
    )


def _plain(value: Any) -> Any:
    """``value`` with tuples as lists and anything else non-JSON as its ``str`` (as traces show it)."""
    kind = type(value)  # exact types first: the ABC checks below cost more than the conversion
    if kind is str or kind is int or kind is bool or value is None:
        return value
    if kind is float:
        return json_float(value)  # a float orjson would write otherwise is marked for the standard encoder
    if kind is dict:
        return {k if type(k) is str else str(k): _plain(v) for k, v in value.items()}
    if kind is list:
        return [_plain(v) for v in value]
    if isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    return str(value)


def _check_vars(vars: Mapping[str, Any]) -> None:
    """Raise a ConfigError naming the first ``vars`` value that is not JSON."""
    for key, value in vars.items():
        try:
            json.dumps(value, allow_nan=False)
        except (TypeError, ValueError) as err:
            raise ConfigError(
                f"vars[{key!r}] cannot be saved in a checkpoint ({err}); a checkpointed run needs JSON vars"
            ) from err


def _record_to(record: object, *, checked: bool = True) -> dict[str, Any]:
    """A blackboard record as JSON values; ``checked=False`` leaves the JSON check to the caller
    (who encodes it anyway, and calls this again checked to name a failure)."""
    cls = type(record)
    where = f"{cls.__module__}:{cls.__qualname__}"
    if isinstance(record, BaseModel):  # a typed reply (LLM(schema=...)): its JSON form
        return {"type": where, "fields": record.model_dump(mode="json")}
    if not dataclasses.is_dataclass(record):
        raise ConfigError(f"blackboard record {where} is not a dataclass, so a checkpoint cannot save it")
    if not checked:
        # asdict deep-copies every value; a record of plain values (the usual one) needs no copy
        flat = {f.name: getattr(record, f.name) for f in dataclasses.fields(record)}
        if all(type(v) in _ATOMS for v in flat.values()):
            return {"type": where, "fields": flat}
        return {"type": where, "fields": dataclasses.asdict(record)}
    fields = dataclasses.asdict(record)
    try:
        json.dumps(fields, allow_nan=False)
    except (TypeError, ValueError) as err:
        raise ConfigError(f"blackboard record {where} has a field a checkpoint cannot save as JSON: {err}") from err
    return {"type": where, "fields": fields}


def _record_from(d: Mapping[str, Any]) -> object:
    where = d["type"]
    module_name, _, qualname = str(where).partition(":")
    module = sys.modules.get(module_name)
    cls: Any = module
    for part in qualname.split(".") if module is not None else ():
        cls = getattr(cls, part, None)
    if isinstance(cls, type) and issubclass(cls, BaseModel):
        return cls.model_validate(d["fields"])
    if not (isinstance(cls, type) and dataclasses.is_dataclass(cls)):
        raise ValueError(
            f"blackboard record type {where} is not a loaded dataclass (import the module that defines it "
            "before continuing the run)"
        )
    return cls(**d["fields"])


class _EncodedList:
    """One growing list's items and their encodings, kept between checkpoints of one run."""

    __slots__ = ("encoded", "index", "last", "segments", "sources")

    def __init__(self) -> None:
        self.sources: list[Any] = []
        self.encoded: list[Any] = []
        self.last: list[Any] | None = None  # the list the last encode returned
        self.index: dict[int, int] = {}  # id(source) -> its position (sources are kept alive here)
        # the canonical JSON of ``encoded[:segments.count]``, one segment per checkpoint that added items
        self.segments: ItemTexts | None = None

    def encode(self, items: list[Any], encode: Any, same: Any) -> list[Any]:
        """``[encode(x) for x in items]``, reusing the encoding of every leading item that is
        ``same`` as the one encoded last time (a run's lists only grow, so that is all but the
        new items); from the first item that differs on, everything is encoded again."""
        limit = min(len(items), len(self.sources))
        # the common case, the whole previous list is still there, checked at C speed
        if same is _is:
            whole = all(map(operator.is_, items[:limit], self.sources[:limit]))
        else:
            whole = items[:limit] == self.sources[:limit]  # identity first, then equality
        keep = limit
        if not whole:
            keep = 0
            while keep < limit and same(items[keep], self.sources[keep]):
                keep += 1
        if keep < len(self.sources):
            del self.sources[keep:], self.encoded[keep:]
            self.index = {id(x): i for i, x in enumerate(self.sources)}
            if self.segments is not None and self.segments.count > keep:
                self.segments = None  # an item the texts hold was replaced: encode the list afresh
        for item in items[keep:]:
            self.index[id(item)] = len(self.sources)
            self.sources.append(item)
            self.encoded.append(encode(item))
        self.last = list(self.encoded)
        return self.last

    def texts(self, dump: Callable[[Any], str]) -> ItemTexts:
        """The canonical JSON of the list the last :meth:`encode` returned: the texts kept from
        earlier checkpoints plus one segment for the items added since (each written by ``dump``;
        one item at a time, so an item the standard encoder must write does not take the others
        with it).

        Raises:
            TypeError, ValueError: a new item is not JSON (``dump``'s error; nothing is kept).
        """
        last = self.last if self.last is not None else []
        segments = self.segments
        start = 0 if segments is None else segments.count
        if segments is not None and start == len(last):
            return segments
        text = ",".join(map(dump, last[start:]))
        segments = self.segments = ItemTexts(segments, text, len(last))
        return segments


class PayloadEncoder:
    """Encodes one run's successive states, encoding each history message, step and chat message once.

    A run's history, steps, transitions and chat only grow between checkpoints, and re-encoding
    them whole at every transition made checkpointing cost O(n) per step (two thirds of the
    memory checkpointer's cost in scripts/bench_checkpoint.py). This keeps each list's encoded
    items: a message or step is reused when it is the *same object* as last time (they are
    frozen dataclasses), a chat message when it is *equal* (the episode copies those dicts).
    A step's encoding shares the history's dict of its message (the same object). The items a
    checkpoint adds to a list are written once, as one text segment that later checkpoints share
    (:class:`~stateflow.checkpoint.payload_text.ItemTexts`). Values that rarely change (the task,
    the view, the start time, the model assignment...) keep their text while they are the same
    object, and ``vars`` and the blackboard are encoded once per checkpoint (checked key by key
    only when that fails, to name the culprit).
    The result is identical to :meth:`RunState.to_payload` without an encoder; the encoded items
    are shared between successive payloads, which checkpointers only read (they store JSON text).
    One encoder serves one run (a :class:`~stateflow.threads.ThreadJournal` holds it).
    """

    def __init__(self) -> None:
        # canonical_json's settings, one encoder object for the run (json.dumps builds one per call)
        settings = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
        self._dump = _tree_dumper(settings, circular=True)
        # the trees this encoder builds itself (messages, steps, transitions, chat messages) are
        # written by orjson, byte for byte the standard encoder's text (stateflow.checkpoint.tree_text)
        self._dump_tree = tree_dumper(_tree_dumper(settings))
        self._orders: dict[tuple[str, ...], tuple[str, ...]] = {}  # keys -> the keys sorted
        self._history = _EncodedList()
        self._steps = _EncodedList()
        self._transitions = _EncodedList()
        self._chat = _EncodedList()
        # the value each key had last time and its text: reused while the value is the same
        # immutable object (or a value this encoder handed out itself: ``models``)
        self._texts: dict[str, tuple[Any, str]] = {}
        self._given: dict[int, tuple[Any, str]] = {}  # id -> (value, text) encoded by to_payload itself
        self._models: tuple[dict[str, str], dict[str, str]] | None = None  # (source copy, value handed out)
        self._classes: dict[type, tuple[str, tuple[str, ...]]] = {}  # record class -> (its name, its fields)

    def history(self, items: list[Message]) -> list[dict[str, Any]]:
        return self._history.encode(items, _message_to, _is)

    def steps(self, items: list[Step]) -> list[dict[str, Any]]:
        return self._steps.encode(items, self._step_dict, _is)

    def _step_dict(self, step: Step) -> dict[str, Any]:
        """``_step_to(step)``, sharing the history's encoding of its message (the same object)."""
        at = None if step.message is None else self._history.index.get(id(step.message))
        if at is None or self._history.sources[at] is not step.message:
            return _step_to(step)
        return {**_step_to(step, with_message=False), "message": self._history.encoded[at]}

    def transitions(self, items: list[TransitionRecord]) -> list[dict[str, Any]]:
        return self._transitions.encode(items, TransitionRecord.to_dict, _is)

    def chat(self, items: list[dict[str, Any]]) -> list[Any]:
        return self._chat.encode(items, _plain, _equal)

    def board(self, records: Iterable[object]) -> list[dict[str, Any]]:
        """``[_record_to(r, checked=False) for r in records]``, with each record class's name and
        fields looked up once per run instead of at every checkpoint."""
        out = []
        for record in records:
            cls = type(record)
            known = self._classes.get(cls)
            if known is None:
                if isinstance(record, BaseModel | type) or not dataclasses.is_dataclass(record):
                    out.append(_record_to(record, checked=False))  # a typed reply, or its error
                    continue
                names = tuple(f.name for f in dataclasses.fields(record))
                known = self._classes[cls] = (f"{cls.__module__}:{cls.__qualname__}", names)
            where, names = known
            flat = {name: getattr(record, name) for name in names}
            for value in flat.values():
                if type(value) not in _ATOMS:  # asdict deep-copies nested values (a plain record needs no copy)
                    flat = dataclasses.asdict(record)  # type: ignore[call-overload]
                    break
            out.append({"type": where, "fields": flat})
        return out

    def models(self, models: Mapping[str, str]) -> dict[str, str]:
        """``dict(models)``, the very object handed out last time while the assignment is unchanged
        (its text is then reused, and a store's identity delta leaves it out)."""
        kept = self._models
        if kept is not None and kept[0] == models and all(type(v) is str for v in models.values()):
            return kept[1]  # str -> str: equal mappings have the same JSON
        value = dict(models)
        self._models = (dict(models), value)
        return value

    def encoded(self, value: Any, text: str) -> None:
        """Remember ``text`` as the encoding of ``value`` (an object of this payload, encoded while
        it was being checked), so :meth:`json` does not encode it again."""
        self._given[id(value)] = (value, text)

    def dump(self, value: Any) -> str:
        """Canonical JSON of ``value`` (:func:`canonical_json`'s settings)."""
        return self._dump(value)

    def json(self, payload: Mapping[str, Any]) -> str:
        """``canonical_json(payload)`` for a payload built from this encoder's last lists, without
        encoding their items again (any other value is encoded as usual).

        Raises:
            TypeError, ValueError: a value is not JSON (as :func:`canonical_json`).
        """
        return self.text(payload).json()

    def text(self, payload: Mapping[str, Any]) -> PayloadText:
        """:meth:`json`'s text in parts, not joined: each value's text, and each item's for the
        run's growing lists (a store joins them only if it needs the whole text; a delta takes
        the new items' texts).

        Raises:
            TypeError, ValueError: a value is not JSON (as :func:`canonical_json`).
        """
        lists = {
            id(x.last): x for x in (self._history, self._steps, self._transitions, self._chat) if x.last is not None
        }
        given, self._given = self._given, {}
        texts = self._texts
        models = self._model_value()
        keys = tuple(payload)
        order = self._orders.get(keys)
        if order is None:  # the keys' order, once per set of keys
            order = self._orders[keys] = tuple(sorted(keys))
        parts: list[tuple[str, str | ItemTexts]] = []
        for key in order:
            value = payload[key]
            known = texts.get(key)
            if known is not None and known[0] is value and (type(value) in _ATOMS or value is models):
                parts.append((key, known[1]))
                continue
            cached = lists.get(id(value))
            if cached is not None and cached.last is value:
                parts.append((key, cached.texts(self._dump_tree)))
                continue
            pre = given.get(id(value))
            text = pre[1] if pre is not None and pre[0] is value else _atom_text(value)
            if text is None:
                text = self._dump(value)
            texts[key] = (value, text)
            parts.append((key, text))
        return PayloadText(tuple(parts))

    def _model_value(self) -> Any:
        return None if self._models is None else self._models[1]


def _atom_text(value: Any) -> str | None:
    """The canonical JSON of a ``str``, ``int``, ``bool``, ``None`` or finite ``float`` (exact
    types), written as the standard C encoder writes it, without its per-call set-up (about 1 µs,
    several times the work for a state's name or a step count); ``None`` for any other value."""
    kind = type(value)
    if kind is str:
        return _encode_str(value)
    if kind is int:
        return int.__repr__(value)
    if value is None:
        return "null"
    if kind is bool:
        return "true" if value else "false"
    if kind is float and math.isfinite(value):
        return float.__repr__(value)
    return None


_encode_str = json.encoder.encode_basestring  # ensure_ascii=False: the function the C encoder is given


def _tree_dumper(settings: json.JSONEncoder, *, circular: bool = False) -> Callable[[Any], str]:
    """``settings.encode`` with one C encoder object made once instead of at every call: the
    per-call set-up was about 40 % of encoding one message. The same C encoder makes
    ``settings.encode``'s text, so the texts (and the errors) are identical.

    Args:
        settings: the encoder whose settings to use.
        circular: check for circular references (any caller's values, e.g. ``vars``), as
            ``settings.encode`` does; without it, only for the trees this module builds itself
            (a message's, a step's, a chat message's encoding: fresh dicts and lists, never circular).
    """
    make = getattr(json.encoder, "c_make_encoder", None)
    if make is None:  # the pure-Python json: no C encoder to keep
        return settings.encode

    def build() -> Any:
        return make(
            {} if circular else None,  # the markers of the containers being encoded
            settings.default,
            json.encoder.encode_basestring,  # ensure_ascii=False
            None,
            settings.key_separator,
            settings.item_separator,
            settings.sort_keys,
            settings.skipkeys,
            settings.allow_nan,
        )

    encoder = build()

    def dump(tree: Any) -> str:
        nonlocal encoder
        if isinstance(tree, str):
            return settings.encode(tree)
        try:
            return "".join(encoder(tree, 0))
        except BaseException:
            # a failed encoding leaves its open containers among the markers: start clean
            if circular:
                encoder = build()
            raise

    return dump


_ATOMS = (str, int, float, bool, type(None))
"""Immutable JSON values: the same object always has the same text."""


def _is(a: object, b: object) -> bool:
    return a is b


def _equal(a: object, b: object) -> bool:
    return a is b or a == b


@dataclass
class RunState:
    """Everything a run has done, and where it stands (see the module docstring).

    Attributes:
        task: the task text.
        view: the name of the view the run executes in (``stateflow`` or ``sf_agent``).
        state: the current state.
        cursor: index of the next output function of ``state`` to run (0 at a transition).
        history, steps, transitions: what the run produced so far.
        vars: the user's variables (JSON values).
        board: the blackboard's records.
        chat: the AutoGen group chat's messages (name, role, content), in order.
        started_at: when the run started (seconds since the epoch).
        models: the model assignment's state -> profile name (to continue with the same models).
        pending: the question a paused run waits on.
        stop_reason, error: how the run ended, once it has.
    """

    task: str
    view: str
    state: str
    cursor: int = 0
    history: History = field(default_factory=History)
    steps: list[Step] = field(default_factory=list)
    transitions: list[TransitionRecord] = field(default_factory=list)
    vars: dict[str, Any] = field(default_factory=dict)
    board: Blackboard = field(default_factory=Blackboard)
    chat: list[dict[str, Any]] = field(default_factory=list)
    started_at: float = 0.0
    models: dict[str, str] = field(default_factory=dict)
    pending: PendingQuestion | None = None
    stop_reason: str = ""
    error: str | None = None

    def to_payload(self, encoder: PayloadEncoder | None = None) -> dict[str, Any]:
        """The state as JSON values (a checkpoint's payload).

        Args:
            encoder: the run's encoder, which encodes each message and step only once across
                successive payloads (the result is the same with or without it).

        Raises:
            ConfigError: a ``vars`` value or a blackboard record is not plain JSON data (named).
        """
        vars = dict(self.vars)
        history = list(self.history)
        if encoder is None:
            _check_vars(vars)
            board = [_record_to(r) for r in self.board]
            models = dict(self.models)
            encoded = (
                [_message_to(m) for m in history],
                [_step_to(s) for s in self.steps],
                [t.to_dict() for t in self.transitions],
                [_plain(m) for m in self.chat],
            )
        else:
            # vars and the board are encoded here, once, as the check that they are JSON; the
            # one-by-one checks only run to name what fails
            try:
                encoder.encoded(vars, encoder.dump(vars))
            except (TypeError, ValueError):
                _check_vars(vars)
                raise
            board = encoder.board(self.board)
            try:
                encoder.encoded(board, encoder.dump(board))
            except (TypeError, ValueError):
                for record in self.board:
                    _record_to(record)  # raises the ConfigError naming the record
                raise
            models = encoder.models(self.models)
            encoded = (
                encoder.history(history),
                encoder.steps(self.steps),
                encoder.transitions(self.transitions),
                encoder.chat(self.chat),
            )
        return {
            "task": self.task,
            "view": self.view,
            "state": self.state,
            "cursor": self.cursor,
            "history": encoded[0],
            "steps": encoded[1],
            "transitions": encoded[2],
            "vars": vars,
            "board": board,
            "chat": encoded[3],
            "started_at": self.started_at,
            "models": models,
            "pending": None if self.pending is None else dataclasses.asdict(self.pending),
            "stop_reason": self.stop_reason,
            "error": self.error,
        }

    @classmethod
    def from_payload(cls, payload: Mapping[str, Any], *, where: str) -> RunState:
        """The state a checkpoint saved.

        Raises:
            CheckpointCorrupt: a field is missing or malformed (``where`` names the checkpoint).
        """
        try:
            board = Blackboard()
            for record in payload["board"]:
                board.put(_record_from(record))
            pending = payload.get("pending")
            state = cls(
                task=str(payload["task"]),
                view=str(payload["view"]),
                state=str(payload["state"]),
                cursor=int(payload["cursor"]),
                history=History([_message_from(m) for m in payload["history"]]),
                steps=[_step_from(s) for s in payload["steps"]],
                transitions=[TransitionRecord(**t) for t in payload["transitions"]],
                vars=dict(payload["vars"]),
                board=board,
                chat=[dict(m) for m in payload["chat"]],
                started_at=float(payload["started_at"]),
                models={str(k): str(v) for k, v in dict(payload.get("models") or {}).items()},
                pending=None if pending is None else PendingQuestion(**pending),
                stop_reason=str(payload.get("stop_reason") or ""),
                error=payload.get("error"),
            )
        except (KeyError, TypeError, ValueError, AttributeError) as err:
            detail = f"missing field {err}" if isinstance(err, KeyError) else str(err)
            raise CheckpointCorrupt(where, f"the run state cannot be read: {detail}") from err
        if state.cursor < 0 or not all(isinstance(m.get("name"), str) for m in state.chat):
            raise CheckpointCorrupt(where, "the run state cannot be read: bad cursor or chat message")
        return state

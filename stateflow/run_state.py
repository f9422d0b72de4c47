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
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from pydantic import BaseModel

from stateflow.blackboard import Blackboard
from stateflow.errors import CheckpointCorrupt, ConfigError
from stateflow.messages import History, Kind, Message, Usage
from stateflow.trace import Step, TransitionRecord

__all__ = ["PendingQuestion", "RunState"]


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
    return None if u is None else dataclasses.asdict(u)


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
        "meta": _plain(dict(m.meta)),
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


def _step_to(s: Step) -> dict[str, Any]:
    return {
        "index": s.index,
        "state": s.state,
        "output": s.output,
        "message": None if s.message is None else _message_to(s.message),
        "usage": _usage_to(s.usage),
        "latency_s": s.latency_s,
        "detail": _plain(s.detail),
        "started_at": s.started_at,
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
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    return str(value)


def _record_to(record: object) -> dict[str, Any]:
    cls = type(record)
    where = f"{cls.__module__}:{cls.__qualname__}"
    if isinstance(record, BaseModel):  # a typed reply (LLM(schema=...)): its JSON form
        return {"type": where, "fields": record.model_dump(mode="json")}
    if not dataclasses.is_dataclass(record):
        raise ConfigError(f"blackboard record {where} is not a dataclass, so a checkpoint cannot save it")
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

    def to_payload(self) -> dict[str, Any]:
        """The state as JSON values (a checkpoint's payload).

        Raises:
            ConfigError: a ``vars`` value or a blackboard record is not plain JSON data (named).
        """
        for key, value in self.vars.items():
            try:
                json.dumps(value, allow_nan=False)
            except (TypeError, ValueError) as err:
                raise ConfigError(
                    f"vars[{key!r}] cannot be saved in a checkpoint ({err}); a checkpointed run needs JSON vars"
                ) from err
        return {
            "task": self.task,
            "view": self.view,
            "state": self.state,
            "cursor": self.cursor,
            "history": [_message_to(m) for m in self.history],
            "steps": [_step_to(s) for s in self.steps],
            "transitions": [t.to_dict() for t in self.transitions],
            "vars": dict(self.vars),
            "board": [_record_to(r) for r in self.board],
            "chat": [_plain(m) for m in self.chat],
            "started_at": self.started_at,
            "models": dict(self.models),
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

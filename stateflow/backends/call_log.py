"""Every model call of a run, kept in order; and a run that answers its first calls from such a log.

A :class:`CallLog` given to :func:`stateflow.run` (``calls=``) receives one :class:`RecordedCall`
per model call: the state that asked, the profile, the reply (text, or the message dict of a
native tool call), its accounting and a hash of the request's messages. This is what a benchmark
record keeps so that an episode can be replayed up to a state and continued from there with
other models (``stateflow whatif``).

A log built with ``CallLog(replay=calls)`` also *answers* calls: while recorded calls remain,
the next call is answered with the next recorded reply and no model is asked. Each answered
call must come from the same state and carry the same request hash as when it was recorded;
anything else means the replay no longer follows the recording (another environment, another
flow) and raises :class:`ReplayDiverged` instead of feeding a reply to the wrong question.

>>> log = CallLog(replay=[RecordedCall("Solve", "local", "Action: submit", {"prompt_tokens": 5}, "k1")])
>>> log.replaying, log.take("Solve", "k1").reply, log.replaying
(True, 'Action: submit', False)
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from stateflow.backends.cassette import request_key
from stateflow.errors import StateFlowError

__all__ = ["CallLog", "RecordedCall", "ReplayDiverged", "messages_key"]


class ReplayDiverged(StateFlowError):
    """A replayed run asked a question its recording did not ask at that point.

    Attributes:
        index: the call's position in the recording (0-based).
        expected: what the recording holds there (``state`` and request hash).
        got: what the replayed run asked (``state`` and request hash).
    """

    def __init__(self, index: int, expected: str, got: str):
        self.index = index
        self.expected = expected
        self.got = got
        super().__init__(
            f"replay diverged at model call {index}: the recording asked {expected}, the replay asked {got} "
            "(the environment or the flow no longer gives the recorded observations)"
        )


def messages_key(system: str | None, messages: Iterable[Mapping[str, Any]]) -> str:
    """A hash of what a model is shown: the system message and every message's role, name and content."""
    shown = [{"role": "system", "content": system}] if system else []
    shown.extend(dict(m) for m in messages)
    return request_key({"messages": shown})


@dataclass(frozen=True)
class RecordedCall:
    """One model call.

    Attributes:
        state: the state whose output function (or rule judge) asked.
        profile: the model profile that answered.
        reply: the reply text, or the assistant message dict when it carries native tool calls.
        usage: ``prompt_tokens``, ``completion_tokens``, ``cached_tokens``, ``cost``, ``latency_s``.
        request: :func:`messages_key` of the request.
    """

    state: str
    profile: str
    reply: str | dict[str, Any]
    usage: dict[str, Any]
    request: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], where: str = "") -> RecordedCall:
        """Read a call stored by :meth:`to_dict`.

        Raises:
            StateFlowError: a field is missing or of the wrong type (names ``where``).
        """
        problems = [
            f"{name}: expected {kind.__name__}"
            for name, kind in (("state", str), ("profile", str), ("usage", dict), ("request", str))
            if not isinstance(data.get(name), kind)
        ]
        if not isinstance(data.get("reply"), str | dict):
            problems.append("reply: expected a string or an object")
        if problems:
            raise StateFlowError(f"{where or 'recorded call'}: invalid model call ({'; '.join(problems)})")
        return cls(data["state"], data["profile"], data["reply"], dict(data["usage"]), data["request"])


@dataclass
class CallLog:
    """The model calls of one run (see the module docstring).

    Args:
        replay: recorded calls that answer this run's first calls, in order.

    Attributes:
        calls: every call of this run so far, the replayed ones included (as recorded).
        replayed: how many calls were answered from ``replay``.
    """

    replay: list[RecordedCall] = field(default_factory=list)
    calls: list[RecordedCall] = field(default_factory=list)
    replayed: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def __post_init__(self) -> None:
        self.replay = list(self.replay)

    @property
    def replaying(self) -> bool:
        """Whether the next call is answered from the recording."""
        return self.replayed < len(self.replay)

    def take(self, state: str, request: str) -> RecordedCall:
        """The recorded answer to the next call, asked from ``state`` with request hash ``request``.

        Raises:
            ReplayDiverged: the recording asked from another state, or another question, there.
        """
        with self._lock:
            index = self.replayed
            rec = self.replay[index]
            if rec.state != state or rec.request != request:
                raise ReplayDiverged(
                    index,
                    f"from {rec.state!r} (request {rec.request[:12]})",
                    f"from {state!r} (request {request[:12]})",
                )
            self.replayed += 1
            self.calls.append(rec)
            return rec

    def add(self, call: RecordedCall) -> None:
        """Keep a call that a model answered."""
        with self._lock:
            self.calls.append(call)

    def to_list(self) -> list[dict[str, Any]]:
        """Every call as plain values (what a result record stores)."""
        return [c.to_dict() for c in self.calls]

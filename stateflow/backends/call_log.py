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

Calls made at once (the LLM branches of a :class:`~stateflow.parallel.Parallel`) reach the log in
whatever order their threads run, so a call is matched to its recording by who asked (the
agent's name), not by position alone: among the recorded calls of the current state not yet
replayed, the one with the same asker and request hash answers it.

>>> log = CallLog(replay=[RecordedCall("Solve", "local", "Action: submit", {"prompt_tokens": 5}, "k1")])
>>> log.replaying, log.take("Solve", "k1").reply, log.replaying, log.take("Solve", "k2")
(True, 'Action: submit', False, None)
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
        asker: the name of the agent that asked ("" in records made before it was kept; such
            calls are matched by state and request only).
    """

    state: str
    profile: str
    reply: str | dict[str, Any]
    usage: dict[str, Any]
    request: str
    asker: str = ""

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
        if not isinstance(data.get("asker", ""), str):
            problems.append("asker: expected str")
        if problems:
            raise StateFlowError(f"{where or 'recorded call'}: invalid model call ({'; '.join(problems)})")
        return cls(
            data["state"], data["profile"], data["reply"], dict(data["usage"]), data["request"], data.get("asker", "")
        )


@dataclass
class CallLog:
    """The model calls of one run (see the module docstring).

    Args:
        replay: recorded calls that answer this run's first calls.

    Attributes:
        calls: every call of this run so far, the replayed ones included (as recorded).
        replayed: how many calls were answered from ``replay``.
    """

    replay: list[RecordedCall] = field(default_factory=list)
    calls: list[RecordedCall] = field(default_factory=list)
    replayed: int = 0
    _taken: set[int] = field(default_factory=set, repr=False, compare=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def __post_init__(self) -> None:
        self.replay = list(self.replay)

    @property
    def replaying(self) -> bool:
        """Whether recorded calls remain to answer this run's next calls."""
        return self.replayed < len(self.replay)

    def take(self, state: str, request: str, asker: str = "") -> RecordedCall | None:
        """The recorded answer to a call asked from ``state`` by ``asker`` with request hash
        ``request``, or ``None`` once every recorded call has been replayed.

        Raises:
            ReplayDiverged: no recorded call of the current state (the first one not yet
                replayed) was asked by ``asker`` with this request.
        """
        with self._lock:
            first = next((i for i in range(len(self.replay)) if i not in self._taken), None)
            if first is None:
                return None
            current = self.replay[first].state
            for i in range(first, len(self.replay)):
                rec = self.replay[i]
                if rec.state != current:
                    break  # calls made at once share their state: look no further
                if i in self._taken:
                    continue
                if rec.state == state and rec.request == request and (not rec.asker or rec.asker == asker):
                    self._taken.add(i)
                    self.replayed += 1
                    self.calls.append(rec)
                    return rec
            rec = self.replay[first]
            raise ReplayDiverged(
                first,
                f"from {rec.state!r} (request {rec.request[:12]})",
                f"from {state!r} (request {request[:12]})",
            )

    def add(self, call: RecordedCall) -> None:
        """Keep a call that a model answered."""
        with self._lock:
            self.calls.append(call)

    def to_list(self) -> list[dict[str, Any]]:
        """Every call as plain values (what a result record stores)."""
        return [c.to_dict() for c in self.calls]

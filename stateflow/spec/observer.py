"""A spec watching a run: every state the run enters is read by the spec's automaton (issue 60).

:class:`SpecObserver` is an ``on_event`` sink for :func:`stateflow.run` (and everything built on
it: :func:`stateflow.live.stream`, the servers). It reads each
:class:`~stateflow.events.StateEntered` with the spec's automaton, as
:func:`~stateflow.spec.verify.verify` reads a flow's paths, and records a :class:`SpecViolated`
when the run enters a state the spec does not allow there, or ends (in a final state) where the
spec may not stop. With ``stop=True`` the first violation ends the run: the observer raises
:class:`~stateflow.spec.errors.SpecViolationError`, which the run re-raises with its partial
result (or records as ``stop_reason="error"`` with ``raise_errors=False``). Every event, and each
violation, is passed on to ``forward`` (another sink: a stream, a log).

Example (the events a run would emit, fed by hand):
    >>> from stateflow.events import StateEntered
    >>> from stateflow.spec import AgentSpec
    >>> spec = AgentSpec.from_text("(define plan-first (:states Plan Act End) (:behavior (next Plan (until Act End))))")
    >>> watch = SpecObserver(spec)
    >>> for i, state in enumerate(["Plan", "Act", "Plan"]):
    ...     watch(StateEntered(state, i))
    >>> watch.holds, watch.violations[0].state, watch.violations[0].valid
    (False, 'Plan', ('Act', 'End'))
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from stateflow.events import EventSink, RunFinished, StateEntered
from stateflow.spec.compiled import AgentSpec
from stateflow.spec.errors import SpecViolationError

__all__ = ["SpecObserver", "SpecViolated"]


@dataclass(frozen=True)
class SpecViolated:
    """The run left its spec (shaped like the events of :mod:`stateflow.events`).

    Attributes:
        spec: the spec's name.
        state: the state entered (or ended in) that broke it.
        visit: how many states the run had entered before it.
        valid: the spec symbols that were allowed there (empty: the spec required the run to end).
        reason: one sentence.
    """

    spec: str
    state: str
    visit: int
    valid: tuple[str, ...]
    reason: str
    type: str = field(default="spec_violated")

    def to_dict(self) -> dict[str, Any]:
        return {
            "type": self.type,
            "spec": self.spec,
            "state": self.state,
            "visit": self.visit,
            "valid": list(self.valid),
            "reason": self.reason,
        }


class SpecObserver:
    """Reads a run's states with a spec's automaton; an ``on_event`` sink.

    Args:
        spec: the compiled spec.
        alphabet: ``state -> spec symbol`` (``None`` hides the state), as for
            :func:`~stateflow.spec.verify.verify`; other states are read under their own name,
            and a state the spec does not declare is a violation.
        stop: raise :class:`~stateflow.spec.errors.SpecViolationError` at the first violation,
            which ends the run.
        forward: a sink that receives every event, then each :class:`SpecViolated`.

    Attributes:
        violations: what was recorded, in order (reading stops at the first: the automaton has
            no state after it).
        path: the states entered.
    """

    def __init__(
        self,
        spec: AgentSpec,
        *,
        alphabet: Mapping[str, str | None] | None = None,
        stop: bool = False,
        forward: EventSink | None = None,
    ):
        self.spec = spec
        self.alphabet = dict(alphabet or {})
        self.stop = stop
        self.forward = forward
        self.violations: list[SpecViolated] = []
        self.path: list[str] = []
        self._q: int | None = spec.dfa.start

    @property
    def holds(self) -> bool:
        """No violation so far."""
        return not self.violations

    def __call__(self, event: Any) -> None:
        if self.forward is not None:
            self.forward(event)
        if isinstance(event, StateEntered):
            self._entered(event.state, event.visit)
        elif isinstance(event, RunFinished) and event.result.stop_reason == "final":
            self._finished(event.result.exit_state)

    def _finished(self, exit_state: str) -> None:
        if self._q is None or self.spec.dfa.may_stop(self._q):
            return
        state = self.path[-1] if self.path else exit_state
        valid = self.spec.dfa.next_states(self._q)
        self._violated(state, len(self.path) - 1, valid, f"the run ended in {state!r}, where the spec may not stop")

    def _entered(self, state: str, visit: int) -> None:
        self.path.append(state)
        if self._q is None:
            return
        symbol = self.alphabet.get(state, state)
        if symbol is None:
            return
        valid = self.spec.dfa.next_states(self._q)
        if symbol not in self.spec.spec.state_names:
            self._q = None
            self._violated(state, visit, valid, f"the spec {self.spec.name!r} does not declare {symbol!r}")
            return
        nxt = self.spec.dfa.step(self._q, symbol)
        if nxt is None:
            self._q = None
            allowed = ", ".join(valid) or "nothing (the run should have ended)"
            self._violated(state, visit, valid, f"the spec does not allow {symbol!r} here; allowed: {allowed}")
            return
        self._q = nxt

    def _violated(self, state: str, visit: int, valid: tuple[str, ...], reason: str) -> None:
        seen = SpecViolated(self.spec.name, state, visit, valid, reason)
        self.violations.append(seen)
        if self.forward is not None:
            self.forward(seen)  # type: ignore[arg-type]
        if self.stop:
            raise SpecViolationError(
                f"spec {self.spec.name!r} violated at state {state!r} (visit {visit + 1}): {reason}",
                dfa_state=-1,
                valid=valid,
                detail=" -> ".join(self.path),
            )

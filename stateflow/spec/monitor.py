"""The decoding monitor: keeps a black-box model on the spec while it generates.

One run of :meth:`DecodingMonitor.run`:

1. At the start of a model turn the transcript ends at a line start; the monitor appends the
   *cue*, the longest common prefix of the valid next states' texts, and asks the model to
   continue, in chunks of ``chunk_tokens`` with the env-input texts (line-anchored) as stop
   sequences. If the only valid next state is env-input, no model call is made.
2. The turn's text is split on state texts (line starts, longest match) and walked through the
   automaton; complete lines are checked after every chunk, so a violation stops generation
   early.
3. At the first violation (a state not valid there, text before any state text, a value outside
   a state's allowed values) everything from that point is discarded and counted as wasted.
4. Correction: append the common prefix of the valid texts and resume; if it is empty, the
   model is asked to choose among the valid texts (a *forced choice*). A content value is
   never replaced by a default: the model must pick one of the allowed values itself.
5. When the model stops, an env-input state valid at that point is entered (the environment
   callback supplies its content); otherwise the run ends if the behaviour may stop there, and
   a too-early stop is a violation that gets corrected.
6. The run ends when the automaton must stop, may stop and the model/environment ended, or a
   budget is exhausted (:class:`SpecViolationError` for corrections).

The trace counts violations, corrections, forced choices, model calls, tokens and wasted tokens
(estimated as the discarded share of the generated characters times the completion tokens).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from stateflow.errors import StateFlowError
from stateflow.spec.compiled import AgentSpec, common_prefix
from stateflow.spec.completer import Completer, Completion
from stateflow.spec.errors import SpecViolationError
from stateflow.spec.grammar import DEFAULT_MAX_CONTENT, gbnf_literal, turn_grammar

__all__ = ["DecodingMonitor", "EnvInput", "MonitorTrace", "SpecStep", "Violation"]

#: ``env(state_name, steps_so_far) -> content``; ``None`` ends the run (only where it may stop).
EnvInput = Callable[[str, tuple["SpecStep", ...]], "str | None"]


@dataclass(frozen=True)
class SpecStep:
    """A completed step: a declared state and its content.

    ``source`` is ``llm`` (generated), ``env`` (from the environment) or ``forced`` (the state or
    value came from a forced choice).
    """

    state: str
    content: str
    source: str = "llm"


@dataclass(frozen=True)
class Violation:
    """One violation found in the model's output.

    Attributes:
        kind: ``transition`` (state not valid there), ``preamble`` (text before any state
            text), ``constraint`` (value not allowed), ``early-stop`` (stopped where the
            behaviour may not end), ``bad-choice`` (a forced choice matched no option).
        dfa_state: automaton state where it happened.
        detail: human-readable description.
        discarded: the text thrown away.
    """

    kind: str
    dfa_state: int
    detail: str
    discarded: str = ""


@dataclass
class MonitorTrace:
    """What a monitored run produced and what it cost."""

    steps: list[SpecStep] = field(default_factory=list)
    violations: list[Violation] = field(default_factory=list)
    corrections: int = 0
    forced_choices: int = 0
    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    wasted_tokens: int = 0
    generated_chars: int = 0
    transcript: str = ""
    dfa_state: int = 0
    stop_reason: str = ""
    cue: str = field(default="", repr=False)  # text the next model turn must start with

    @property
    def trace(self) -> list[str]:
        """The declared states visited."""
        return [s.state for s in self.steps]

    def to_dict(self) -> dict[str, Any]:
        return {
            "steps": [{"state": s.state, "content": s.content, "source": s.source} for s in self.steps],
            "violations": [{"kind": v.kind, "dfa_state": v.dfa_state, "detail": v.detail} for v in self.violations],
            "corrections": self.corrections,
            "forced_choices": self.forced_choices,
            "calls": self.calls,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "wasted_tokens": self.wasted_tokens,
            "stop_reason": self.stop_reason,
        }


@dataclass
class _Walk:
    """Result of walking a turn's text through the automaton."""

    q: int
    steps: list[SpecStep]
    cut: int | None = None  # offset where the first violation starts
    violation: Violation | None = None
    resume_q: int = 0  # automaton state for the correction
    choices: tuple[str, ...] = ()  # constraint violation: the allowed values
    env_state: str | None = None  # the model wrote an env-input text: enter it


class DecodingMonitor:
    """Drives a :class:`~stateflow.spec.completer.Completer` along an :class:`AgentSpec`.

    Args:
        spec: the compiled spec.
        completer: the model.
        chunk_tokens: ``max_tokens`` per call; the output is checked after each chunk.
        max_chunks_per_turn: a turn still unfinished after this many chunks is ended there.
        max_calls: bound on model calls per run (the run ends with ``stop_reason="max_calls"``).
        max_corrections: bound on corrections per run (then :class:`SpecViolationError`).
        use_grammar: send a per-turn GBNF grammar (token-level enforcement; local models). The
            grammar describes a whole turn, so such a call may use ``chunk_tokens *
            max_chunks_per_turn`` tokens; continuations after a correction run without it.
        max_content: bound on a free-content line in grammars.

    Example:
        >>> from stateflow.spec import library_spec
        >>> from stateflow.spec.completer import ScriptedCompleter
        >>> model = ScriptedCompleter([" 2+2 is 4.\\nAnswer: 4"])
        >>> mon = DecodingMonitor(library_spec("chain-of-thought"), model)
        >>> mon.run([{"role": "user", "content": "2+2?"}], lambda s, steps: "What is 2+2?").trace
        ['Question', 'Thought', 'Answer']
    """

    def __init__(
        self,
        spec: AgentSpec,
        completer: Completer,
        *,
        chunk_tokens: int = 128,
        max_chunks_per_turn: int = 8,
        max_calls: int = 60,
        max_corrections: int = 10,
        use_grammar: bool = False,
        max_content: int = DEFAULT_MAX_CONTENT,
    ):
        if chunk_tokens < 1 or max_calls < 1:
            raise ValueError("chunk_tokens and max_calls must be >= 1")
        self.spec = spec
        self.completer = completer
        self.chunk_tokens = chunk_tokens
        self.max_chunks_per_turn = max_chunks_per_turn
        self.max_calls = max_calls
        self.max_corrections = max_corrections
        self.use_grammar = use_grammar
        self.max_content = max_content
        self._env_stops = tuple("\n" + spec.state(n).text for n in spec.spec.env_states)
        self._texts = frozenset(d.text for d in spec.spec.states.values())

    # -- public ---------------------------------------------------------------------------------

    def run(self, messages: Sequence[dict[str, Any]], env: EnvInput) -> MonitorTrace:
        """Run one episode.

        Args:
            messages: the prompt (system message, instructions, few-shot examples, task); the
                monitor adds the transcript as a trailing assistant message.
            env: supplies env-input states' content.

        Raises:
            SpecViolationError: more than ``max_corrections`` corrections were needed.
            StateFlowError: the environment ended the run where the behaviour may not stop.
        """
        tr = MonitorTrace(dfa_state=self.spec.dfa.start)
        dfa = self.spec.dfa
        while True:
            q = tr.dfa_state
            if dfa.must_stop(q):
                tr.stop_reason = "must_stop"
                break
            if tr.calls >= self.max_calls:
                tr.stop_reason = "max_calls"
                break
            valid = dfa.next_states(q)
            llm_valid = [n for n in valid if not self.spec.state(n).env_input]
            if not llm_valid:
                if not self._enter_env(tr, valid[0], env):
                    break
                continue
            ended = self._model_turn(tr, list(messages), env)
            if ended:
                break
        return tr

    # -- environment ----------------------------------------------------------------------------

    def _enter_env(self, tr: MonitorTrace, name: str, env: EnvInput) -> bool:
        q = tr.dfa_state
        content = env(name, tuple(tr.steps))
        if content is None:
            if not self.spec.dfa.may_stop(q):
                raise StateFlowError(
                    f"the environment ended the run at {name!r} but the behaviour may not stop here; "
                    f"valid next states: {', '.join(self.spec.dfa.next_states(q))}"
                )
            tr.stop_reason = "env_ended"
            return False
        nxt = self.spec.dfa.step(q, name)
        assert nxt is not None
        tr.steps.append(SpecStep(name, content.strip(), "env"))
        tr.transcript += f"{self.spec.state(name).text} {content.strip()}\n"
        tr.dfa_state = nxt
        return True

    # -- one model turn -------------------------------------------------------------------------

    def _model_turn(self, tr: MonitorTrace, messages: list[dict[str, Any]], env: EnvInput) -> bool:
        """Generate until the model stops (or hits an env-input text); returns True if the run ended."""
        q0 = tr.dfa_state
        turn = "" if self.use_grammar else (tr.cue or self.spec.correction_prefix(q0))
        tr.cue = ""
        chunks = 0
        need_call = True
        final = False
        stop_sequence: str | None = None
        while True:
            if need_call:
                comp = self._call(tr, messages, tr.transcript + turn, q0, turn)
                turn += self._join(turn, comp.text)
                chunks += 1
                stop_sequence = comp.stop_sequence
                final = comp.finish_reason != "length" or chunks >= self.max_chunks_per_turn
                final = final or tr.calls >= self.max_calls
            need_call = True
            walk = self._walk(turn, q0, final)
            if walk.violation is not None:
                turn = self._discard(tr, turn, walk)
                fix = self._correct(tr, messages, turn, walk)
                turn += fix
                chunks = 0
                if not fix and self.spec.dfa.must_stop(walk.resume_q):
                    need_call, final = False, True  # junk after the end: truncation was enough
                    continue
                if self._walk(turn, q0, True).env_state is not None:
                    need_call = False  # the correction leads to an env-input state: enter it
                    final = True
                    continue
                if tr.calls >= self.max_calls:
                    return self._commit_partial(tr, turn, q0)
                continue
            if walk.env_state is not None:
                env_at = self._env_marker_offset(turn)
                self._discard_text(tr, turn[env_at + len(self.spec.state(walk.env_state).text) :])
                self._commit(tr, turn[:env_at], walk)
                return not self._enter_env(tr, walk.env_state, env)
            if not final:
                continue
            self._commit(tr, turn, walk)
            return self._turn_ended(tr, walk.q, stop_sequence, messages, env)

    def _turn_ended(
        self, tr: MonitorTrace, q: int, stop_sequence: str | None, messages: list[dict[str, Any]], env: EnvInput
    ) -> bool:
        dfa = self.spec.dfa
        env_valid = [n for n in dfa.next_states(q) if self.spec.state(n).env_input]
        if stop_sequence is not None:
            name = self._env_by_stop(stop_sequence)
            if name in env_valid:
                return not self._enter_env(tr, name, env)
        if env_valid:
            # Servers rarely say which stop sequence ended the text; an env-input state is valid
            # here, so the model stopped for it (preferred over ending the run).
            return not self._enter_env(tr, env_valid[0], env)
        if dfa.may_stop(q):
            tr.stop_reason = "must_stop" if dfa.must_stop(q) else "model_ended"
            return True
        # stopped where the behaviour may not end: a violation, corrected by the next turn's cue
        self._violation(tr, Violation("early-stop", q, f"model stopped after {tr.trace[-1:]}; the run must go on"))
        tr.corrections += 1
        self._check_budget(tr, q)
        if not self.use_grammar and not self.spec.correction_prefix(q):
            names = list(dfa.next_states(q))
            tr.cue = self._forced(tr, messages, "", self.spec.texts(names), q)
        return False

    def _join(self, turn: str, text: str) -> str:
        """The continuation to append. Chat models that cannot continue a message sometimes
        answer a cue such as ``Thought:`` by starting a new step (``Action: ...``) on the same
        line; put that step on its own line so it is split and checked like any other."""
        last_line = turn[turn.rfind("\n") + 1 :]
        if last_line and last_line in self._texts:
            stripped = text.lstrip()
            first = self.spec.segmenter.split(stripped)[:1]
            if first and first[0].state is not None and first[0].start == 0:
                return "\n" + stripped
        return text

    def _call(self, tr: MonitorTrace, messages: list[dict[str, Any]], prefix: str, q0: int, turn: str) -> Completion:
        msgs = list(messages)
        if prefix:
            msgs.append({"role": "assistant", "content": prefix})
        grammar = None
        budget = self.chunk_tokens
        if self.use_grammar and turn == "":
            # the grammar covers the whole turn, so the output cannot go wrong mid-way: generate
            # the turn in one call (chunking only exists to catch violations early)
            grammar = turn_grammar(self.spec, q0, max_content=self.max_content)
            budget = self.chunk_tokens * self.max_chunks_per_turn
        comp = self.completer.complete(msgs, stop=self._env_stops, max_tokens=budget, grammar=grammar)
        tr.calls += 1
        tr.prompt_tokens += comp.prompt_tokens
        tr.completion_tokens += comp.completion_tokens
        tr.generated_chars += len(comp.text)
        return comp

    # -- checking -------------------------------------------------------------------------------

    def _walk(self, turn: str, q0: int, final: bool) -> _Walk:
        view = turn
        if not final:
            # check complete lines, plus an unfinished last line whose state text is settled
            nl = turn.rfind("\n") + 1
            if self.spec.segmenter.settled_marker(turn[nl:]) is None:
                view = turn[:nl]
        segs = self.spec.segmenter.split(view)
        dfa = self.spec.dfa
        q = q0
        steps: list[SpecStep] = []
        for i, seg in enumerate(segs):
            if seg.state is None:
                return _Walk(
                    q,
                    steps,
                    seg.start,
                    Violation("preamble", q, f"text before any state text: {seg.content[:60]!r}"),
                    q,
                )
            nxt = dfa.step(q, seg.state)
            if nxt is None:
                valid = ", ".join(dfa.next_states(q)) or "(none: the run must end)"
                v = Violation("transition", q, f"{seg.state} is not valid here; valid: {valid}")
                return _Walk(q, steps, seg.start, v, q)
            decl = self.spec.state(seg.state)
            if decl.env_input:
                w = _Walk(q, steps)
                w.env_state = seg.state
                return w
            complete = final or i < len(segs) - 1
            if complete and decl.choices and seg.content not in decl.choices:
                v = Violation(
                    "constraint", q, f"{seg.state} content {seg.content[:60]!r} is not one of {list(decl.choices)}"
                )
                return _Walk(q, steps, seg.content_start, v, nxt, decl.choices)
            if complete:
                steps.append(SpecStep(seg.state, seg.content))
            q = nxt
        return _Walk(q, steps)

    def _env_marker_offset(self, turn: str) -> int:
        for seg in self.spec.segmenter.split(turn):
            if seg.state is not None and self.spec.state(seg.state).env_input:
                return seg.start
        return len(turn)

    def _env_by_stop(self, stop: str) -> str | None:
        for name in self.spec.spec.env_states:
            if stop.strip() == self.spec.state(name).text:
                return name
        return None

    # -- violations and corrections -------------------------------------------------------------

    def _violation(self, tr: MonitorTrace, v: Violation) -> None:
        tr.violations.append(v)

    def _discard_text(self, tr: MonitorTrace, text: str) -> None:
        if not text:
            return
        ratio = tr.completion_tokens / tr.generated_chars if tr.generated_chars else 0.0
        tr.wasted_tokens += round(len(text) * ratio)

    def _discard(self, tr: MonitorTrace, turn: str, walk: _Walk) -> str:
        assert walk.violation is not None and walk.cut is not None
        dropped = turn[walk.cut :]
        self._violation(tr, Violation(walk.violation.kind, walk.violation.dfa_state, walk.violation.detail, dropped))
        self._discard_text(tr, dropped)
        return turn[: walk.cut]

    def _check_budget(self, tr: MonitorTrace, q: int) -> None:
        if tr.corrections > self.max_corrections:
            last = tr.violations[-1].detail if tr.violations else ""
            raise SpecViolationError(
                f"gave up after {tr.corrections} corrections at automaton state {q}: {last}",
                dfa_state=q,
                valid=self.spec.dfa.next_states(q),
                detail=last,
            )

    def _correct(self, tr: MonitorTrace, messages: list[dict[str, Any]], turn: str, walk: _Walk) -> str:
        """Text to append after the cut so generation resumes on the spec."""
        tr.corrections += 1
        self._check_budget(tr, walk.resume_q)
        if walk.choices:  # constraint: the content must be one of the values
            prefix = common_prefix(walk.choices)
            if prefix:
                return " " + prefix
            return " " + self._forced(tr, messages, turn, list(walk.choices), walk.resume_q) + "\n"
        q = walk.resume_q
        turn_nl = "\n" if turn and not turn.endswith("\n") else ""
        prefix = self.spec.correction_prefix(q)
        if prefix:
            return turn_nl + prefix
        names = list(self.spec.dfa.next_states(q))
        if not names:
            return ""
        texts = self.spec.texts(names)
        chosen = self._forced(tr, messages, turn + turn_nl, texts, q)
        return turn_nl + chosen

    def _forced(self, tr: MonitorTrace, messages: list[dict[str, Any]], turn: str, options: list[str], q: int) -> str:
        """Ask the model to pick one option; the reply is matched by longest common prefix."""
        tr.forced_choices += 1
        listing = "\n".join(options)
        ask = [
            *messages,
            {"role": "assistant", "content": tr.transcript + turn} if (tr.transcript + turn) else None,
            {"role": "user", "content": f"Continue with exactly one of these; reply with it only:\n{listing}"},
        ]
        msgs = [m for m in ask if m is not None]
        grammar = "root ::= " + " | ".join(gbnf_literal(o) for o in options) if self.use_grammar else None
        while True:
            comp = self.completer.complete(msgs, stop=("\n",), max_tokens=16, grammar=grammar)
            tr.calls += 1
            tr.prompt_tokens += comp.prompt_tokens
            tr.completion_tokens += comp.completion_tokens
            tr.generated_chars += len(comp.text)
            reply = comp.text.strip()
            scores = [len(common_prefix([reply, o])) for o in options]
            best = max(scores)
            if best > 0 and scores.count(best) == 1:
                return options[scores.index(best)]
            self._violation(tr, Violation("bad-choice", q, f"reply {reply[:40]!r} picks none of {options}", comp.text))
            tr.corrections += 1
            self._check_budget(tr, q)
            if tr.calls >= self.max_calls:
                raise SpecViolationError(
                    f"model call budget exhausted during a forced choice among {options}",
                    dfa_state=q,
                    valid=self.spec.dfa.next_states(q),
                    detail=reply,
                )

    # -- committing -----------------------------------------------------------------------------

    def _commit(self, tr: MonitorTrace, turn: str, walk: _Walk) -> None:
        tr.steps.extend(walk.steps)
        tr.dfa_state = walk.q
        text = turn if turn.endswith("\n") or not turn else turn + "\n"
        tr.transcript += text

    def _commit_partial(self, tr: MonitorTrace, turn: str, q0: int) -> bool:
        walk = self._walk(turn, q0, True)
        if walk.violation is None:
            self._commit(tr, turn, walk)
        tr.stop_reason = "max_calls"
        return True

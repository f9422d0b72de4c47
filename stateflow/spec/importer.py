"""Import an agent spec as a runnable StateFlow :class:`~stateflow.flow.Flow`.

Mapping:

* every declared state becomes a StateFlow state whose outputs are ``Prompt(cue)`` followed by
  ``LLM(...)`` (LLM states: the model writes the state's line, cued by the state's text,
  stopping at any other state's text; for grammar-capable providers a GBNF grammar fixes the
  label and bounds the content or restricts it to the allowed values) or ``Tool(handler)``
  (env-input states: the caller's handler supplies the content: a tool, the environment, a user);
* an extra final state (``Done``, renamed if a declared state has that name) ends the run;
* δ follows the automaton. The run carries the automaton state implicitly: it is recomputed
  from the history (one LLM or tool message per state entry, in order), so it is exact in both
  views and across retries. When several next states are valid, an LLM judge (the core's
  :class:`~stateflow.conditions.Judge`, one per distinct set of options) asks the model which
  comes next; when one is valid it is taken without a call;
* an entry that writes another state's step, or a value outside the state's allowed values, is
  a violation: the state is entered again (the invalid entry does not count for the automaton),
  at most ``max_retries`` times in a row, then :class:`~stateflow.spec.errors.SpecViolationError`
  ends the run. Values are never coerced; violations are listed in the run's :class:`SpecRun`
  record (``result.board.get(SpecRun).violations``), never in the user's ``vars``;
* an env-input handler returning ``ToolResult(..., meta={"done": True})`` ends the run where
  the behaviour may stop.

Every state can use its own model: the run's model assignment maps declared state names to
profiles, as for any flow.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from stateflow.conditions import Condition, Judge
from stateflow.context import Context
from stateflow.flow import Flow, State, Transition
from stateflow.messages import Kind
from stateflow.outputs import LLM, Prompt, Tool, ToolResult
from stateflow.spec.compiled import AgentSpec
from stateflow.spec.errors import SpecError, SpecViolationError
from stateflow.spec.grammar import DEFAULT_MAX_CONTENT, line_grammar

__all__ = ["EnvHandler", "SpecFlow", "SpecRun", "environment_step", "spec_to_flow", "task_input"]

EnvHandler = Callable[[Context], "ToolResult | str"]
_END_CHOICE = "end"


@dataclass
class SpecRun:
    """What an imported spec keeps during one run, on the run's blackboard (``ctx.board``).

    Attributes:
        violations: every invalid entry, in order (the state was entered again after each).
        fallbacks: every judge answer that named no valid option (the first option was taken).
        retries: invalid entries in a row in the current state.
        dfa_state: the automaton state after the last valid entry.
        decision: the next-state decision for the history length it was made at: the rules
            leaving a state all ask it, and the judge must be consulted only once.
    """

    violations: list[str] = field(default_factory=list)
    fallbacks: list[str] = field(default_factory=list)
    retries: int = 0
    dfa_state: int | None = None
    decision: tuple[int, str] | None = None


def task_input(ctx: Context) -> str:
    """An env-input handler that supplies the run's task text (e.g. for a ``Question`` state)."""
    return ctx.task


def environment_step(
    spec: AgentSpec, make_action: Callable[[Mapping[str, str]], str], render: Callable[[Any], str] = str
) -> EnvHandler:
    """An env-input handler that executes an action in ``ctx.env`` (an ``stateflow.envs.base.Environment``).

    Args:
        spec: the spec (its state texts delimit each state's content in model messages).
        make_action: builds the action string from the latest content of each declared LLM
            state (e.g. ``lambda c: c["Action-Input"] if c["Action"] == "execute" else "submit"``).
        render: the observation as the model sees it (default ``str``, what InterCode's prompts
            show; a benchmark's ``ObservationFormat(...).render`` bound to a statement also fits).

    Returns:
        A handler returning the rendered observation with ``meta`` ``reward``, ``done`` and the
        environment's ``info``; ``done`` ends the run where the behaviour may stop.
    """

    def step(ctx: Context) -> ToolResult:
        if ctx.env is None:
            raise SpecError("environment_step needs run(..., env=ENVIRONMENT); the run has no env")
        latest: dict[str, str] = {}
        for m in ctx.history:
            if m.kind == Kind.LLM and m.state in spec.spec.states:
                latest[m.state] = _content_of(spec, m.state, m.content)
        action = make_action(latest)
        observation, reward, done, info = ctx.env.step(action)
        text = render(observation)
        return ToolResult(text, meta={"reward": reward, "done": bool(done), "info": dict(info or {}), "action": action})

    step.__name__ = "environment_step"
    return step


def _slug(name: str) -> str:
    return re.sub(r"[^a-z0-9_-]+", "-", name.lower())


@dataclass(frozen=True)
class SpecFlow:
    """A spec imported as a flow, with what is needed to interpret its runs.

    Attributes:
        flow: the runnable flow.
        spec: the compiled spec.
        end_state: name of the added final state.
    """

    flow: Flow
    spec: AgentSpec
    end_state: str

    def trace(self, ctx_or_history: Any) -> list[str]:
        """Declared states entered validly so far (from a Context, History or RunResult)."""
        history = getattr(ctx_or_history, "history", ctx_or_history)
        return _valid_trace(self.spec, history)


def _content_of(spec: AgentSpec, state: str, content: str) -> str:
    """The state's content in a model message: text up to the first line that starts with a
    state text (the spec's splitting rule), without a repeated cue."""
    segments = spec.segmenter.split(content.strip())
    if not segments:
        return ""
    first = segments[0]
    if first.state is None or first.state == state:
        return first.content
    return ""  # the message starts with another state's text: no content for this state


def _entry_problem(spec: AgentSpec, state: str, content: str) -> str | None:
    """Why a model message is not a valid entry of ``state`` (``None`` if it is)."""
    segments = spec.segmenter.split(content.strip())
    if segments and segments[0].state not in (None, state):
        other = segments[0].state
        return f"{state}: the model wrote the {other} step ({spec.state(other).text!r}) instead"
    choices = spec.state(state).choices
    value = _content_of(spec, state, content)
    if choices and value not in choices:
        return f"{state}: {value[:80]!r} is not one of {list(choices)}"
    return None


def _valid_trace(spec: AgentSpec, history: Any) -> list[str]:
    trace = []
    for m in history:
        if m.kind not in (Kind.LLM, Kind.TOOL) or m.state not in spec.spec.states:
            continue
        if m.kind == Kind.LLM and _entry_problem(spec, m.state, m.content) is not None:
            continue  # an invalid entry: the state is retried and the entry does not count
        trace.append(m.state)
    return trace


class _Decider:
    """Picks the next declared state (or the end) after each state; one object per flow."""

    def __init__(self, spec: AgentSpec, max_retries: int, judge_profile: str | None, ending: str):
        self.spec = spec
        self.max_retries = max_retries
        self.ending = ending
        self.judges: dict[tuple[str, ...], Judge] = {}
        dfa = spec.dfa
        for q, allow_end in [(q, ending == "judge") for q in range(dfa.num_states)] + [(dfa.start, False)]:
            options = self._options(q, allow_end)
            if len(options) > 1 and options not in self.judges:
                listing = "; ".join(
                    "end (finish now)" if o == _END_CHOICE else f"{_slug(o)} (next line starts {spec.state(o).text!r})"
                    for o in options
                )
                labels = tuple(_END_CHOICE if o == _END_CHOICE else _slug(o) for o in options)
                self.judges[options] = Judge(
                    question=f"Which step comes next? Options: {listing}. Reply with the option's first word only.",
                    choices=labels,
                    profile=judge_profile,
                    name="next-" + "-or-".join(labels),
                )

    def _options(self, q: int, allow_end: bool) -> tuple[str, ...]:
        out = list(self.spec.dfa.next_states(q))
        if allow_end and self.spec.dfa.may_stop(q) and out:
            out.append(_END_CHOICE)
        return tuple(out)

    def decide(self, ctx: Context) -> str:
        run = ctx.board.setdefault(SpecRun)
        if run.decision is not None and run.decision[0] == len(ctx.history):
            return run.decision[1]
        decision = self._decide(ctx, run)
        run.decision = (len(ctx.history), decision)
        return decision

    def _decide(self, ctx: Context, run: SpecRun) -> str:
        spec, dfa = self.spec, self.spec.dfa
        last = ctx.history.last()
        if last is not None and last.kind == Kind.LLM and last.state == ctx.state:
            problem = _entry_problem(spec, ctx.state, last.content)
            if problem is not None:
                run.retries += 1
                retries = run.retries
                run.violations.append(problem)
                if retries > self.max_retries:
                    q = dfa.run(_valid_trace(spec, ctx.history))
                    raise SpecViolationError(
                        f"state {ctx.state!r} got {retries} invalid entries in a row (last: {problem})",
                        dfa_state=-1 if q is None else q,
                        valid=(ctx.state,),
                        detail=last.content[:200],
                    )
                return ctx.state  # retry the state: the invalid entry does not count
        run.retries = 0
        trace = _valid_trace(spec, ctx.history)
        q = dfa.run(trace)
        if q is None:  # cannot happen: transitions only follow the automaton
            raise SpecViolationError(f"run left the spec at {trace}", dfa_state=-1, valid=())
        run.dfa_state = q
        # a run does not end before its first step; with ending="environment" only the
        # environment (or the automaton) ends it
        options = self._options(q, allow_end=bool(trace) and self.ending == "judge")
        if not options:
            return _END_CHOICE
        if last is not None and last.kind == Kind.TOOL and last.meta.get("done"):
            if dfa.may_stop(q):
                return _END_CHOICE
            raise SpecViolationError(
                f"the environment ended the episode after {ctx.state!r}, where the behaviour cannot stop; "
                f"valid next states: {', '.join(dfa.next_states(q))}",
                dfa_state=q,
                valid=dfa.next_states(q),
                detail=last.content[:200],
            )
        if len(options) == 1:
            return options[0]
        judge = self.judges[options]
        assert ctx.ask is not None
        answer = ctx.ask(judge)
        if answer is None:
            run.fallbacks.append(f"judge {judge.name} gave no valid option at automaton state {q}; took {options[0]}")
            return options[0]
        return options[judge.choices.index(answer)]


def spec_to_flow(
    spec: AgentSpec,
    *,
    env_inputs: Mapping[str, EnvHandler],
    instructions: Mapping[str, str] | None = None,
    system_message: str | None = None,
    use_grammar: bool = True,
    max_content: int = DEFAULT_MAX_CONTENT,
    max_transitions: int = 40,
    max_retries: int = 2,
    judge_profile: str | None = None,
    ending: Literal["judge", "environment"] = "judge",
) -> SpecFlow:
    """Build a StateFlow flow that runs ``spec``.

    Args:
        spec: the compiled spec.
        env_inputs: a handler for every env-input state (``ctx -> ToolResult | str``); use
            :func:`task_input` for a state that receives the task.
        instructions: optional extra instruction per declared state (shown before its cue).
        system_message: the flow's system message (default: one generated from the spec).
        use_grammar: give LLM states a content grammar (enforced by llama.cpp/vLLM providers,
            monitor-only elsewhere).
        max_content: bound on free content in grammars.
        max_transitions: the flow's transition bound.
        max_retries: invalid values allowed in a row for a constrained state.
        judge_profile: profile of the next-state judges (default: the state's own model).
        ending: who ends a run where the behaviour may stop but need not: ``"judge"`` (the
            model is asked, "end" being one option) or ``"environment"`` (only an env-input
            handler reporting ``meta["done"]``, e.g. an InterCode ``submit``; no judge call).

    Raises:
        SpecError: an env-input state without a handler, or a handler for an unknown state.
    """
    decl = spec.spec.states
    missing = [n for n in spec.spec.env_states if n not in env_inputs]
    unknown = [n for n in env_inputs if n not in decl or not decl[n].env_input]
    if missing or unknown:
        parts = []
        if missing:
            parts.append(f"no handler for env-input state(s) {missing}")
        if unknown:
            parts.append(f"handlers given for {unknown}, which are not env-input states")
        raise SpecError("; ".join(parts) + f"; env-input states: {list(spec.spec.env_states)}", source=spec.spec.source)
    instructions = dict(instructions or {})
    stops = tuple("\n" + s.text for s in decl.values())
    states: dict[str, State] = {}
    for name, d in decl.items():
        cue = d.text if name not in instructions else f"{instructions[name]}\n{d.text}"
        if d.env_input:
            states[name] = State(name, Prompt(cue), Tool(env_inputs[name], name=f"input_{_slug(name)}"))
        else:
            grammar = line_grammar(spec, name, max_content=max_content) if use_grammar else None
            states[name] = State(name, Prompt(cue), LLM(grammar=grammar, stop=stops), description=d.text)
    end_name = "Done"
    while end_name in decl:
        end_name = "_" + end_name
    end = State(end_name, final=True, description="the behaviour is complete")
    if ending not in ("judge", "environment"):
        raise ValueError(f"ending={ending!r}: valid values are 'judge' and 'environment'")
    decider = _Decider(spec, max_retries, judge_profile, ending)
    judges = tuple(decider.judges.values())

    def goes_to(target: str) -> Condition:
        return Condition(lambda ctx: decider.decide(ctx) == target, f"spec: next is {target}", judges)

    dfa = spec.dfa
    first = dfa.next_states(dfa.start)
    rules: list[Transition] = []
    start_state: State
    if len(first) == 1:
        start_state = states[first[0]]
    else:
        start_name = "Start"
        while start_name in decl or start_name == end_name:
            start_name = "_" + start_name
        start_state = State(start_name, description="chooses the first state")
        for t in first:
            rules.append(Transition(start_state, states[t], when=goes_to(t)))
    for s in decl:
        targets: list[str] = []
        can_end = False
        for _q, edges in dfa.transitions.items():
            r = edges.get(s)
            if r is None:
                continue
            targets += [t for t in dfa.next_states(r) if t not in targets]
            can_end = can_end or dfa.may_stop(r)
        if not spec.state(s).env_input and s not in targets:
            targets.append(s)  # retries after an invalid entry
        for t in sorted(targets, key=list(decl).index):
            rules.append(Transition(states[s], states[t], when=goes_to(t)))
        if can_end:
            rules.append(Transition(states[s], end, when=goes_to(_END_CHOICE)))
    used = {start_state.name, end_name} | {r.target for r in rules}
    all_states = [start_state, *[st for n, st in states.items() if n in used and st is not start_state], end]
    flow = Flow(
        spec.name,
        initial=start_state,
        states=all_states,
        transitions=rules,
        max_transitions=max_transitions,
        system_message=system_message if system_message is not None else _system_message(spec),
        description=f"imported from agent spec {spec.spec.source}",
    )
    return SpecFlow(flow, spec, end_name)


def _system_message(spec: AgentSpec) -> str:
    lines = [
        f"You are an agent working in the '{spec.name}' format, one step at a time. You are given the "
        "label of the next step; reply with exactly one line: that label followed by the step's content. "
        "Never write another step's label. Labels:",
    ]
    for d in spec.spec.states.values():
        role = "given to you" if d.env_input else "written by you"
        extra = f"; its content is one of: {', '.join(d.choices)}" if d.choices else ""
        lines.append(f"- {d.text} ({role}{extra})")
    return "\n".join(lines)

"""One run of a flow on AutoGen: the episode loop.

A run is an AutoGen ``GroupChat`` whose speaker-selection callable *is* the transition function:

* the ``user`` agent opens the chat with the task;
* the ``instructions`` agent emits a state's :class:`~stateflow.outputs.Prompt` texts;
* LLM output functions are served by :class:`~stateflow.state_agent.StateAgent` s (AutoGen
  ``ConversableAgent`` s that call their model through AutoGen's ``OpenAIWrapper``, built by
  :class:`~stateflow.backends.autogen_clients.LLMBackends`);
* the ``environment`` agent runs :class:`~stateflow.outputs.Tool` s, registered in its AutoGen
  function map;
* a user's own ``ConversableAgent`` (:class:`~stateflow.outputs.AutoGenAgent`) speaks through a
  bridge agent that asks it for a reply and runs the tools it requests;
* the ``human`` agent asks a person through AutoGen's human input
  (:class:`~stateflow.outputs.Human`);
* tools given to an ``LLM`` are executed by the ``tools`` agent's function map, called through
  OpenAI function calling or the text protocol of :mod:`stateflow.tool_protocol`;
* after each reply the selector either picks the agent for the state's next output function or,
  when the state is done, evaluates the rules (δ) and moves to the next state; returning ``None``
  ends the chat.

Only the flow ends a run: a final state, the transition bound, or an error. AutoGen's own
termination-message check ("TERMINATE") is switched off, and a chat that AutoGen ends for any
other reason raises :class:`~stateflow.errors.ChatEndedError` naming that reason, the state and
the agent that spoke last, never a silent stop.

Which agents exist and what each sees is decided by a :class:`~stateflow.views.View`.
Everything a run needs lives in one :class:`Episode` object, so any number of runs can share a
process (threads included).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace as dc_replace
from typing import Any, Protocol

from autogen import Agent, ConversableAgent, GroupChat, GroupChatManager
from autogen.io.base import InputStream, IOStream

from stateflow.backends.autogen_clients import LLMBackends
from stateflow.blackboard import Blackboard
from stateflow.conditions import Judge
from stateflow.context import Context
from stateflow.errors import (
    ChatEndedError,
    CheckpointError,
    ConfigError,
    LLMError,
    NoTransitionError,
    RunTimeout,
    StateFlowError,
)
from stateflow.flow import Flow
from stateflow.messages import History, Kind, Message, Usage
from stateflow.outputs import LLM, AutoGenAgent, Human, OutputFunction, Prompt, Tool, ToolResult
from stateflow.profiles import ModelProfile
from stateflow.run_state import PendingQuestion, RunState
from stateflow.state_agent import StateAgent, render_calls, reply_text, usage_totals
from stateflow.tool_protocol import ToolSet, parse_text_action, text_protocol_prompt
from stateflow.trace import RunResult, Step, TransitionRecord
from stateflow.views import ASSISTANT, EXECUTOR, HUMAN, PROMPTER, RESERVED_NAMES, TOOLS, USER, View
from stateflow.vote import Candidate, tally

__all__ = ["Episode", "Journal"]


class Journal(Protocol):
    """Where an episode saves its state after every transition (see :mod:`stateflow.threads`)."""

    def save(self, state: RunState, status: str) -> None:
        """Save ``state`` (encoded at once); ``status`` is ``running``, ``paused`` or ``finished``."""

    def fail(self, error: str) -> None:
        """Mark the run failed: the last state saved stays the one to continue from."""


def _rewritten(message: dict[str, Any], rewrite: Callable[[str], str]) -> dict[str, Any]:
    """A copy of an OpenAI-style message whose text content went through ``rewrite``."""
    content = message.get("content")
    return {**message, "content": rewrite(content)} if isinstance(content, str) else dict(message)


@contextmanager
def _system_message(agent: ConversableAgent, rewrite: Callable[[str], str] | None) -> Iterator[None]:
    """The agent's system message rewritten for one call, restored afterwards (AutoGen prepends
    it to the messages itself, so a vote variant cannot rewrite it in the message list)."""
    if rewrite is None:
        yield
        return
    original = agent.system_message
    agent.update_system_message(rewrite(original))
    try:
        yield
    finally:
        agent.update_system_message(original)


def _clip(text: str, limit: int = 300) -> str:
    """``text`` cut to ``limit`` characters (a result set can be thousands of rows)."""
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _never_terminate(message: dict[str, Any]) -> bool:
    """The chat manager's termination check: the flow, not a message text, ends a run."""
    return False


class _RunStream:
    """Swallows AutoGen's console events (runs report through their trace instead), except that
    it keeps the termination reasons AutoGen gives; input goes to the run's human input (e.g. a
    user's agent with ``human_input_mode="ALWAYS"``), by default the console, never a silent
    empty answer."""

    def __init__(self, human_input: InputStream | None = None):
        self.human_input = human_input
        self.terminations: list[str] = []

    def print(self, *objects: Any, sep: str = " ", end: str = "\n", flush: bool = False) -> None:
        pass

    def send(self, message: Any) -> None:
        event = getattr(message, "content", message)  # AutoGen wraps events as {type, content}
        reason = getattr(event, "termination_reason", None)
        if isinstance(reason, str):
            self.terminations.append(reason)

    def input(self, prompt: str = "", *, password: bool = False) -> str:
        if self.human_input is not None:
            return self.human_input.input(prompt, password=password)
        from autogen.io.console import IOConsole

        return IOConsole().input(prompt, password=password)


class Episode:
    """All state of one run: agents, group chat, cursor, history, trace."""

    def __init__(
        self,
        flow: Flow,
        task: str,
        view: View,
        backends: LLMBackends,
        env: Any,
        vars: dict[str, Any] | None,
        max_transitions: int,
        deadline: float | None = None,
        human_input: InputStream | None = None,
        *,
        start: RunState | None = None,
        journal: Journal | None = None,
        answer: str | None = None,
    ):
        """``start``: continue from a saved state instead of the beginning (``task`` and ``vars``
        are then the saved ones); ``journal``: save the state after every transition;
        ``answer``: the answer to ``start``'s pending question."""
        self.flow, self.view, self.backends = flow, view, backends
        self.human_input = human_input
        self.max_transitions = max_transitions
        self.deadline = deadline
        self.start, self.journal = start, journal
        self._answer = answer
        self.history = History(list(start.history)) if start else History()
        self.ctx = Context(
            task=start.task if start else task,
            history=self.history,
            state=start.state if start else flow.initial,
            env=env,
            vars=dict(start.vars) if start else dict(vars or {}),
            board=start.board if start else Blackboard(),
        )
        self.ctx.ask = self._ask
        self.ctx.models = backends.assignment
        self.ctx.scripts = backends.scripts
        self.ctx.http = backends.http
        self.steps: list[Step] = list(start.steps) if start else []
        self.transitions: list[TransitionRecord] = list(start.transitions) if start else []
        self.stop_reason = ""
        self.failure: BaseException | None = None
        self.pending: PendingQuestion | None = None
        self.started_at = start.started_at if start else time.time()
        self._cursor = start.cursor if start else 0  # index into the current state's emitted outputs
        # the position last saved, (transitions taken, cursor): a resumed run starts at one
        self._saved_at: tuple[int, int] | None = (len(self.transitions), self._cursor) if start else None
        self._pending: OutputFunction | None = None
        self._judged: dict[int, str | None] = {}  # judge id -> answer, for the current decision
        self._build_agents()

    # agents ------------------------------------------------------------------------------------

    def _build_agents(self) -> None:
        flow, view = self.flow, self.view
        quiet = {"llm_config": False, "human_input_mode": "NEVER", "code_execution_config": False}
        self.user = ConversableAgent(USER, **quiet)
        self.prompter = ConversableAgent(PROMPTER, **quiet)
        self.prompter.register_reply([Agent, None], self._prompter_reply, position=0)
        self.executor = ConversableAgent(EXECUTOR, **quiet)
        self.executor.register_reply([Agent, None], self._executor_reply, position=0)
        # Tools are registered in AutoGen's function map and invoked through it. Two different
        # tools may share a display name, so each Tool object gets its own key.
        tools: dict[str, Any] = {}
        self._tool_keys: dict[int, str] = {}
        for st in flow.states.values():
            for out in st.outputs:
                if isinstance(out, Tool) and id(out) not in self._tool_keys:
                    key = out.name if out.name not in tools else f"{out.name}_{len(tools)}"
                    tools[key] = out.fn
                    self._tool_keys[id(out)] = key
        self.executor.register_function(tools)
        # Tools given to LLM output functions run in their own executor's function map.
        self.tool_runner = ConversableAgent(TOOLS, **quiet)
        self._toolsets: dict[int, ToolSet] = {}
        by_name: dict[str, Any] = {}
        for st in flow.states.values():
            for out in st.outputs:
                if isinstance(out, LLM) and out.tools and id(out) not in self._toolsets:
                    toolset = ToolSet(out.tools)
                    for name, fn in toolset.functions().items():
                        if by_name.setdefault(name, fn) is not fn:
                            raise ConfigError(f"two different LLM tools are named {name!r}; rename one")
                    self._toolsets[id(out)] = toolset
        self.tool_runner.register_function(by_name)
        self.llm_agents: dict[str, StateAgent] = {}
        for st in flow.states.values():
            if not any(isinstance(o, LLM) for o in view.emitted_outputs(st)):
                continue
            name = view.llm_agent_name(st)
            if name not in self.llm_agents:
                if name != ASSISTANT and name in RESERVED_NAMES:
                    raise ConfigError(f"state name {name!r} clashes with a built-in agent; rename the state")
                system = view.system_message(flow, st if name != ASSISTANT else None)
                agent = StateAgent(name, system, system_last=view.system_last)
                agent.register_reply([Agent, None], self._llm_reply, position=0)
                self.llm_agents[name] = agent
        # The user's own agents speak through bridges (the user's agent object is never modified).
        self.bridges: dict[str, ConversableAgent] = {}
        owners: dict[str, Any] = {}
        for st in flow.states.values():
            for out in view.emitted_outputs(st):
                if not isinstance(out, AutoGenAgent):
                    continue
                if owners.setdefault(out.name, out.agent) is not out.agent:
                    raise ConfigError(f"two different AutoGen agents are named {out.name!r}; rename one")
                if out.name in RESERVED_NAMES or out.name in self.llm_agents:
                    raise ConfigError(f"agent name {out.name!r} clashes with a built-in or state agent; rename it")
                if out.name not in self.bridges:
                    bridge = ConversableAgent(out.name, **quiet)
                    bridge.register_reply([Agent, None], self._agent_reply, position=0)
                    self.bridges[out.name] = bridge
        self.human: ConversableAgent | None = None
        if any(isinstance(o, Human) for st in flow.states.values() for o in view.emitted_outputs(st)):
            self.human = ConversableAgent(
                HUMAN, llm_config=False, human_input_mode="ALWAYS", code_execution_config=False
            )
            self.human.register_reply([Agent, None], self._human_reply, position=0)
        members: list[Agent] = [self.user, self.prompter, self.executor, *self.llm_agents.values()]
        members += [*self.bridges.values(), *([self.human] if self.human is not None else [])]
        # AutoGen's round bound only backs up the flow's own bound: a state takes one round per
        # output function the view emits, plus the selection that leaves it.
        per_state = max((len(view.emitted_outputs(s)) for s in flow.states.values()), default=1) + 1
        self.groupchat = GroupChat(
            agents=members,
            messages=[],
            max_round=(self.max_transitions + 2) * per_state + 2,
            speaker_selection_method=self._select,
            admin_name="__stateflow_admin__",
            send_introductions=False,
        )
        self.manager = GroupChatManager(
            self.groupchat,
            llm_config=False,
            human_input_mode="NEVER",
            silent=True,
            is_termination_msg=_never_terminate,
        )

    # δ as speaker selection ---------------------------------------------------------------------

    def _select(self, last_speaker: Agent, groupchat: GroupChat) -> Agent | None:
        if self.failure is not None:
            return None
        try:
            return self._next_speaker()
        except BaseException as err:  # surfaced by run(); AutoGen would swallow a None-selection
            self.failure = err
            return None

    def _next_speaker(self) -> Agent | None:
        if self.deadline is not None and time.monotonic() > self.deadline:
            raise RunTimeout(f"run exceeded its time budget in state {self.ctx.state!r}")
        while True:
            state = self.flow.states[self.ctx.state]
            outputs = self.view.emitted_outputs(state)
            if self._cursor == 0:
                self._save_position("running")  # a state is entered: its position is a checkpoint
            if self._cursor < len(outputs):
                out = outputs[self._cursor]
                if isinstance(out, Human) and out.defer and self._answer is None:
                    return self._pause(out)
                self._cursor += 1
                self._pending = out
                if isinstance(out, Prompt):
                    return self.prompter
                if isinstance(out, Tool):
                    return self.executor
                if isinstance(out, AutoGenAgent):
                    return self.bridges[out.name]
                if isinstance(out, Human):
                    assert self.human is not None
                    return self.human
                return self.llm_agents[self.view.llm_agent_name(state)]
            if state.final:
                self.stop_reason = "final"
                return None
            if len(self.transitions) >= self.max_transitions:
                self.stop_reason = "max_transitions"
                return None
            self._judged.clear()
            rule = self.flow.decide(self.ctx)
            if rule is None:
                last = self.history.last()
                raise NoTransitionError(
                    state.name, [str(r) for r in self.flow.rules_from(state.name)], last.content if last else None
                )
            self.transitions.append(TransitionRecord(state.name, rule.target, rule.label, len(self.steps) - 1))
            self.ctx.state = rule.target
            self._cursor = 0

    # checkpoints ------------------------------------------------------------------------------

    def snapshot(self) -> RunState:
        """The run's state now (only consistent between replies: at a transition or a pause)."""
        return RunState(
            task=self.ctx.task,
            view=self.view.name,
            state=self.ctx.state,
            cursor=self._cursor,
            history=History(list(self.history)),
            steps=list(self.steps),
            transitions=list(self.transitions),
            vars=dict(self.ctx.vars),
            board=self.ctx.board,
            chat=[dict(m) for m in self.groupchat.messages],
            started_at=self.started_at,
            models=dict(self.backends.assignment.by_state),
            pending=self.pending,
        )

    def _save_position(self, status: str) -> None:
        """Save the run at its current position, once per position (a resumed run starts at a
        saved one). Between two saves the run may only repeat work, never lose it."""
        position = (len(self.transitions), self._cursor)
        if self.journal is None or self._saved_at == position:
            return
        self.journal.save(self.snapshot(), status)
        self._saved_at = position

    def _pause(self, out: Human) -> None:
        """Stop at a deferred question: save the run with it, end the chat (``run`` returns paused)."""
        if self.journal is None:
            raise ConfigError(
                f"state {self.ctx.state!r} asks a deferred question (Human(defer=True)); a paused run must be "
                "saved somewhere: run(..., checkpointer=...)"
            )
        last = self.history.last()
        question = f"{last.content}\n{out.prompt}" if out.show_last and last is not None else out.prompt
        self.pending = PendingQuestion(self.ctx.state, out.name, question)
        self.stop_reason = "paused"
        self.journal.save(self.snapshot(), "paused")
        self._saved_at = (len(self.transitions), self._cursor)
        return None

    def _save_end(self) -> None:
        """The last checkpoint: ``finished`` with the whole run, or ``failed`` with the position
        the run can be continued from (the last one saved) and the error."""
        if self.journal is None or self.stop_reason == "paused":
            return
        if self.failure is None:
            state = self.snapshot()
            state.stop_reason = self.stop_reason
            self.journal.save(state, "finished")
            return
        if isinstance(self.failure, CheckpointError):
            return  # the store itself failed: writing to it again would fail the same way
        self.journal.fail(f"{type(self.failure).__name__}: {self.failure}")

    # replies --------------------------------------------------------------------------------

    def _record(
        self,
        out_label: str,
        message: Message | None,
        usage: Usage | None,
        latency: float,
        detail: dict[str, Any] | None = None,
    ) -> None:
        if message is not None:
            self.history.append(message)
        started = time.time() - latency
        self.steps.append(
            Step(len(self.steps), self.ctx.state, out_label, message, usage, latency, detail or {}, started_at=started)
        )

    def _prompter_reply(
        self, recipient: Agent, messages: Any = None, sender: Agent | None = None, config: Any = None
    ) -> tuple[bool, str]:
        out = self._pending
        assert isinstance(out, Prompt)
        msg = Message("user", PROMPTER, self.ctx.state, Kind.PROMPT, out.text)
        self._record(out.label, msg, None, 0.0)
        return True, out.text

    def _executor_reply(
        self, recipient: Agent, messages: Any = None, sender: Agent | None = None, config: Any = None
    ) -> tuple[bool, str]:
        out = self._pending
        assert isinstance(out, Tool)
        t0 = time.perf_counter()
        result = self.executor.function_map[self._tool_keys[id(out)]](self.ctx)
        latency = time.perf_counter() - t0
        if isinstance(result, str):
            result = ToolResult(result)
        if not isinstance(result, ToolResult):
            raise StateFlowError(f"tool {out.name!r} returned {type(result).__name__}; expected ToolResult or str")
        msg = Message("user", out.name, self.ctx.state, Kind.TOOL, result.content, meta=result.meta)
        self._record(out.label, msg, result.usage, latency)
        # AutoGen's GroupChat drops empty replies (it ends the chat), so send a visible marker.
        return True, result.content if result.content != "" else "(no output)"

    def _llm_reply(
        self, recipient: ConversableAgent, messages: Any = None, sender: Agent | None = None, config: Any = None
    ) -> tuple[bool, str]:
        out = self._pending
        assert isinstance(out, LLM)
        assert isinstance(recipient, StateAgent)
        profile = self.backends.profile(self.ctx.state, out.profile)
        fields = self.backends.request_fields(profile, out, self.ctx)
        if id(out) in self._toolsets:
            return self._llm_with_tools(out, recipient, profile, list(messages or []), sender, fields)
        if out.vote is not None:
            return self._voted(out, recipient, profile, messages, sender, fields)
        try:
            text, usage = self.backends.call(recipient, profile, messages, sender, fields)
            if out.retry_when is not None and out.retry_when(self.ctx, text):
                self.steps.append(
                    Step(
                        len(self.steps),
                        self.ctx.state,
                        f"{out.label}[discarded]",
                        None,
                        usage,
                        usage.latency_s,
                        {"reply": text, "why": "retry_when held; asked again at a higher temperature"},
                        started_at=time.time() - usage.latency_s,
                    )
                )
                warmer = {**fields, "temperature": out.retry_temperature}
                text, usage = self.backends.call(recipient, profile, messages, sender, warmer)
            detail: dict[str, Any] = {}
            if out.guard is not None:
                text, usage, guarded = self._guarded(
                    out, recipient, profile, list(messages or []), sender, fields, text, usage
                )
                detail.update(guarded)
            if out.cut is not None:
                text, cut = out.cut.apply(text)
                if cut is not None:
                    detail["degenerate"] = {"reason": cut.reason, "at": cut.at, "original_chars": cut.original_chars}
        except LLMError as err:
            err.state = self.ctx.state
            raise
        msg = Message("assistant", recipient.name, self.ctx.state, Kind.LLM, text, usage=usage)
        self._record(out.label, msg, usage, usage.latency_s, detail)
        return True, text if text != "" else "(empty reply)"

    def _voted(
        self,
        out: LLM,
        agent: StateAgent,
        profile: ModelProfile,
        messages: Any,
        sender: Agent | None,
        fields: dict[str, Any],
    ) -> tuple[bool, str]:
        """Sample ``vote.k`` candidates (fewer once :meth:`Vote.done` says so: a quorum, or a
        decided vote), execute each read-only, reply with the winner.

        Each candidate is a step ``<label>[candidate i]`` carrying its usage, action, result key
        and vote count; the winning reply is appended to the history by a step without usage
        (its call is already counted on its candidate step).
        """
        vote = out.vote
        assert vote is not None
        candidates: list[Candidate] = []
        usages: list[Usage] = []
        for i in range(vote.size):
            if vote.done(candidates):
                break  # the candidates left cannot change the winner, or need not: do not pay for them
            variant = vote.variant(i)
            base, asked = fields, messages
            if variant is not None and variant.grammar is not None:
                base = self.backends.request_fields(profile, dc_replace(out, grammar=variant.grammar), self.ctx)
            if variant is not None and variant.rewrite is not None:
                asked = [_rewritten(m, variant.rewrite) for m in messages or []]
            try:
                with _system_message(agent, variant.rewrite if variant is not None else None):
                    text, usage = self.backends.call(agent, profile, asked, sender, vote.fields(base, i))
            except LLMError as err:
                err.state = self.ctx.state
                raise
            if out.cut is not None:
                text, _ = out.cut.apply(text)
            candidates.append(vote.judge(self.ctx, text))
            usages.append(usage)
        winner, votes = tally(candidates)
        for i, (c, usage) in enumerate(zip(candidates, usages, strict=True)):
            self.steps.append(
                Step(
                    len(self.steps),
                    self.ctx.state,
                    f"{out.label}[candidate {i}]",
                    None,
                    usage,
                    usage.latency_s,
                    {
                        "reply": c.reply,
                        "action": repr(c.action),
                        "key": repr(c.key),
                        "error": c.error,
                        "votes": votes[i],
                        "won": i == winner,
                        **({"variant": v.name} if (v := vote.variant(i)) is not None else {}),
                    },
                    started_at=time.time() - usage.latency_s,
                )
            )
        text = candidates[winner].reply
        # the tally travels with the message, so result files (which keep the history) show it too
        tally_ = {
            "winner": winner,
            "votes": votes[winner],
            "k": vote.size,
            **({"asked": len(candidates)} if vote.stop_when_decided or vote.quorum else {}),
            "per_candidate": [votes[i] for i in range(len(candidates))],
            "errors": sum(c.error is not None for c in candidates),
            **({"variants": [v.name for v in vote.variants]} if vote.variants else {}),
            # what each candidate ran and got, so a result file alone can tell how the vote went
            # (which answers agreed, what the losers returned) and replay another voting rule
            "candidates": [
                {
                    "action": None if c.action is None else _clip(str(c.action)),
                    "result": None if c.error is not None else _clip(repr(c.key)),
                    "error": None if c.error is None else _clip(c.error),
                }
                for c in candidates
            ],
        }
        msg = Message("assistant", agent.name, self.ctx.state, Kind.LLM, text, meta={"vote": tally_})
        self._record(out.label, msg, None, 0.0, {"vote": tally_})
        return True, text if text != "" else "(empty reply)"

    def _guarded(
        self,
        out: LLM,
        agent: StateAgent,
        profile: ModelProfile,
        messages: list[dict[str, Any]],
        sender: Agent | None,
        fields: dict[str, Any],
        text: str,
        usage: Usage,
    ) -> tuple[str, Usage, dict[str, Any]]:
        """Re-ask while the reply repeats an executed action (see :class:`RepeatGuard`).

        Each discarded reply is a step with its usage. Returns the reply that stands and the
        detail for its step: ``repeat_guard`` says how many re-asks it took and whether the reply
        still repeats (then :func:`~stateflow.repetition.repeated_action` holds for the flow).
        """
        guard = out.guard
        assert guard is not None
        earlier = guard.repeat_of(self.ctx, text)
        asks = 0
        for asks, temperature in enumerate(guard.temperatures, start=1):
            if earlier is None:
                return text, usage, {"repeat_guard": {"reasks": asks - 1, "still_repeats": False}}
            self.steps.append(
                Step(
                    len(self.steps),
                    self.ctx.state,
                    f"{out.label}[repeat]",
                    None,
                    usage,
                    usage.latency_s,
                    {"reply": text, "repeats": repr(earlier.action), "why": "repeat_guard: action already executed"},
                    started_at=time.time() - usage.latency_s,
                )
            )
            reask = [*messages, {"role": "user", "content": guard.instruction(earlier)}]
            # A distinct seed per re-ask: at the same seed a sampler can return the same text again.
            warmer = {**fields, "temperature": temperature, "seed": 1000 + asks}
            text, usage = self.backends.call(agent, profile, reask, sender, warmer)
            earlier = guard.repeat_of(self.ctx, text)
        return text, usage, {"repeat_guard": {"reasks": asks, "still_repeats": earlier is not None}}

    def _llm_with_tools(
        self,
        out: LLM,
        agent: StateAgent,
        profile: ModelProfile,
        messages: list[dict[str, Any]],
        sender: Agent | None,
        fields: dict[str, Any],
    ) -> tuple[bool, str]:
        """Model calls and tool executions until a reply calls no tool (at most max_tool_rounds).

        Each model call and each tool execution is a step; tool results are history messages.
        The group chat receives the whole exchange as one text, so later states see it too.
        """
        toolset = self._toolsets[id(out)]
        native = profile.native_tools
        if native:
            fields = {**fields, "tools": toolset.schemas()}
        else:
            messages = [*messages, {"role": "user", "content": text_protocol_prompt(toolset)}]
        transcript: list[str] = []
        for round_ in range(out.max_tool_rounds + 1):
            try:
                reply, usage = self.backends.call_raw(agent, profile, messages, sender, fields)
            except LLMError as err:
                err.state = self.ctx.state
                raise
            text = reply_text(reply)
            calls = reply.get("tool_calls") if isinstance(reply, dict) and native else None
            action = None if native else parse_text_action(text, toolset)
            shown = text if not calls else "\n".join(p for p in (text, render_calls(calls)) if p)
            msg = Message("assistant", agent.name, self.ctx.state, Kind.LLM, shown, usage=usage)
            self._record(out.label, msg, usage, usage.latency_s)
            transcript.append(shown)
            if not calls and action is None:
                return True, "\n".join(transcript) or "(empty reply)"
            if round_ == out.max_tool_rounds:
                raise StateFlowError(
                    f"state {self.ctx.state!r}: the model still requested tools after {out.max_tool_rounds} rounds "
                    f"(last: {shown[:200]!r}); raise LLM(max_tool_rounds=...) or check the tools' results"
                )
            if calls:
                messages.append({"role": "assistant", "content": reply.get("content"), "tool_calls": calls})
                for call in calls:
                    result = self._run_tool(
                        call["function"].get("name", ""), call["function"].get("arguments"), call.get("id")
                    )
                    messages.append({"role": "tool", "tool_call_id": call.get("id"), "content": result})
                    transcript.append(f"Observation: {result}")
            else:
                assert action is not None
                if action.error is not None:
                    result = f"error: {action.error}"
                    self._record(
                        f"tool_call[{action.name}]",
                        Message("user", action.name, self.ctx.state, Kind.TOOL, result, meta={"ok": False}),
                        None,
                        0.0,
                        {"tool": action.name, "arguments": action.arguments, "ok": False},
                    )
                else:
                    result = self._run_tool(action.name, action.arguments, None)
                messages += [
                    {"role": "assistant", "content": text},
                    {"role": "user", "content": f"Observation: {result}"},
                ]
                transcript.append(f"Observation: {result}")
        raise AssertionError("unreachable")

    def _run_tool(
        self,
        name: str,
        arguments: str | None,
        call_id: str | None,
        *,
        executor: ConversableAgent | None = None,
        agent: str | None = None,
    ) -> str:
        """Execute one requested tool through an AutoGen function map and record it as a step.

        A failing tool, unknown name or malformed arguments come back as an error text (AutoGen's
        ``execute_function`` contract) with ``meta["ok"] = False``.
        """
        runner = executor or self.tool_runner
        t0 = time.perf_counter()
        ok, result = runner.execute_function({"name": name, "arguments": arguments or "{}"}, call_id=call_id)
        latency = time.perf_counter() - t0
        content = str(result.get("content", ""))
        try:
            args: Any = json.loads(arguments or "{}")
        except json.JSONDecodeError:
            args = arguments
        meta = {"ok": ok, "tool": name, "arguments": args, **({"call_id": call_id} if call_id else {})}
        msg = Message("user", name, self.ctx.state, Kind.TOOL, content, meta=meta)
        detail = {"tool": name, "arguments": args, "ok": ok, **({"agent": agent} if agent else {})}
        self._record(f"tool_call[{name}]", msg, None, latency, detail)
        return content

    def _agent_reply(
        self, recipient: ConversableAgent, messages: Any = None, sender: Agent | None = None, config: Any = None
    ) -> tuple[bool, str]:
        """The user's agent answers the history (its own system message, model, tools, nested chats)."""
        out = self._pending
        assert isinstance(out, AutoGenAgent)
        agent, executor = out.agent, out.executor or out.agent
        counted: list[Agent] = [agent, *out.usage_agents]
        before = usage_totals(counted)
        msgs = [dict(m) for m in messages or []]
        t0 = time.perf_counter()
        transcript: list[str] = []
        for round_ in range(out.max_tool_rounds + 1):
            try:
                reply = agent.generate_reply(messages=msgs, sender=recipient)
            except StateFlowError:
                raise
            except Exception as err:
                raise LLMError(f"agent {out.name!r} failed: {type(err).__name__}: {err}", state=self.ctx.state) from err
            calls = reply.get("tool_calls") if isinstance(reply, dict) else None
            if not calls:
                transcript.append(reply_text(reply))
                break
            if round_ == out.max_tool_rounds:
                raise StateFlowError(f"agent {out.name!r} still requested tools after {out.max_tool_rounds} rounds")
            msgs.append({"role": "assistant", "content": reply.get("content"), "tool_calls": calls, "name": out.name})
            transcript.append("\n".join(p for p in (reply_text(reply), render_calls(calls)) if p))
            for call in calls:
                fn = call.get("function", {})
                content = self._run_tool(
                    str(fn.get("name", "")), fn.get("arguments"), call.get("id"), executor=executor, agent=out.name
                )
                msgs.append({"role": "tool", "tool_call_id": call.get("id"), "content": content})
                transcript.append(f"Observation: {content}")
        latency = time.perf_counter() - t0
        after = usage_totals(counted)
        prompt = completion = 0
        cost = 0.0
        models = []
        for model, (p, c, d) in after.items():
            p0, c0, d0 = before.get(model, (0, 0, 0.0))
            if (p, c, d) != (p0, c0, d0):
                models.append(model)
            prompt, completion, cost = prompt + p - p0, completion + c - c0, cost + d - d0
        usage = Usage(
            prompt_tokens=prompt,
            completion_tokens=completion,
            cost=cost,
            latency_s=latency,
            model=",".join(models),
            profile=f"agent:{out.name}",
        )
        text = "\n".join(t for t in transcript if t)
        msg = Message("assistant", out.name, self.ctx.state, Kind.LLM, text, usage=usage)
        self._record(out.label, msg, usage, latency)
        return True, text if text != "" else "(empty reply)"

    def _human_reply(
        self, recipient: ConversableAgent, messages: Any = None, sender: Agent | None = None, config: Any = None
    ) -> tuple[bool, str]:
        out = self._pending
        assert isinstance(out, Human)
        last = self.history.last()
        prompt = f"{last.content}\n{out.prompt}" if out.show_last and last is not None else out.prompt
        from autogen.io.console import IOConsole

        t0 = time.perf_counter()
        if out.defer:  # the answer to the question the run paused on (resume(..., answer=...))
            assert self._answer is not None
            text, self._answer, self.pending = self._answer, None, None
        else:
            text = recipient.get_human_input(prompt, iostream=self.human_input or IOConsole())
        msg = Message("user", out.name, self.ctx.state, Kind.HUMAN, text)
        self._record(out.label, msg, None, time.perf_counter() - t0)
        return True, text if text != "" else "(no input)"

    # judges ---------------------------------------------------------------------------------

    def _ask(self, judge: Judge) -> str | None:
        key = id(judge)
        if key in self._judged:
            return self._judged[key]
        profile = self.backends.profile(self.ctx.state, judge.profile)
        transcript = "\n".join(f"[{m.name}] {m.content}" for m in self.history)
        options = ", ".join(judge.choices)
        agent = StateAgent(f"judge_{judge.name}", f"You classify conversations. Reply with one word: {options}.")
        messages = [{"role": "user", "content": f"{transcript}\n\nQuestion: {judge.question}\nAnswer ({options}):"}]
        fields = self.backends.endpoint(profile).sampling_fields()
        text, usage = self.backends.call(agent, profile, messages, None, fields)
        answer = judge.parse(text)
        self._judged[key] = answer
        self.steps.append(
            Step(
                len(self.steps),
                self.ctx.state,
                f"judge[{judge.name}]",
                None,
                usage,
                usage.latency_s,
                {"question": judge.question, "reply": text, "answer": answer},
                started_at=time.time() - usage.latency_s,
            )
        )
        return answer

    # driver ---------------------------------------------------------------------------------

    def _unexplained_end(self, reasons: list[str]) -> ChatEndedError:
        """The error for a chat AutoGen ended although the flow had not (no final state, bound
        or error): what AutoGen said, who spoke last, where the flow was."""
        said = self.groupchat.messages[-1] if self.groupchat.messages else {}
        pending = self._pending
        return ChatEndedError(
            reason=reasons[-1] if reasons else None,
            state=self.ctx.state,
            agent=said.get("name"),
            output=pending.label if pending is not None else None,
            transitions=len(self.transitions),
        )

    def run(self) -> RunResult:
        stream = _RunStream(self.human_input)
        with IOStream.set_default(stream):
            try:
                if self.start is None:
                    self.history.append(Message("user", USER, self.flow.initial, Kind.PROMPT, self.ctx.task))
                    self.user.initiate_chat(self.manager, message=self.ctx.task, clear_history=True, silent=True)
                else:
                    # AutoGen's own resume loads the saved group messages into every agent; the last
                    # one is sent again to restart the chat, which then asks our selector as before.
                    last_agent, last_message = self.manager.resume(messages=self.start.chat, silent=True)
                    last_agent.initiate_chat(self.manager, message=last_message, clear_history=False, silent=True)
            except BaseException as err:
                self.failure = self.failure or err
        if self.failure is None and not self.stop_reason:
            self.failure = self._unexplained_end(stream.terminations)
        error = None
        if self.failure is not None:
            self.stop_reason = "error"
            error = f"{type(self.failure).__name__}: {self.failure}"
        try:
            self._save_end()
        except BaseException as err:  # the run's own failure, if any, stays the one reported
            if self.failure is None:
                self.failure, self.stop_reason = err, "error"
                error = f"{type(err).__name__}: {err}"
        return RunResult(
            flow=self.flow.name,
            view=self.view.name,
            exit_state=self.ctx.state,
            stop_reason=self.stop_reason,
            history=self.history,
            steps=self.steps,
            transitions=self.transitions,
            error=error,
            vars=dict(self.ctx.vars),
            board=self.ctx.board,
            started_at=self.started_at,
            ended_at=time.time(),
            pending=self.pending,
        )

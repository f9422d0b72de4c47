"""Running a flow on AutoGen.

A run is an AutoGen ``GroupChat`` whose speaker-selection callable *is* the transition function:

* the ``user`` agent opens the chat with the task;
* the ``instructions`` agent emits a state's :class:`~stateflow.outputs.Prompt` texts;
* LLM output functions are served by :class:`StateAgent` s (AutoGen ``ConversableAgent`` s that
  call their model through AutoGen's ``OpenAIWrapper``);
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

Which agents exist and what each sees is decided by a :class:`View`: :class:`StateFlowView`
(one agent, instructions accumulate in the shared history) here, ``sf_agent.SFAgentView`` (one
agent per state with a private instruction) in the ``sf_agent`` package.

Everything a run needs lives in one :class:`_Episode` object, so any number of runs can share a
process (threads included).
"""

from __future__ import annotations

import contextlib
import json
import logging
import time
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from autogen import Agent, ConversableAgent, GroupChat, GroupChatManager, OpenAIWrapper
from autogen.io.base import InputStream, IOStream

from stateflow.backends.cassette import Cassette, RecordingClient, ReplayClient
from stateflow.backends.endpoints import config_entry, constraint_fields, sampling_fields
from stateflow.backends.http import HttpClients
from stateflow.backends.scripted import ScriptedClient, ScriptedLLM
from stateflow.conditions import Judge
from stateflow.errors import ConfigError, LLMError, NoTransitionError, RunTimeout, StateFlowError
from stateflow.flow import Flow, State
from stateflow.messages import History, Kind, Message, Usage
from stateflow.outputs import LLM, AutoGenAgent, Context, Human, OutputFunction, Prompt, Tool, ToolResult
from stateflow.profiles import ModelAssignment, ModelProfile
from stateflow.tool_protocol import ToolSet, parse_text_action, text_protocol_prompt
from stateflow.trace import RunResult, Step, TransitionRecord

__all__ = ["ConstraintWarning", "LLMBackends", "StateAgent", "StateFlowView", "View", "run"]

USER, PROMPTER, EXECUTOR, ASSISTANT = "user", "instructions", "environment", "assistant"
HUMAN, TOOLS = "human", "tools"
RESERVED_NAMES = frozenset({USER, PROMPTER, EXECUTOR, ASSISTANT, HUMAN, TOOLS, "chat_manager"})


class _DropCustomClientNotice(logging.Filter):
    """AutoGen logs an INFO line for every wrapper built with a custom client; runs build one per
    profile, so the line is noise. Everything else from that logger passes."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "Detected custom model client" not in record.getMessage()


_autogen_client_log = logging.getLogger("autogen.oai.client")
if not any(isinstance(f, _DropCustomClientNotice) for f in _autogen_client_log.filters):
    _autogen_client_log.addFilter(_DropCustomClientNotice())


class ConstraintWarning(UserWarning):
    """A decoding constraint cannot be sent to a provider; it is monitor-only there."""


# -- views ------------------------------------------------------------------------------------


class View:
    """Decides which agent serves each output function and what it is told."""

    name = "stateflow"

    def emitted_outputs(self, state: State) -> tuple[OutputFunction, ...]:
        """The output functions that produce history messages in this view."""
        return state.outputs

    def llm_agent_name(self, state: State) -> str:
        """Name of the agent serving ``state``'s LLM calls."""
        return ASSISTANT

    def system_message(self, flow: Flow, state: State | None) -> str:
        """System message of the agent serving ``state`` (``None``: the shared agent)."""
        return flow.system_message

    #: Send the agent's system message after the conversation instead of before it.
    system_last: bool = False


class StateFlowView(View):
    """The paper's StateFlow: one agent; each state's instruction is appended to the history."""


# -- LLM plumbing -----------------------------------------------------------------------------


@dataclass
class _CallRecord:
    usage: Usage
    raw: Any


class StateAgent(ConversableAgent):
    """A ``ConversableAgent`` that calls its model with a per-call client and reports usage.

    AutoGen builds the request (system message + the agent's view of the group history); this
    subclass only keeps the raw response of each call so the run can record tokens, cached
    tokens, cost and latency per step.
    """

    def __init__(self, name: str, system_message: str, *, system_last: bool = False):
        super().__init__(
            name=name,
            system_message=system_message,
            llm_config=False,
            human_input_mode="NEVER",
            code_execution_config=False,
            max_consecutive_auto_reply=None,
        )
        self.last_response: Any = None
        self.system_last = system_last
        if not system_message:
            # AutoGen always prepends the system message; an empty one would override the
            # model's own default system prompt (e.g. Qwen's chat template), so send none.
            self._oai_system_message = []

    def _generate_oai_reply_from_client(self, llm_client, messages, cache, **kwargs: Any):  # type: ignore[override]
        if self.system_last and self._oai_system_message:
            # AutoGen put the system message first; move it after the conversation so that
            # consecutive calls share the longest possible prefix (a server's prompt cache).
            n = len(self._oai_system_message)
            messages = [*messages[n:], *messages[:n]]
        response = llm_client.create(messages=messages, cache=cache, agent=self, **kwargs)
        self.last_response = response
        extracted = llm_client.extract_text_or_completion_object(response)[0]
        if extracted is not None and not isinstance(extracted, str) and hasattr(extracted, "model_dump"):
            extracted = extracted.model_dump()
        return extracted


class LLMBackends:
    """One AutoGen ``OpenAIWrapper`` per profile for a run, plus the run's opt-in test doubles.

    Args:
        assignment: which profile serves which state.
        scripts: ``{profile name: ScriptedLLM}`` for profiles with ``provider="scripted"``.
        cassette: record/replay every call of this run.
        http: shared HTTP connection pools (reused across runs).
    """

    def __init__(
        self,
        assignment: ModelAssignment,
        scripts: Mapping[str, ScriptedLLM] | None = None,
        cassette: Cassette | None = None,
        http: HttpClients | None = None,
    ):
        self.http = http
        self.assignment = assignment
        self.scripts = dict(scripts or {})
        self.cassette = cassette
        self._wrappers: dict[str, OpenAIWrapper] = {}
        self._warned: set[str] = set()

    def profile(self, state: str, explicit: str | None = None) -> ModelProfile:
        return self.assignment.profile_for(state, explicit)

    def wrapper(self, profile: ModelProfile) -> OpenAIWrapper:
        """The (cached) AutoGen client for ``profile``; starts the local server if needed."""
        w = self._wrappers.get(profile.name)
        if w is not None:
            return w
        if profile.provider == "scripted":
            script = self.scripts.get(profile.name)
            if script is None:
                raise ConfigError(
                    f"profile {profile.name!r} is scripted but no script was given; "
                    "pass scripts={name: ScriptedLLM(...)}"
                )
            entry = {**config_entry(profile), "model_client_cls": "ScriptedClient"}
            w = OpenAIWrapper(config_list=[entry], cache_seed=None)
            w.register_model_client(ScriptedClient, script=script, price_per_1k=profile.price_per_1k)
        else:
            base_url = None
            if profile.provider == "local":
                from stateflow.backends.local import resolve_endpoint

                base_url = resolve_endpoint(profile)
            entry = config_entry(profile, base_url=base_url)
            if self.http is not None and self.cassette is None:
                entry["http_client"] = self.http.get(entry.get("base_url"), profile.timeout)
            if self.cassette is not None:
                cls = RecordingClient if self.cassette.mode == "record" else ReplayClient
                entry["model_client_cls"] = cls.__name__
                w = OpenAIWrapper(config_list=[entry], cache_seed=None)
                w.register_model_client(cls, cassette=self.cassette, price_per_1k=profile.price_per_1k)
            else:
                w = OpenAIWrapper(config_list=[entry], cache_seed=None)
        self._wrappers[profile.name] = w
        return w

    def request_fields(self, profile: ModelProfile, out: LLM, ctx: Context) -> dict[str, Any]:
        """Per-call request fields: the profile's sampling settings, the output function's stop
        sequences and its decoding constraint, if any."""
        fields = sampling_fields(profile)
        if out.stop:
            fields["stop"] = list(dict.fromkeys([*profile.stop, *out.stop]))
        grammar = out.grammar(ctx) if callable(out.grammar) else out.grammar
        constraint = constraint_fields(profile, grammar=grammar, regex=out.regex)
        if constraint is None:
            if profile.name not in self._warned:
                self._warned.add(profile.name)
                warnings.warn(
                    f"profile {profile.name!r} ({profile.provider}) cannot take a grammar/regex; "
                    "the constraint is monitor-only there",
                    ConstraintWarning,
                    stacklevel=3,
                )
        elif constraint:
            body = dict(profile.extra_body)
            body.update(constraint)
            fields["extra_body"] = body
        return fields

    def call(
        self,
        agent: StateAgent,
        profile: ModelProfile,
        messages: list[dict[str, Any]] | None,
        sender: Agent | None,
        fields: dict[str, Any],
    ) -> tuple[str, Usage]:
        """One model call through AutoGen; returns the text and its accounting."""
        reply, usage = self.call_raw(agent, profile, messages, sender, fields)
        return _reply_text(reply), usage

    def call_raw(
        self,
        agent: StateAgent,
        profile: ModelProfile,
        messages: list[dict[str, Any]] | None,
        sender: Agent | None,
        fields: dict[str, Any],
    ) -> tuple[str | dict[str, Any], Usage]:
        """One model call through AutoGen; returns the reply (text, or a message dict carrying
        ``tool_calls``) and its accounting."""
        wrapper = self.wrapper(profile)
        t0 = time.perf_counter()
        try:
            ok, reply = agent.generate_oai_reply(messages=messages, sender=sender, config=wrapper, **fields)
        except StateFlowError:
            raise
        except Exception as err:
            raise LLMError(
                f"model call to profile {profile.name!r} failed: {type(err).__name__}: {err}", profile=profile.name
            ) from err
        latency = time.perf_counter() - t0
        if not ok or reply is None:
            raise LLMError(f"profile {profile.name!r} returned no reply", profile=profile.name)
        return reply, _usage_of(agent.last_response, profile, latency)


def _reply_text(reply: Any) -> str:
    if isinstance(reply, str):
        return reply
    if isinstance(reply, dict):
        return str(reply.get("content") or "")
    return "" if reply is None else str(reply)


def _render_calls(calls: list[dict[str, Any]]) -> str:
    return "\n".join(f"call {c['function']['name']}({c['function'].get('arguments') or ''})" for c in calls)


def _usage_totals(agents: list[Agent]) -> dict[str, tuple[int, int, float]]:
    """``{model: (prompt tokens, completion tokens, cost)}`` reported so far by the agents' clients."""
    from autogen import gather_usage_summary

    summary = gather_usage_summary(agents)["usage_including_cached_inference"]
    return {
        model: (int(u.get("prompt_tokens", 0)), int(u.get("completion_tokens", 0)), float(u.get("cost", 0.0)))
        for model, u in summary.items()
        if isinstance(u, dict)
    }


def _usage_of(response: Any, profile: ModelProfile, latency: float) -> Usage:
    u = getattr(response, "usage", None)
    prompt = int(getattr(u, "prompt_tokens", 0) or 0)
    completion = int(getattr(u, "completion_tokens", 0) or 0)
    details = getattr(u, "prompt_tokens_details", None)
    cached = int(getattr(details, "cached_tokens", 0) or 0) if details is not None else 0
    return Usage(
        prompt_tokens=prompt,
        completion_tokens=completion,
        cached_tokens=cached,
        cost=profile.cost(prompt, completion),
        latency_s=latency,
        model=str(getattr(response, "model", profile.model) or profile.model),
        profile=profile.name,
    )


class _RunStream:
    """Swallows AutoGen's console events (runs report through their trace instead); input goes
    to the run's human input (e.g. a user's agent with ``human_input_mode="ALWAYS"``), by default
    the console, never a silent empty answer."""

    def __init__(self, human_input: InputStream | None = None):
        self.human_input = human_input

    def print(self, *objects: Any, sep: str = " ", end: str = "\n", flush: bool = False) -> None:
        pass

    def send(self, message: Any) -> None:
        pass

    def input(self, prompt: str = "", *, password: bool = False) -> str:
        if self.human_input is not None:
            return self.human_input.input(prompt, password=password)
        from autogen.io.console import IOConsole

        return IOConsole().input(prompt, password=password)


# -- one run ------------------------------------------------------------------------------------


class _Episode:
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
    ):
        self.flow, self.view, self.backends = flow, view, backends
        self.human_input = human_input
        self.max_transitions = max_transitions
        self.deadline = deadline
        self.history = History()
        self.ctx = Context(task=task, history=self.history, state=flow.initial, env=env, vars=dict(vars or {}))
        self.ctx.ask = self._ask
        self.ctx.models = backends.assignment
        self.ctx.scripts = backends.scripts
        self.steps: list[Step] = []
        self.transitions: list[TransitionRecord] = []
        self.stop_reason = ""
        self.failure: BaseException | None = None
        self._cursor = 0  # index into the current state's emitted outputs
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
        per_state = max((len(s.outputs) for s in flow.states.values()), default=1) + 1
        self.groupchat = GroupChat(
            agents=members,
            messages=[],
            max_round=(self.max_transitions + 2) * per_state + 2,
            speaker_selection_method=self._select,
            admin_name="__stateflow_admin__",
            send_introductions=False,
        )
        self.manager = GroupChatManager(self.groupchat, llm_config=False, human_input_mode="NEVER", silent=True)

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
            if self._cursor < len(outputs):
                out = outputs[self._cursor]
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
        except LLMError as err:
            err.state = self.ctx.state
            raise
        msg = Message("assistant", recipient.name, self.ctx.state, Kind.LLM, text, usage=usage)
        self._record(out.label, msg, usage, usage.latency_s)
        return True, text if text != "" else "(empty reply)"

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
            text = _reply_text(reply)
            calls = reply.get("tool_calls") if isinstance(reply, dict) and native else None
            action = None if native else parse_text_action(text, toolset)
            shown = text if not calls else "\n".join(p for p in (text, _render_calls(calls)) if p)
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
        before = _usage_totals(counted)
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
                transcript.append(_reply_text(reply))
                break
            if round_ == out.max_tool_rounds:
                raise StateFlowError(f"agent {out.name!r} still requested tools after {out.max_tool_rounds} rounds")
            msgs.append({"role": "assistant", "content": reply.get("content"), "tool_calls": calls, "name": out.name})
            transcript.append("\n".join(p for p in (_reply_text(reply), _render_calls(calls)) if p))
            for call in calls:
                fn = call.get("function", {})
                content = self._run_tool(
                    str(fn.get("name", "")), fn.get("arguments"), call.get("id"), executor=executor, agent=out.name
                )
                msgs.append({"role": "tool", "tool_call_id": call.get("id"), "content": content})
                transcript.append(f"Observation: {content}")
        latency = time.perf_counter() - t0
        after = _usage_totals(counted)
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
        text, usage = self.backends.call(agent, profile, messages, None, sampling_fields(profile))
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

    def run(self) -> RunResult:
        started = time.time()
        self.history.append(Message("user", USER, self.flow.initial, Kind.PROMPT, self.ctx.task))
        with IOStream.set_default(_RunStream(self.human_input)):
            try:
                self.user.initiate_chat(self.manager, message=self.ctx.task, clear_history=True, silent=True)
            except BaseException as err:
                self.failure = self.failure or err
        error = None
        if self.failure is not None:
            self.stop_reason = "error"
            error = f"{type(self.failure).__name__}: {self.failure}"
        elif not self.stop_reason:
            self.stop_reason = "max_transitions"
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
            started_at=started,
            ended_at=time.time(),
        )


def run(
    flow: Flow,
    task: str,
    *,
    models: str | ModelProfile | Mapping[str, str | ModelProfile] | ModelAssignment | None = None,
    view: View | None = None,
    env: Any = None,
    scripts: Mapping[str, ScriptedLLM] | None = None,
    cassette: Cassette | None = None,
    http: HttpClients | None = None,
    max_transitions: int | None = None,
    vars: Mapping[str, Any] | None = None,
    timeout_s: float | None = None,
    raise_errors: bool = True,
    human_input: InputStream | None = None,
    telemetry: Any = None,
) -> RunResult:
    """Run ``flow`` on ``task`` and return its exit state, history and trace.

    Args:
        flow: the flow definition.
        task: the task text, the first message of the history.
        models: a profile name for every state, ``{state or "default": profile}``, or an
            assignment (default: the embedded ``local`` model).
        view: :class:`StateFlowView` (default) or ``sf_agent.SFAgentView()``.
        env: any object tools read through ``ctx.env`` (e.g. an InterCode environment).
        scripts: scripted replies for profiles whose provider is ``scripted`` (tests only).
        cassette: record or replay every model call of this run.
        http: shared HTTP connection pools; pass one :class:`~stateflow.backends.http.HttpClients`
            to many runs to reuse connections (a runner does this).
        max_transitions: overrides the flow's bound.
        vars: initial per-run variables for tools.
        timeout_s: wall-clock budget; checked before each output function (a model call in
            flight is bounded by its profile's timeout), then the run fails with ``RunTimeout``.
        raise_errors: re-raise the exception that ended a run (the partial result is attached
            as ``err.result``); with False the result carries ``stop_reason="error"``.
        human_input: where :class:`~stateflow.outputs.Human` output functions read answers: any
            AutoGen ``InputStream`` (default: the console).
        telemetry: a :class:`stateflow.telemetry.Telemetry` exporting the run as OpenTelemetry
            spans, ``False`` for none; default: from the environment (``STATEFLOW_OTEL`` or the
            standard ``OTEL_EXPORTER_OTLP_*`` variables), off when none is set.

    Raises:
        ConfigError: a state's model profile is unknown or unusable.
        NoTransitionError: no rule matched after a state (when ``raise_errors``).
        LLMError: a model call failed after retries (when ``raise_errors``).
    """
    assignment = ModelAssignment.of(models)
    for st in flow.llm_states():
        for out in st.outputs:
            if isinstance(out, LLM):
                assignment.profile_for(st.name, out.profile)
    for judge in flow.judges():
        assignment.profile_for(flow.initial, judge.profile)
    backends = LLMBackends(assignment, scripts, cassette, http)
    deadline = time.monotonic() + timeout_s if timeout_s else None
    episode = _Episode(
        flow,
        task,
        view or StateFlowView(),
        backends,
        env,
        dict(vars or {}),
        max_transitions or flow.max_transitions,
        deadline,
        human_input,
    )
    result = episode.run()
    if telemetry is None:
        from stateflow.telemetry import Telemetry

        telemetry = Telemetry.from_env()
    if telemetry:
        telemetry.export(result)
    if episode.failure is not None and raise_errors:
        err = episode.failure
        with contextlib.suppress(AttributeError):  # some builtin exceptions refuse attributes
            err.result = result  # type: ignore[attr-defined]
        raise err
    return result

"""The episode loop: one run of a flow as an AutoGen group chat.

A run is an AutoGen ``GroupChat`` (built by :mod:`stateflow.episode.agents`) whose
speaker-selection callable *is* the transition function: after each reply the selector either
picks the agent for the state's next output function or, when the state is done, evaluates the
rules (δ) and moves to the next state; returning ``None`` ends the chat.

Only the flow ends a run: a final state, the transition bound, a pause, or an error. AutoGen's
own termination-message check ("TERMINATE") is switched off, and a chat that AutoGen ends for any
other reason raises :class:`~stateflow.errors.ChatEndedError` naming that reason, the state and
the agent that spoke last, never a silent stop.

A run can start at any saved position (:class:`~stateflow.run_state.RunState`): the state is
saved through a :class:`Journal` each time a state is entered, and AutoGen's
``GroupChatManager.resume`` restores the chat from the saved group messages.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, Protocol

from autogen import Agent, GroupChat
from autogen.io.base import InputStream, IOStream

from stateflow.backends.autogen_clients import LLMBackends
from stateflow.blackboard import Blackboard
from stateflow.context import Context
from stateflow.episode.agents import ChatAgents, build_agents, poolable
from stateflow.episode.judges import Judges
from stateflow.episode.pool import AgentPool
from stateflow.episode.step_log import StepLog
from stateflow.errors import ChatEndedError, CheckpointError, ConfigError, NoTransitionError, RunTimeout
from stateflow.flow import Flow
from stateflow.mcp_tools import MCPSessions
from stateflow.messages import History, Kind, Message
from stateflow.outputs import AutoGenAgent, Human, OutputFunction, Prompt, Tool
from stateflow.parallel import Parallel
from stateflow.run_state import PendingQuestion, RunState
from stateflow.trace import RunResult, Step, TransitionRecord
from stateflow.views import USER, View

__all__ = ["Episode", "Journal"]


class Journal(Protocol):
    """Where an episode saves its state after every transition (see :mod:`stateflow.threads`)."""

    def save(self, state: RunState, status: str) -> None:
        """Save ``state`` (encoded at once); ``status`` is ``running``, ``paused`` or ``finished``."""

    def fail(self, error: str) -> None:
        """Mark the run failed: the last state saved stays the one to continue from."""


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
    """All state of one run: agents, group chat, cursor, history, trace.

    Attributes:
        ctx: what conditions and tools see (task, history, state, environment, vars, blackboard).
        log: the run's steps (:class:`~stateflow.episode.step_log.StepLog`).
        agents: the AutoGen agents and the group chat (:class:`~stateflow.episode.agents.ChatAgents`).
        current: the output function being run (set by the selector for the handler it picks).
        pending: the question a paused run waits on.
    """

    agents: ChatAgents

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
        self.steps: list[Step] = list(start.steps) if start else []
        self.log = StepLog(self.ctx, self.history, self.steps)
        self.judges = Judges(self.ctx, backends, self.log)
        self.ctx.ask = self.judges.ask
        self.ctx.models = backends.assignment
        self.ctx.scripts = backends.scripts
        self.ctx.http = backends.http
        self.transitions: list[TransitionRecord] = list(start.transitions) if start else []
        #: called with every transition once the run is in its target (streamed events)
        self.on_transition: Callable[[TransitionRecord], None] | None = None
        self.stop_reason = ""
        self.failure: BaseException | None = None
        self.pending: PendingQuestion | None = None
        self.started_at = start.started_at if start else time.time()
        self._cursor = start.cursor if start else 0  # index into the current state's emitted outputs
        # the position last saved, (transitions taken, cursor): a resumed run starts at one
        self._saved_at: tuple[int, int] | None = (len(self.transitions), self._cursor) if start else None
        self.current: OutputFunction | None = None
        self._chat: list[dict[str, Any]] = []  # copies of the group chat's messages (see _chat_copies)
        self.mcp = MCPSessions()  # MCP servers of LLM tools: started with the agents, stopped by run()
        # Runs that share pools (run(..., http=...)) take prepared agents and give them back at
        # their end (stateflow.episode.pool); a run on its own builds its agents.
        self._pool: AgentPool | None = None
        self._pool_key: Any = None
        try:
            if backends.http is not None and poolable(flow):
                self._pool = backends.http.shared(AgentPool, AgentPool)
                self.agents, self._pool_key = self._pool.take(self)
            else:
                self.agents = build_agents(self)
        except BaseException:
            self.mcp.close()
            raise

    def take_answer(self) -> str:
        """The answer given to ``resume`` for the question the run paused on (once)."""
        assert self._answer is not None
        text, self._answer, self.pending = self._answer, None, None
        return text

    # δ as speaker selection ---------------------------------------------------------------------

    def select(self, last_speaker: Agent, groupchat: GroupChat) -> Agent | None:
        """AutoGen's speaker selection: the agent of the next output function, or ``None`` to end."""
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
        agents = self.agents
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
                self.current = out
                if isinstance(out, Prompt):
                    return agents.prompter
                if isinstance(out, (Tool, Parallel)):
                    return agents.executor
                if isinstance(out, AutoGenAgent):
                    return agents.bridges[out.name]
                if isinstance(out, Human):
                    assert agents.human is not None
                    return agents.human
                return agents.llm_agents[self.view.llm_agent_name(state)]
            if state.final:
                self.stop_reason = "final"
                return None
            if len(self.transitions) >= self.max_transitions:
                self.stop_reason = "max_transitions"
                return None
            self.judges.new_decision()
            rule = self.flow.decide(self.ctx, step=len(self.steps) - 1)
            if rule is None:
                last = self.history.last()
                raise NoTransitionError(
                    state.name, [str(r) for r in self.flow.rules_from(state.name)], last.content if last else None
                )
            record = TransitionRecord(state.name, rule.target, rule.label, len(self.steps) - 1)
            self.transitions.append(record)
            self.ctx.state = rule.target
            self._cursor = 0
            if self.on_transition is not None:
                self.on_transition(record)

    # checkpoints ------------------------------------------------------------------------------

    def snapshot(self) -> RunState:
        """The run's state now (only consistent between replies: at a transition or a pause)."""
        return RunState(
            task=self.ctx.task,
            view=self.view.name,
            state=self.ctx.state,
            cursor=self._cursor,
            history=History(self.history),  # History copies the list (the messages are frozen)
            steps=list(self.steps),
            transitions=list(self.transitions),
            vars=dict(self.ctx.vars),
            board=self.ctx.board,
            chat=self._chat_copies(),
            started_at=self.started_at,
            models=dict(self.backends.assignment.by_state),
            pending=self.pending,
        )

    def _chat_copies(self) -> list[dict[str, Any]]:
        """The group chat's messages, copied (AutoGen owns the originals): each message is copied
        once and the copy is shared by later snapshots while the original still equals it, so a
        checkpoint's encoder recognises the old messages by identity instead of comparing them."""
        messages = self.agents.groupchat.messages
        copies = self._chat
        if len(messages) < len(copies) or messages[: len(copies)] != copies:  # AutoGen changed one
            copies.clear()
        copies.extend(dict(m) for m in messages[len(copies) :])
        return list(copies)

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

    # driver ---------------------------------------------------------------------------------

    def _unexplained_end(self, reasons: list[str]) -> ChatEndedError:
        """The error for a chat AutoGen ended although the flow had not (no final state, bound
        or error): what AutoGen said, who spoke last, where the flow was."""
        messages = self.agents.groupchat.messages
        said = messages[-1] if messages else {}
        current = self.current
        return ChatEndedError(
            reason=reasons[-1] if reasons else None,
            state=self.ctx.state,
            agent=said.get("name"),
            output=current.label if current is not None else None,
            transitions=len(self.transitions),
        )

    def run(self) -> RunResult:
        """Run the chat to the end (or to a pause) and return what happened; a failure is kept in
        ``self.failure`` and reported in the result's ``error``, never raised from here."""
        stream = _RunStream(self.human_input)
        manager = self.agents.manager
        with IOStream.set_default(stream):
            try:
                if self.start is None:
                    self.history.append(Message("user", USER, self.flow.initial, Kind.PROMPT, self.ctx.task))
                    self.agents.user.initiate_chat(manager, message=self.ctx.task, clear_history=True, silent=True)
                else:
                    # AutoGen's own resume loads the saved group messages into every agent; the last
                    # one is sent again to restart the chat, which then asks our selector as before.
                    last_agent, last_message = manager.resume(messages=self.start.chat, silent=True)
                    last_agent.initiate_chat(manager, message=last_message, clear_history=False, silent=True)
            except BaseException as err:
                self.failure = self.failure or err
            finally:
                self.mcp.close()
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
        if self._pool is not None:  # the agents are done with this run (a failed run's are dropped)
            pool, self._pool = self._pool, None
            pool.give_back(self._pool_key, self.agents, self)
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

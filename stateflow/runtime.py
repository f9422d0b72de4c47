"""Running a flow: :func:`run`, the one place where a run's I/O starts.

``run`` resolves the model assignment, builds the run's model clients
(:mod:`stateflow.backends.autogen_clients` over :mod:`stateflow.backends.endpoint`), runs one
:class:`~stateflow.episode.Episode` (the AutoGen group chat) in the chosen
:class:`~stateflow.views.View`, exports telemetry and returns the :class:`RunResult`.

Importing this module changes no global state; the first run installs one filter on AutoGen's
``autogen.oai.client`` logger (see :func:`quiet_custom_client_notice`).
"""

from __future__ import annotations

import contextlib
import logging
import socket
import time
import uuid
from collections.abc import Mapping
from typing import Any

from autogen.io.base import InputStream

from stateflow.backends.autogen_clients import LLMBackends
from stateflow.backends.call_log import CallLog
from stateflow.backends.cassette import Cassette
from stateflow.backends.http import HttpClients
from stateflow.backends.scripted import ScriptedLLM
from stateflow.checkpoint import Checkpointer
from stateflow.emitter import Emitter
from stateflow.episode import Episode
from stateflow.errors import CheckpointError, ConfigError, RunCancelled
from stateflow.events import Event, EventSink, Interrupted, RunFinished, RunStarted, StateEntered
from stateflow.fingerprint import flow_fingerprint
from stateflow.flow import Flow
from stateflow.outputs import LLM, Human
from stateflow.parallel import Parallel
from stateflow.profiles import ModelAssignment, ModelProfile
from stateflow.run_state import RunState
from stateflow.subflow import expand_subflows
from stateflow.threads import ThreadJournal, check_flow, latest_to_continue, load_position
from stateflow.trace import RunResult
from stateflow.views import StateFlowView, View

__all__ = ["fork", "quiet_custom_client_notice", "resume", "run"]

_AUTOGEN_CLIENT_LOGGER = "autogen.oai.client"


def _drop_custom_client_notice(record: logging.LogRecord) -> bool:
    """AutoGen logs an INFO line for every wrapper built with a custom client; runs build one per
    scripted or cassette profile, so the line is noise. Everything else from that logger passes."""
    return "Detected custom model client" not in record.getMessage()


def quiet_custom_client_notice() -> None:
    """Drop AutoGen's "Detected custom model client" notice, on that one logger only.

    Idempotent: ``Logger.addFilter`` adds one filter object once, however many runs call it.
    ``run`` calls it; nothing does at import.
    """
    logging.getLogger(_AUTOGEN_CLIENT_LOGGER).addFilter(_drop_custom_client_notice)


_Models = str | ModelProfile | Mapping[str, str | ModelProfile] | ModelAssignment | None


def _backends(
    flow: Flow,
    models: _Models,
    scripts: Mapping[str, ScriptedLLM] | None,
    cassette: Cassette | None,
    http: HttpClients | None,
    calls: CallLog | None = None,
) -> LLMBackends:
    """The run's model clients; every state's and judge's profile is resolved first (a bad one
    fails here, before any call)."""
    assignment = ModelAssignment.of(models)
    assignment.check_states(list(flow.states), f"flow {flow.name!r}")
    for st in flow.llm_states():
        for out in st.outputs:
            if isinstance(out, LLM):
                assignment.profile_for(st.name, out.profile)
    for st in flow.states.values():  # a parallel's LLM branches, likewise before any call
        for out in st.outputs:
            for branch in out.branches if isinstance(out, Parallel) else ():
                if isinstance(branch, LLM):
                    assignment.profile_for(st.name, branch.profile)
    for judge in flow.judges():
        assignment.profile_for(flow.initial, judge.profile)
    quiet_custom_client_notice()
    return LLMBackends(assignment, scripts, cassette, http, calls)


def _defers(flow: Flow, view: View) -> bool:
    return any(isinstance(o, Human) and o.defer for st in flow.states.values() for o in view.emitted_outputs(st))


def _announced(episode: Episode, on_event: EventSink, thread_id: str | None, tokens: bool) -> None:
    """Report ``episode``'s events to ``on_event``: its start now, every step and transition as
    its trace records it, every token as its model streams it (with ``tokens``)."""
    emitter = Emitter(on_event, episode.ctx.state, len(episode.transitions))
    on_event(RunStarted(episode.flow.name, episode.view.name, episode.ctx.task, episode.ctx.state, thread_id))
    on_event(StateEntered(episode.ctx.state, len(episode.transitions)))
    episode.log.on_step = emitter.step
    episode.log.on_call = emitter.call
    episode.on_transition = emitter.transition
    if tokens:
        episode.backends.emitter = emitter


def _with_progress(
    name: str, on_event: EventSink | None, tokens: bool, progress: bool | None
) -> tuple[EventSink | None, bool]:
    """``on_event`` and ``tokens`` with :mod:`stateflow.progress`'s printer added when progress is on.

    The printer asks for no tokens: alone, it leaves model calls as they are without a sink."""
    from stateflow.progress import ProgressPrinter, progress_enabled

    if not progress_enabled(setting=progress):
        return on_event, tokens
    printer = ProgressPrinter(name)
    if on_event is None:
        return printer, False
    inner = on_event

    def both(event: Event) -> None:
        printer(event)
        inner(event)

    return both, tokens


def _finish(
    episode: Episode,
    telemetry: Any,
    raise_errors: bool,
    thread_id: str | None,
    on_event: EventSink | None = None,
    tokens: bool = True,
) -> RunResult:
    if on_event is not None:
        _announced(episode, on_event, thread_id, tokens)
    result = episode.run()
    result.thread_id = thread_id
    if on_event is not None:
        with contextlib.suppress(RunCancelled):  # a consumer that left has nothing to receive
            if result.pending is not None:
                on_event(Interrupted(result.pending, thread_id))
            on_event(RunFinished(result))
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


def _view_for(saved: str, view: View | None, thread_id: str) -> View:
    """The view a thread continues in: the one it was saved in (only StateFlow's is built here;
    the core does not import the SF_Agent package)."""
    if view is None:
        if saved != StateFlowView.name:
            raise ConfigError(f"thread {thread_id!r} runs in the {saved!r} view: pass view= (e.g. SFAgentView())")
        return StateFlowView()
    if view.name != saved:
        raise ConfigError(f"thread {thread_id!r} runs in the {saved!r} view, not {view.name!r}")
    return view


def run(
    flow: Flow,
    task: str,
    *,
    models: _Models = None,
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
    thread_id: str | None = None,
    checkpointer: Checkpointer | None = None,
    flow_ref: str | None = None,
    calls: CallLog | None = None,
    on_event: EventSink | None = None,
    tokens: bool = True,
    progress: bool | None = None,
) -> RunResult:
    """Run ``flow`` on ``task`` and return its exit state, history and trace.

    With a ``checkpointer`` the run is a *thread*: a checkpoint is saved when it enters its first
    state and after every transition (see :mod:`stateflow.threads`). A ``thread_id`` that
    already has checkpoints is continued from its latest one (after a crash, or a failure such
    as a model server that went away): what was done before it is not done again.

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
        vars: initial per-run variables for tools (JSON values when checkpointed).
        timeout_s: wall-clock budget; checked before each output function (a model call in
            flight is bounded by its profile's timeout), then the run fails with ``RunTimeout``.
        raise_errors: re-raise the exception that ended a run (the partial result is attached
            as ``err.result``); with False the result carries ``stop_reason="error"``.
        human_input: where :class:`~stateflow.outputs.Human` output functions read answers: any
            AutoGen ``InputStream`` (default: the console).
        telemetry: a :class:`stateflow.telemetry.Telemetry` exporting the run as OpenTelemetry
            spans, ``False`` for none; default: from the environment (``STATEFLOW_OTEL`` or the
            standard ``OTEL_EXPORTER_OTLP_*`` variables), off when none is set.
        thread_id: the thread to save the run under, or to continue (default with a
            checkpointer: a new random id, returned as ``RunResult.thread_id``).
        checkpointer: where the thread's checkpoints go (:mod:`stateflow.checkpoint`).
        flow_ref: how to load ``flow`` again (a registered name or ``module:attribute``), saved
            with the thread so that ``stateflow resume`` in another process can rebuild it.
        calls: keeps every model call of the run (state, profile, reply, usage); built with
            ``CallLog(replay=...)`` it answers the run's first calls from a recording instead of
            asking a model (:mod:`stateflow.backends.call_log`; ``stateflow whatif`` uses it).
        on_event: receives every event of the run (:mod:`stateflow.events`) on the run's thread;
            model calls then stream their tokens. What it raises ends the run (raise
            :class:`~stateflow.errors.RunCancelled` to cancel it). :func:`stateflow.live.stream`
            and :func:`stateflow.live.astream` are built on it.
        tokens: with ``on_event``, stream every model reply and report its token deltas (False:
            steps and transitions only; model calls are made as without ``on_event``).
        progress: print a line to standard error per state entered, per model reply and at the
            end (:mod:`stateflow.progress`); ``None`` (default): only when standard error is a
            terminal and ``STATEFLOW_PROGRESS`` is not ``0``. The result is the same either way.

    Raises:
        ConfigError: a state's model profile is unknown or unusable; a per-state model key that
            names no state of the flow (the message lists the states and the closest match);
            a thread id without a
            checkpointer; a deferred question without a checkpointer.
        CheckpointMismatch: the thread was saved by a flow with another definition.
        CheckpointError: the thread finished, is paused (use :func:`resume`), or another process
            is continuing it (``ThreadBusy``).
        NoTransitionError: no rule matched after a state (when ``raise_errors``).
        LLMError: a model call failed after retries (when ``raise_errors``).
        ChatEndedError: AutoGen ended the chat before the flow ended (when ``raise_errors``).
    """
    flow = expand_subflows(flow)  # subflow states run as Outer.Inner states of one loop
    view = view or StateFlowView()
    if checkpointer is None:
        if thread_id is not None:
            raise ConfigError(f"thread_id={thread_id!r} needs a checkpointer to save the thread in")
        if _defers(flow, view):
            raise ConfigError(
                f"flow {flow.name!r} asks a deferred question (Human(defer=True)): a paused run must be saved "
                "somewhere, so pass checkpointer= (e.g. SQLiteCheckpointer('runs.db'))"
            )
    backends = _backends(flow, models, scripts, cassette, http, calls)
    deadline = time.monotonic() + timeout_s if timeout_s else None
    limit = max_transitions or flow.max_transitions
    on_event, tokens = _with_progress(flow.name, on_event, tokens, progress)

    def episode(start: RunState | None = None, journal: ThreadJournal | None = None) -> Episode:
        return Episode(
            flow,
            task,
            view,
            backends,
            env,
            dict(vars or {}),
            limit,
            deadline,
            human_input,
            start=start,
            journal=journal,
        )

    if checkpointer is None:
        return _finish(episode(), telemetry, raise_errors, None, on_event, tokens)
    thread_id = thread_id or uuid.uuid4().hex[:12]
    fingerprint = flow_fingerprint(flow)
    with checkpointer.claim(thread_id, _owner()):
        start: RunState | None = None
        next_step = 0
        if checkpointer.latest(thread_id) is not None:
            latest = latest_to_continue(checkpointer, thread_id, answering=False)
            check_flow(latest, flow, fingerprint)
            start = load_position(latest, flow)
            if start.task != task:
                raise ConfigError(
                    f"thread {thread_id!r} runs task {start.task[:80]!r}, not {task[:80]!r}: "
                    "use another thread id for another task"
                )
            view = _view_for(start.view, view, thread_id)
            next_step = latest.step + 1
        journal = ThreadJournal(checkpointer, thread_id, flow, fingerprint, next_step, extra=_ref(flow_ref))
        return _finish(episode(start, journal), telemetry, raise_errors, thread_id, on_event, tokens)


def resume(
    thread_id: str,
    answer: str | None = None,
    *,
    checkpointer: Checkpointer,
    flow: Flow,
    models: _Models = None,
    view: View | None = None,
    env: Any = None,
    scripts: Mapping[str, ScriptedLLM] | None = None,
    http: HttpClients | None = None,
    max_transitions: int | None = None,
    timeout_s: float | None = None,
    raise_errors: bool = True,
    human_input: InputStream | None = None,
    telemetry: Any = None,
    on_event: EventSink | None = None,
    progress: bool | None = None,
) -> RunResult:
    """Continue a saved thread: answer the question a paused run waits on, or (``answer=None``)
    go on from the latest checkpoint of a run that crashed or failed.

    ``flow`` must be the definition that saved the thread (its fingerprint is checked);
    ``models`` defaults to the profile names the thread ran with. Other arguments (``progress``
    too) as for :func:`run`.

    Raises:
        ThreadNotFound: no such thread.
        CheckpointMismatch: ``flow`` is not the definition that saved the thread.
        CheckpointError: the thread finished, waits for an answer that was not given (or was
            given one it does not wait for), or another process is continuing it.
    """
    flow = expand_subflows(flow)
    fingerprint = flow_fingerprint(flow)
    with checkpointer.claim(thread_id, _owner()):
        latest = latest_to_continue(checkpointer, thread_id, answering=answer is not None)
        check_flow(latest, flow, fingerprint)
        start = load_position(latest, flow)
        view = _view_for(start.view, view, thread_id)
        backends = _backends(flow, models if models is not None else start.models or None, scripts, None, http)
        journal = ThreadJournal(
            checkpointer, thread_id, flow, fingerprint, latest.step + 1, extra=_ref(latest.payload.get("flow_ref"))
        )
        episode = _continued(flow, start, view, backends, env, max_transitions, timeout_s, human_input, journal, answer)
        on_event, tokens = _with_progress(flow.name, on_event, True, progress)
        return _finish(episode, telemetry, raise_errors, thread_id, on_event, tokens)


def fork(
    thread_id: str,
    at: int,
    *,
    checkpointer: Checkpointer,
    flow: Flow,
    models: _Models = None,
    view: View | None = None,
    answer: str | None = None,
    new_thread_id: str | None = None,
    env: Any = None,
    scripts: Mapping[str, ScriptedLLM] | None = None,
    http: HttpClients | None = None,
    max_transitions: int | None = None,
    timeout_s: float | None = None,
    raise_errors: bool = True,
    human_input: InputStream | None = None,
    telemetry: Any = None,
    on_event: EventSink | None = None,
    progress: bool | None = None,
) -> RunResult:
    """Start a new thread from checkpoint ``at`` of ``thread_id`` and run it to its end.

    Everything the source run did up to that checkpoint is reused as it was (its history, trace
    and usage; no model is asked again); from there the new thread runs with ``models`` and
    ``flow``, which may differ from the source's: a fork is how a run is replayed with another
    model or prompt from any state. The new thread's step 0 records its parent
    ``(thread_id, at)``.

    Args:
        answer: the answer, when the checkpoint is a paused question.
        new_thread_id: the new thread's id (default: ``<thread_id>.<random>``).

    The other arguments are as for :func:`run`.

    Raises:
        ThreadNotFound / CheckpointNotFound: no such thread or step.
        ConfigError: the checkpoint's state is not a state of ``flow``.
    """
    flow = expand_subflows(flow)
    source = checkpointer.get(thread_id, at)
    start = load_position(source, flow)
    view = _view_for(start.view, view, thread_id)
    if (start.pending is not None) != (answer is not None):
        raise CheckpointError(
            f"thread {thread_id!r} step {at} "
            + ("waits for an answer: fork(..., answer=...)" if start.pending is not None else "asks no question")
        )
    if source.status.value in ("finished", "failed") and start.stop_reason:
        start.stop_reason, start.error = "", None  # the new thread continues from the position, not the end
    new_id = new_thread_id or f"{thread_id}.{uuid.uuid4().hex[:6]}"
    fingerprint = flow_fingerprint(flow)
    backends = _backends(flow, models if models is not None else start.models or None, scripts, None, http)
    with checkpointer.claim(new_id, _owner()):
        if checkpointer.latest(new_id) is not None:
            raise CheckpointError(f"thread {new_id!r} already exists; choose another new_thread_id")
        journal = ThreadJournal(checkpointer, new_id, flow, fingerprint, 0, parent=(thread_id, at))
        if fingerprint == source.flow_fingerprint:  # the same flow: the same way to load it
            journal.extra = _ref(source.payload.get("flow_ref"))
        journal.save(start, "paused" if start.pending is not None else "running")
        episode = _continued(flow, start, view, backends, env, max_transitions, timeout_s, human_input, journal, answer)
        on_event, tokens = _with_progress(flow.name, on_event, True, progress)
        return _finish(episode, telemetry, raise_errors, new_id, on_event, tokens)


def _continued(
    flow: Flow,
    start: RunState,
    view: View,
    backends: LLMBackends,
    env: Any,
    max_transitions: int | None,
    timeout_s: float | None,
    human_input: InputStream | None,
    journal: ThreadJournal,
    answer: str | None,
) -> Episode:
    """The episode that goes on from a saved state (``resume`` and ``fork``): its task and vars
    are the saved ones."""
    deadline = time.monotonic() + timeout_s if timeout_s else None
    limit = max_transitions or flow.max_transitions
    return Episode(
        flow,
        start.task,
        view,
        backends,
        env,
        None,
        limit,
        deadline,
        human_input,
        start=start,
        journal=journal,
        answer=answer,
    )


def _ref(flow_ref: Any) -> dict[str, str]:
    return {"flow_ref": flow_ref} if isinstance(flow_ref, str) and flow_ref else {}


def _owner() -> str:
    """Who holds a thread while continuing it (shown to a second process that tries)."""
    return socket.gethostname()  # the checkpointer adds the process and thread

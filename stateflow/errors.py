"""The exception hierarchy: one root, subclasses that keep their context as attributes."""

from __future__ import annotations

import errno
import re
import socket
from typing import Any
from urllib.parse import urlsplit, urlunsplit

__all__ = [
    "ChatEndedError",
    "CheckpointConflict",
    "CheckpointCorrupt",
    "CheckpointError",
    "CheckpointInvalid",
    "CheckpointMismatch",
    "CheckpointNotFound",
    "CheckpointSchemaUnsupported",
    "CheckpointStoreUnavailable",
    "ClaimLost",
    "ConditionError",
    "ConfigError",
    "FlowDefinitionError",
    "LLMError",
    "NoTransitionError",
    "ParallelBranchError",
    "ParallelMergeError",
    "RunCancelled",
    "RunTimeout",
    "StateDefinitionError",
    "StateFlowError",
    "StructuredOutputError",
    "ThreadBusy",
    "ThreadNotContinuable",
    "ThreadNotFound",
    "ToolError",
    "listen_error",
    "redact_dsn",
    "redact_secrets",
]


class StateFlowError(Exception):
    """Root of every error StateFlow raises on purpose."""


class ConfigError(StateFlowError):
    """A profile, assignment or config file is invalid; the message names where and why."""


class FlowDefinitionError(StateFlowError):
    """A flow is malformed (unknown state, no exit, unreachable final state, ...).

    Attributes:
        flow: name of the flow being built.
        problems: every problem found (all are reported at once, not just the first).
    """

    def __init__(self, flow: str, problems: list[str]):
        self.flow = flow
        self.problems = list(problems)
        lines = "\n".join(f"  - {p}" for p in self.problems)
        super().__init__(f"flow {flow!r} is invalid:\n{lines}")


class StateDefinitionError(FlowDefinitionError):
    """A state is malformed (bad name, an output that is not an output function, ...), found
    when the state itself is built, before any flow holds it.

    Attributes:
        state: the state's name as given.
        flow: always ``None`` (no flow holds the state yet).
        problems: every problem found.
    """

    def __init__(self, state: str, problems: list[str]):
        self.state = state
        self.flow = None  # type: ignore[assignment]
        self.problems = list(problems)
        lines = "\n".join(f"  - {p}" for p in self.problems)
        StateFlowError.__init__(self, f"state {state!r} is invalid:\n{lines}")


class ConditionError(StateFlowError):
    """A transition rule's condition raised while the run chose the next state.

    Attributes:
        rule: the rule's description (``Solve -> Verify when ...``).
        state: the state the run was leaving.
        step: the index of the last step recorded before the rules were checked (``None`` when
            the caller did not say).
        cause: the exception the condition raised (also ``__cause__``).
    """

    def __init__(self, rule: str, state: str, step: int | None, cause: BaseException):
        self.rule, self.state, self.step, self.cause = rule, state, step, cause
        at = f" after step {step}" if step is not None else ""
        super().__init__(
            f"the condition of rule {rule!r} raised in state {state!r}{at}: {type(cause).__name__}: {cause}"
        )


class ToolError(StateFlowError):
    """A ``Tool`` output function raised (its code failed; not an observation it returned).

    Attributes:
        tool: the tool's name.
        state: the state whose output function it is.
        step: the index the tool's step would have had.
        cause: the exception the tool raised (also ``__cause__``).
    """

    def __init__(self, tool: str, state: str, step: int, cause: BaseException):
        self.tool, self.state, self.step, self.cause = tool, state, step, cause
        super().__init__(f"tool {tool!r} raised in state {state!r} at step {step}: {type(cause).__name__}: {cause}")


class NoTransitionError(StateFlowError):
    """No transition rule held after a state finished: the run cannot continue.

    Attributes:
        state: the state that finished.
        rules: descriptions of the rules tried, in order.
        last_message: content of the last message in the history.
    """

    def __init__(self, state: str, rules: list[str], last_message: Any):
        self.state = state
        self.rules = list(rules)
        self.last_message = last_message
        tried = "; ".join(self.rules) or "no rules leave this state"
        super().__init__(
            f"no transition from state {state!r} matched (tried: {tried}); "
            f"last message: {str(last_message)[:200]!r}. Add a fallback rule without a condition."
        )


class ChatEndedError(StateFlowError):
    """AutoGen ended the group chat although the flow had not ended (no final state reached,
    transition bound not hit, no error raised): the run cannot say why it stopped, so it fails.

    Attributes:
        reason: the termination reason AutoGen gave (e.g. ``"Maximum rounds (12) reached"``),
            ``None`` if it gave none.
        state: the state the flow was in.
        agent: the agent that spoke last.
        output: the label of the output function being served (``llm``, ``tool[x]``...).
        transitions: how many transitions the run had taken.
    """

    def __init__(self, *, reason: str | None, state: str, agent: str | None, output: str | None, transitions: int):
        self.reason = reason
        self.state = state
        self.agent = agent
        self.output = output
        self.transitions = transitions
        super().__init__(
            f"AutoGen ended the chat in state {state!r} after {transitions} transitions "
            f"({reason or 'no termination reason given'}); last speaker: {agent!r}, serving output "
            f"{output!r}. The flow neither reached a final state nor its transition bound: check the "
            "view's output functions and any AutoGen agent that can end a chat"
        )


class StructuredOutputError(StateFlowError):
    """A reply asked for as a typed object (``LLM(schema=...)``) did not validate, even after
    the model was re-asked once with the validation error.

    Attributes:
        state: the state whose output function asked.
        schema: the pydantic model's name.
        errors: the validation error of each attempt, in order.
        reply: the last reply (clipped to 500 characters).
        attempts: each attempt's ``(reply, usage)``, in order: the calls were made and answered,
            so they are recorded (and counted) like any other.
    """

    def __init__(
        self, state: str, schema: str, errors: list[str], reply: str, *, attempts: tuple[tuple[str, Any], ...] = ()
    ):
        self.state, self.schema, self.errors, self.reply = state, schema, list(errors), reply[:500]
        self.attempts = attempts
        attempts = "; ".join(f"attempt {i}: {e}" for i, e in enumerate(self.errors, 1))
        super().__init__(
            f"state {state!r}: the reply is not a valid {schema} after {len(self.errors)} attempts ({attempts}); "
            f"last reply: {self.reply[:200]!r}"
        )


class ParallelBranchError(StateFlowError):
    """A branch of a :class:`~stateflow.parallel.Parallel` output function failed and its merge
    does not handle failures (``Parallel(..., merge_failures=False)``, the default).

    Attributes:
        state: the state running the branches.
        branch: the failing branch's name.
        cause: the branch's exception (also ``__cause__``).
    """

    def __init__(self, state: str, branch: str, cause: BaseException):
        self.state, self.branch, self.cause = state, branch, cause
        super().__init__(f"state {state!r}: parallel branch {branch!r} failed: {type(cause).__name__}: {cause}")


class ParallelMergeError(StateFlowError):
    """The merge function of a :class:`~stateflow.parallel.Parallel` raised.

    Attributes:
        state: the state running the branches.
        merge: the merge function's name.
        step: the index the merge's step would have had.
        cause: the exception the merge raised (also ``__cause__``).
    """

    def __init__(self, state: str, merge: str, step: int, cause: BaseException):
        self.state, self.merge, self.step, self.cause = state, merge, step, cause
        super().__init__(
            f"merge {merge!r} of the parallel branches raised in state {state!r} at step {step}: "
            f"{type(cause).__name__}: {cause}"
        )


class RunTimeout(StateFlowError):
    """A run exceeded its wall-clock budget (checked before each output function)."""


class RunCancelled(StateFlowError):
    """A run was cancelled from outside (its stream's consumer went away, or ``arun`` was
    cancelled); raised at its next event, so a streamed model reply stops within one token."""


class LLMError(StateFlowError):
    """A model call failed after retries (timeout, HTTP error, malformed response).

    Attributes:
        profile: the profile name that failed.
        state: the state whose output function made the call.
    """

    def __init__(self, message: str, *, profile: str | None = None, state: str | None = None):
        self.profile = profile
        self.state = state
        super().__init__(message)

    def __str__(self) -> str:
        # the state is learnt after the call failed (the caller sets it): said once it is known
        message = super().__str__()
        return message if self.state is None else f"in state {self.state!r}: {message}"


class CheckpointError(StateFlowError):
    """Base of every checkpoint storage error (:mod:`stateflow.checkpoint`)."""


class CheckpointInvalid(CheckpointError, ValueError):
    """A checkpoint handed to a checkpointer cannot be stored as it is (e.g. a payload that is not
    JSON); nothing was written.

    Attributes:
        thread_id: the thread of the checkpoint.
        step: its step.
        problem: what is wrong.
    """

    def __init__(self, thread_id: str, step: int, problem: str):
        self.thread_id = thread_id
        self.step = step
        self.problem = problem
        super().__init__(f"checkpoint of thread {thread_id!r} step {step} cannot be stored: {problem}")


class CheckpointCorrupt(CheckpointError):
    """A stored checkpoint cannot be read back (garbage, truncated, wrong types, unknown status).

    Attributes:
        where: the location read (backend, thread, step), as given by the reader.
        problem: what is wrong with it.
        thread_id: the thread, when the reader knows it.
        step: the step, when the reader knows it.
    """

    def __init__(self, where: str, problem: str, *, thread_id: str | None = None, step: int | None = None):
        self.where = where
        self.problem = problem
        self.thread_id = thread_id
        self.step = step
        super().__init__(f"{where}: {problem}")


class CheckpointSchemaUnsupported(CheckpointCorrupt):
    """A checkpoint was written by a newer StateFlow (its ``schema_version`` is above ours).

    Attributes:
        found: the schema version stored.
        supported: the newest version this StateFlow reads.
    """

    def __init__(self, where: str, found: int, supported: int, **kw: Any):
        self.found = found
        self.supported = supported
        super().__init__(
            where,
            f"schema_version {found} is newer than this StateFlow reads ({supported}); "
            "upgrade StateFlow to read it (it is left untouched)",
            **kw,
        )


class CheckpointConflict(CheckpointError):
    """A put did not continue its thread: its step is not ``latest + 1`` (or 0 for a new thread).
    Typically a second writer of the same thread; nothing was written.

    Attributes:
        thread_id: the thread.
        step: the step that was tried.
        latest: the latest stored step (``None``: the thread has none).
    """

    def __init__(self, thread_id: str, step: int, latest: int | None):
        self.thread_id = thread_id
        self.step = step
        self.latest = latest
        expected = 0 if latest is None else latest + 1
        stored = "no checkpoint" if latest is None else f"latest stored step {latest}"
        super().__init__(
            f"thread {thread_id!r}: cannot write step {step} ({stored}; the next step is {expected}); "
            "another writer is probably continuing this thread: claim it before writing"
        )


class ThreadNotFound(CheckpointError):
    """No checkpoint exists for a thread.

    Attributes:
        thread_id: the thread asked for.
        where: the store asked (backend and location).
    """

    def __init__(self, thread_id: str, where: str):
        self.thread_id = thread_id
        self.where = where
        super().__init__(f"{where}: no thread {thread_id!r} (see `stateflow threads` for the stored ones)")


class CheckpointNotFound(CheckpointError):
    """A thread exists but has no checkpoint at the step asked for.

    Attributes:
        thread_id: the thread.
        step: the step asked for.
        latest: the thread's latest step (its steps are ``0..latest``).
        where: the store asked.
    """

    def __init__(self, thread_id: str, step: int, latest: int, where: str):
        self.thread_id = thread_id
        self.step = step
        self.latest = latest
        self.where = where
        super().__init__(f"{where}: thread {thread_id!r} has no step {step} (its steps are 0..{latest})")


class ClaimLost(CheckpointError):
    """The claim a run holds on its thread ended under it (the database session holding it died:
    a server restart, a dropped connection, an administrator ending the session). The run stops
    before writing anything more: another process may already have claimed the thread. The
    checkpoints written before stay readable; continue the thread with ``resume``.

    Attributes:
        thread_id: the thread.
        holder: who held the claim.
        where: the store (its address without the password).
        reason: what the check saw.
    """

    def __init__(self, thread_id: str, holder: str, where: str, reason: str):
        self.thread_id = thread_id
        self.holder = holder
        self.where = where
        self.reason = reason
        super().__init__(
            f"{where}: the claim of {holder} on thread {thread_id!r} was lost ({reason}); the run stops "
            "without writing another checkpoint; its last checkpoint stays readable: continue the thread "
            "with resume once the store is back"
        )


class ThreadBusy(CheckpointError):
    """Another holder (process or thread) has claimed the thread and is continuing it.

    Attributes:
        thread_id: the thread.
        holder: who holds it (the owner string it claimed with, and its process), if known.
    """

    def __init__(self, thread_id: str, holder: str | None):
        self.thread_id = thread_id
        self.holder = holder
        super().__init__(
            f"thread {thread_id!r} is being continued by {holder or 'another holder'}; "
            "wait for it to finish (a claim is released when its holder exits or dies)"
        )


_PASSWORD_KV = re.compile(r"(password\s*=\s*)('(?:[^'\\]|\\.)*'|\S+)", re.IGNORECASE)


def redact_dsn(dsn: str) -> str:
    """``dsn`` without its password, for messages and logs.

    Both PostgreSQL forms are handled: a URL (``postgresql://user:secret@host/db``) and key/value
    text (``host=h password=secret``).

    Example:
        >>> redact_dsn("postgresql://me:secret@db.example/runs")
        'postgresql://me:***@db.example/runs'
        >>> redact_dsn("host=/tmp dbname=runs password='s e'")
        'host=/tmp dbname=runs password=***'
    """
    if "://" in dsn:
        try:
            parts = urlsplit(dsn)
        except ValueError:  # malformed (e.g. "[::1" without "]"): mask by pattern, never echo it whole
            return redact_secrets(dsn)
        netloc = parts.netloc
        if "@" in netloc:
            userinfo, host = netloc.rsplit("@", 1)
            if ":" in userinfo:
                userinfo = userinfo.split(":", 1)[0] + ":***"
            netloc = f"{userinfo}@{host}"
        query = _PASSWORD_KV.sub(r"\1***", parts.query.replace("&", " ")).replace(" ", "&")
        return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))
    return _PASSWORD_KV.sub(r"\1***", dsn)


# "scheme://user:secret@" anywhere in a text (a URL inside a driver's message, even a malformed one)
_URL_USERINFO = re.compile(r"(\b[a-z][a-z0-9+.-]*://[^\s:/@'\"]*):[^\s@'\"]*@", re.IGNORECASE)
# an Authorization header's credentials, and OpenAI-style secret keys
_BEARER = re.compile(r"(\bBearer\s+)[A-Za-z0-9._~+/=-]+", re.IGNORECASE)
_API_KEY = re.compile(r"\bsk-[A-Za-z0-9_-]{16,}")


def redact_secrets(text: str) -> str:
    """``text`` with the secrets a message can carry masked: URL passwords, ``password=`` values,
    bearer tokens and ``sk-`` API keys. The command line passes every message it prints through
    it, so a driver error that quotes a connection string never prints a password.

    Example:
        >>> redact_secrets('invalid URI: "postgresql://alice:s3cret@[::1/db"')
        'invalid URI: "postgresql://alice:***@[::1/db"'
        >>> redact_secrets("host=h password=pw user=u")
        'host=h password=*** user=u'
    """
    text = _URL_USERINFO.sub(r"\1:***@", text)
    text = _PASSWORD_KV.sub(r"\1***", text)
    text = _BEARER.sub(r"\1***", text)
    return _API_KEY.sub("sk-***", text)


class ThreadNotContinuable(CheckpointError):
    """A thread cannot continue the way asked: it has finished, it waits for an answer that was not
    given, or an answer was given that it does not wait for. The message gives the Python call;
    the command line words its own advice from the attributes.

    Attributes:
        thread_id: the thread.
        status: its latest status (``finished``, ``paused``, ``running`` or ``failed``).
        state: the state it stands in.
        question: the question it waits for (a paused thread), else ``None``.
        answering: whether an answer was given.
    """

    def __init__(self, thread_id: str, status: str, state: str, question: str | None, *, answering: bool):
        self.thread_id, self.status, self.state = thread_id, status, state
        self.question, self.answering = question, answering
        if status == "finished":
            advice = (
                f"has finished (in state {state!r}); "
                f"fork({thread_id!r}, at=STEP) starts a new thread from any of its checkpoints"
            )
        elif status == "paused":
            advice = (
                f"is paused in state {state!r}, waiting for an answer to "
                f"{(question or '')[-120:]!r}: resume({thread_id!r}, answer=...)"
            )
        else:
            advice = f"is {status}, not waiting for an answer: resume({thread_id!r}) continues it"
        super().__init__(f"thread {thread_id!r} {advice}")


class CheckpointStoreUnavailable(CheckpointError):
    """The checkpoint store cannot be reached (a database server went away or refuses connections).
    What was stored before stays stored; retry when the server is back.

    Attributes:
        dsn: the store's address, without its password.
        reason: the driver's message.
    """

    def __init__(self, dsn: str, reason: str):
        self.dsn = redact_dsn(dsn)
        self.reason = redact_secrets(reason.replace(dsn, self.dsn)) if dsn else redact_secrets(reason)
        super().__init__(f"checkpoint store {self.dsn} is unavailable: {self.reason}")


class CheckpointMismatch(CheckpointError):
    """A thread is continued under a flow whose definition differs from the one that saved it
    (their fingerprints differ). ``fork(..., flow=...)`` branches off under another flow.

    Attributes:
        thread_id: the thread.
        saved: ``(flow name, fingerprint)`` of the flow that saved it.
        given: ``(flow name, fingerprint)`` of the flow given now.
    """

    def __init__(self, thread_id: str, saved: tuple[str, str], given: tuple[str, str], step: int):
        self.thread_id, self.saved, self.given = thread_id, saved, given
        super().__init__(
            f"thread {thread_id!r} was saved by flow {saved[0]!r} (fingerprint {saved[1][:12]}), not by this flow "
            f"{given[0]!r} (fingerprint {given[1][:12]}): the definition changed. Continue it with the flow that "
            f"saved it, or branch off with fork({thread_id!r}, at={step}, flow=...)"
        )


def listen_error(host: str, port: int, err: OSError | OverflowError) -> ConfigError:
    """The one-line error for a server that could not listen on ``host:port`` (``err``: what
    ``bind`` raised: an ``OSError``, or the ``OverflowError`` of a port above 65535)."""
    if isinstance(err, OverflowError):
        return ConfigError(f"--port {port}: out of range (0-65535)")
    if err.errno == errno.EADDRINUSE:
        return ConfigError(f"--port {port}: already in use on {host}; choose another (--port 0 picks a free one)")
    if isinstance(err, socket.gaierror):
        return ConfigError(f"--host {host}: unknown host name ({err.strerror or err})")
    if err.errno == errno.EADDRNOTAVAIL:
        return ConfigError(f"--host {host}: not an address of this machine ({err.strerror or err})")
    if err.errno == errno.EACCES:
        return ConfigError(f"--port {port}: not allowed for this user (ports below 1024 need privileges)")
    return ConfigError(f"cannot listen on {host}:{port} ({err.strerror or err})")

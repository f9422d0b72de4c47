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
import time
from collections.abc import Mapping
from typing import Any

from autogen.io.base import InputStream

from stateflow.backends.autogen_clients import LLMBackends
from stateflow.backends.cassette import Cassette
from stateflow.backends.http import HttpClients
from stateflow.backends.scripted import ScriptedLLM
from stateflow.episode import Episode
from stateflow.flow import Flow
from stateflow.outputs import LLM
from stateflow.profiles import ModelAssignment, ModelProfile
from stateflow.trace import RunResult
from stateflow.views import StateFlowView, View

__all__ = ["quiet_custom_client_notice", "run"]

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
        ChatEndedError: AutoGen ended the chat before the flow ended (when ``raise_errors``).
    """
    assignment = ModelAssignment.of(models)
    for st in flow.llm_states():
        for out in st.outputs:
            if isinstance(out, LLM):
                assignment.profile_for(st.name, out.profile)
    for judge in flow.judges():
        assignment.profile_for(flow.initial, judge.profile)
    quiet_custom_client_notice()
    backends = LLMBackends(assignment, scripts, cassette, http)
    deadline = time.monotonic() + timeout_s if timeout_s else None
    episode = Episode(
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

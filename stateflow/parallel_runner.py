"""How a run executes the branches of a :class:`~stateflow.parallel.Parallel` that need it.

An ``LLM`` branch is one model call on the history as it stands (its own AutoGen agent, named
``<state>__<branch>``, with the view's system message for the state), with the branch's
sampling fields, constraint and ``schema`` (validated and re-asked as in a state). A subflow
branch is a whole run of the subflow on the run's task, in a nested episode sharing the run's
model clients and environment and a copy of its vars; its steps join the trace under
``<state>.<branch>.<inner state>``. Everything here runs on the branches' threads.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from stateflow.context import Context
from stateflow.errors import LLMError, StructuredOutputError
from stateflow.messages import Usage
from stateflow.outputs import LLM
from stateflow.parallel import BranchFailed
from stateflow.state_agent import StateAgent
from stateflow.subflow import SEPARATOR, expand_subflows
from stateflow.trace import RunResult, Step

if TYPE_CHECKING:
    from stateflow.backends.autogen_clients import LLMBackends
    from stateflow.flow import Flow

__all__ = ["EpisodeBranches", "sum_usage"]


def sum_usage(usages: list[Usage]) -> Usage | None:
    """One usage record adding up ``usages`` (``None`` for none); models and profiles joined."""
    if not usages:
        return None
    models = ",".join(dict.fromkeys(u.model for u in usages if u.model))
    profiles = ",".join(dict.fromkeys(u.profile for u in usages if u.profile))
    return Usage(
        prompt_tokens=sum(u.prompt_tokens for u in usages),
        completion_tokens=sum(u.completion_tokens for u in usages),
        cached_tokens=sum(u.cached_tokens for u in usages),
        cost=sum(u.cost for u in usages),
        latency_s=sum(u.latency_s for u in usages),
        model=models,
        profile=profiles,
        calls=sum(u.calls for u in usages),
    )


class EpisodeBranches:
    """The :class:`~stateflow.parallel.BranchRunner` of one episode.

    Args:
        backends: the run's model clients.
        system_message: ``state -> system message`` of the agent serving that state's LLM calls.
        nested_run: ``(flow, task, vars) -> RunResult``: a whole run of a (flat) flow.
    """

    def __init__(
        self,
        backends: LLMBackends,
        system_message: Callable[[str], str],
        nested_run: Callable[[Flow, str, dict[str, Any]], RunResult],
    ):
        self.backends = backends
        self.system_message = system_message
        self.nested_run = nested_run

    def llm(self, out: LLM, ctx: Context, branch: str) -> tuple[str, Usage, Any]:
        from stateflow.structured import ask_structured

        profile = self.backends.profile(ctx.state, out.profile)
        fields = self.backends.request_fields(profile, out, ctx)
        safe = "".join(c if c.isalnum() or c in "_-" else "_" for c in f"{ctx.state}__{branch}")
        agent = StateAgent(safe, self.system_message(ctx.state))
        messages = [{"role": m.role if m.role == "assistant" else "user", "content": m.content} for m in ctx.history]

        def call(asked: list[dict[str, Any]]) -> tuple[str, Usage]:
            try:
                return self.backends.call(agent, profile, asked, None, fields)
            except LLMError as err:
                err.state = ctx.state
                raise

        text, usage = call(messages)
        if out.schema is None:
            return text, usage, None
        try:
            reply = ask_structured(out.schema, (text, usage), messages, call, state=ctx.state)
        except StructuredOutputError as err:  # both replies were paid for: keep their usage
            raise BranchFailed(err, sum_usage([u for _, u in err.attempts])) from err
        total = sum_usage([a.usage for a in reply.attempts])
        assert total is not None
        return reply.attempts[-1].text, total, reply.obj

    def subflow(self, flow: Flow, ctx: Context, branch: str) -> tuple[str, Usage | None, list[Step]]:
        result = self.nested_run(expand_subflows(flow), ctx.task, dict(ctx.vars))
        prefix = f"{ctx.state}{SEPARATOR}{branch}{SEPARATOR}"
        steps = [replace(s, state=prefix + s.state) for s in result.steps]
        usage = sum_usage([s.usage for s in result.steps if s.usage is not None])
        if result.error is not None:  # its steps up to the failure stay in the trace, calls counted
            cause = RuntimeError(f"subflow {flow.name!r} failed in state {result.exit_state!r}: {result.error}")
            raise BranchFailed(cause, usage, steps)
        last = result.history.last()
        return (last.content if last is not None else ""), usage, steps

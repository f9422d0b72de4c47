"""The reply of a :class:`~stateflow.parallel.Parallel` output function (said by ``environment``).

Branches run on threads (:func:`~stateflow.parallel.run_branches`); when all have finished,
each becomes a step ``<name>[<branch>]`` with its own start time, latency and usage (so the
trace shows them overlapping), a subflow branch's inner steps follow under their dotted names,
and the merge is the step ``<name>`` whose message is the merge's result. A failed branch fails
the state (after its step is recorded) unless the ``Parallel`` passes failures to its merge.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from autogen import Agent

from stateflow.errors import ParallelMergeError, RunCancelled, StateFlowError
from stateflow.messages import Kind, Message
from stateflow.outputs import ToolResult
from stateflow.parallel import Parallel, run_branches
from stateflow.parallel_runner import EpisodeBranches
from stateflow.trace import RunResult
from stateflow.views import ASSISTANT

if TYPE_CHECKING:
    from stateflow.episode.loop import Episode
    from stateflow.flow import Flow

__all__ = ["branch_runner", "parallel_reply"]


def branch_runner(ep: Episode) -> EpisodeBranches:
    """The runner of ``ep``'s parallel branches: its model clients, its view's system messages,
    and nested episodes (same clients, environment, view and deadline) for subflow branches."""
    from stateflow.episode.loop import Episode

    def system_message(state: str) -> str:
        st = ep.flow.states[state]
        shared = ep.view.llm_agent_name(st) == ASSISTANT
        return ep.view.system_message(ep.flow, None if shared else st)

    def nested_run(flow: Flow, task: str, vars: dict[str, Any]) -> RunResult:
        inner = Episode(flow, task, ep.view, ep.backends, ep.ctx.env, vars, flow.max_transitions, ep.deadline)
        return inner.run()

    return EpisodeBranches(ep.backends, system_message, nested_run)


def parallel_reply(ep: Episode, recipient: Agent, messages: Any, sender: Agent | None) -> str:
    """Run the branches, record them, merge.

    Raises:
        ParallelBranchError: a branch failed and the merge does not take failures.
        StateFlowError: the merge returned something other than a ``ToolResult`` or a string.
    """
    out = ep.current
    assert isinstance(out, Parallel)
    fan = run_branches(out, ep.ctx, branch_runner(ep))
    for r in fan.results:
        detail = {"branch": r.name, "ok": r.ok, **({"error": r.error} if r.error else {})}
        detail["result"] = r.content if len(r.content) <= 300 else r.content[:297] + "..."
        # a subflow branch's calls are on its inner steps (below): counting them here too would
        # count each call twice
        own = None if r.calls_in_steps else r.usage
        ep.log.record(f"{out.name}[{r.name}]", None, own, r.latency_s, detail, started_at=r.started_at)
    for s in fan.steps:  # a subflow branch's own steps, under <state>.<branch>.<inner state>
        # its messages are the branch's own history, not the run's: the trace keeps their text
        said = {"message": s.message.content} if s.message is not None else {}
        ep.log.record(
            s.output, None, s.usage, s.latency_s, {**s.detail, **said}, started_at=s.started_at, state=s.state
        )
    if fan.failure is not None:
        raise fan.failure
    t0 = time.perf_counter()
    try:
        merged = out.merge(ep.ctx, fan.results)
    except (StateFlowError, RunCancelled):
        raise
    except Exception as err:  # the user's merge code failed: say where, as for a tool
        name = getattr(out.merge, "__name__", type(out.merge).__name__)
        raise ParallelMergeError(ep.ctx.state, name, len(ep.log), err) from err
    if isinstance(merged, str):
        merged = ToolResult(merged)
    if not isinstance(merged, ToolResult):
        raise StateFlowError(
            f"state {ep.ctx.state!r}: the merge of {out.label} returned {type(merged).__name__}; "
            "expected ToolResult or str"
        )
    branch_time = sum(r.latency_s for r in fan.results)
    detail = {"wall_s": round(fan.wall_s, 6), "branches_s": round(branch_time, 6), "branches": list(out.names)}
    msg = Message("user", out.name, ep.ctx.state, Kind.TOOL, merged.content, meta=merged.meta)
    ep.log.record(out.name, msg, merged.usage, fan.wall_s + time.perf_counter() - t0, detail)
    return merged.content if merged.content != "" else "(no output)"

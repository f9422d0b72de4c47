"""One episode: reset the environment, run a method's flow on the task, score, make a record.

Scoring follows upstream's runners: if the agent never submitted (turn limit, malformed
replies), the last observation is submitted for it; the reward is clipped at 0 in ``reward``
(as the StateFlow reference runner does) and kept unclipped in ``reward_raw``. Try-Again keeps
the best score it saw. Success means ``reward_raw == 1``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from contextlib import nullcontext
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from stateflow.envs.base import Environment, Task
from stateflow.envs.bash.env import COMPARISON
from stateflow.tasks.agents.methods import build_method
from stateflow.tasks.kit.actions import parse_action
from stateflow.tasks.kit.benchmark import Benchmark
from stateflow.tasks.kit.blackboard import episode_vars
from stateflow.tasks.kit.episode_record import SCHEMA_VERSION, EpisodeRecord
from stateflow.tasks.kit.layout import opening_message

from stateflow import ModelAssignment, ModelProfile, run
from stateflow.backends.call_log import CallLog, RecordedCall
from stateflow.backends.http import HttpClients
from stateflow.backends.local.replicas import route_requests
from stateflow.backends.scripted import ScriptedLLM
from stateflow.events import EventSink

__all__ = ["ORACLE_PROFILE", "EpisodeSpec", "crashed_local_servers", "oracle_script", "run_episode"]

ORACLE_PROFILE = ModelProfile(name="oracle", model="gold-replay", provider="scripted", api_key_env=None)


def oracle_script(task: Task) -> ScriptedLLM:
    """The gold-replay policy: run the gold command once it has not run yet, then submit.

    It reads only the conversation (like a model would), so it works with every method: in
    Plan & Solve the plan step also "proposes" the gold, which then runs in the next state.
    """
    action = f"execute[{task.gold}]"

    def reply(messages: list[dict[str, Any]], params: dict[str, Any]) -> str:
        proposed_at = [i for i, m in enumerate(messages) if action in str(m.get("content") or "")]
        ran = bool(proposed_at) and any(m.get("name") == "environment" for m in messages[proposed_at[0] + 1 :])
        if ran:
            return "Thought: the gold command has run; its output is the answer.\nAction: submit"
        return f"Thought: replaying the gold command.\nAction: {action}"

    return ScriptedLLM(reply)


@dataclass(frozen=True)
class EpisodeSpec:
    """Everything an episode needs besides the environment.

    ``replay``: model calls that answer the episode's first calls instead of its models (a
    what-if's recorded prefix; :mod:`stateflow.tasks.harness.whatif`).
    """

    benchmark: Benchmark
    dataset: str
    method: str
    models: ModelAssignment
    models_label: str
    max_turns: int = 10
    timeout_s: float | None = 600.0
    grammar: bool = False
    oracle: bool = False
    scripts: Mapping[str, ScriptedLLM] | None = None
    http: HttpClients | None = None
    replay: tuple[RecordedCall, ...] = ()


def crashed_local_servers(models: ModelAssignment) -> list[str]:
    """Why the embedded model servers of ``models`` died, if they did (one message per server).

    An episode whose model calls failed only says "connection refused"; this asks each ``local``
    profile's managed server (:func:`stateflow.backends.local.check_server`), whose answer names
    the exit signal and the server log's tail. The next request restarts the server.
    """
    from stateflow.backends.local import ServerCrashedError, check_server

    found: list[str] = []
    checked: set[str | None] = set()
    for profile in models.profiles.values():
        if profile.provider != "local" or profile.local_model in checked:
            continue
        checked.add(profile.local_model)
        try:
            check_server(profile)
        except ServerCrashedError as crash:
            found.append(f"local model server {profile.local_model!r} crashed: {crash}")
    return found


def _submit_for_agent(env: Environment) -> tuple[float, dict[str, Any]]:
    _, reward, _, info = env.step("submit")
    return float(reward), info


def run_episode(
    env: Environment,
    index: int,
    spec: EpisodeSpec,
    clock: Callable[[], float] = time.perf_counter,
    *,
    on_event: EventSink | None = None,
    tokens: bool = False,
) -> EpisodeRecord:
    """Run one task and return its result record (never raises for agent or model failures).

    Args:
        on_event: receives the run's events as they happen (:mod:`stateflow.events`; the runner's
            side file for ``stateflow ui``). What it raises ends the episode as an error.
        tokens: with ``on_event``, stream the model replies and report their tokens. Streamed
            calls report no cached prompt tokens (AutoGen 0.14 assembles a streamed reply's usage
            without them), so this is off unless asked for.
    """
    t0 = clock()
    task = env.task(index)
    env.reset(index)
    flow, view = build_method(spec.method, spec.benchmark, grammar=spec.grammar)
    if spec.oracle:
        models: ModelAssignment | ModelProfile = ORACLE_PROFILE
        scripts: Mapping[str, ScriptedLLM] = {"oracle": oracle_script(task)}
    else:
        # One run's assignment serves several methods: each flow takes the keys naming its states
        # (the runner checked that every key names a state of some method's flow).
        models, scripts = spec.models.restricted_to(list(flow.states)), (spec.scripts or {})
    calls = CallLog(replay=list(spec.replay))
    # Routed by the task's context: with pinned replicas of the embedded model
    # (stateflow.backends.local.replicas) one database stays on one replica's prompt cache; a
    # crash check inside the block names that replica.
    with route_requests(task.context) if task.context else nullcontext():
        result = run(
            flow,
            # the question itself, unless the flow states it after its context (a prompt prefix
            # shared by every task on one database: stateflow.tasks.kit.layout)
            opening_message(flow, task, spec.benchmark.task_prompt),
            models=models,
            view=view,
            env=env,
            scripts=scripts,
            http=spec.http,
            vars={"max_turns": spec.max_turns},
            timeout_s=spec.timeout_s,
            raise_errors=False,
            calls=calls,
            on_event=on_event,
            tokens=tokens,
            progress=False,  # the runner shows its own progress (episodes run in parallel)
        )
        v = episode_vars(result)
        status = "ok"
        if result.stop_reason == "error":
            status = "timeout" if (result.error or "").startswith("RunTimeout") else "error"
            if status == "error" and not spec.oracle:  # a dead model server: say so, not just "refused"
                crashes = crashed_local_servers(spec.models)
                if crashes:
                    result.error = "; ".join([result.error or "error", *crashes])
    submitted = v.done
    if v.best_reward is not None:  # Try-Again: the best score over all attempts, and how it was scored
        reward_raw = float(v.reward if v.reward is not None else v.best_reward)
        submit_info: dict[str, Any] = dict(v.best_info)
    elif submitted:
        reward_raw = float(v.reward or 0.0)
        submit_info = dict(v.submit_info)
    else:
        try:
            reward_raw, submit_info = _submit_for_agent(env)
        except Exception as err:  # the environment itself failed: record it, keep going
            reward_raw, submit_info = 0.0, {}
            status, result.error = "error", f"{type(err).__name__}: {err} (while scoring)"
    usage = result.usage()
    actions = [m for m in result.history if m.kind.value == "llm"]
    record = {
        "schema_version": SCHEMA_VERSION,
        "benchmark": spec.benchmark.name,
        "dataset": spec.dataset,
        "method": spec.method,
        "view": result.view,
        "flow": result.flow,
        "models": "oracle" if spec.oracle else spec.models_label,
        "task": index,
        "query": task.query,
        "gold": task.gold,
        "hardness": task.hardness,
        "context": task.context,
        "status": status,
        "error": result.error,
        "stop_reason": result.stop_reason,
        "submitted": submitted,
        "last_action": v.last_action,
        "reward_raw": reward_raw,
        "reward": max(reward_raw, 0.0),
        "success": reward_raw == 1.0,
        "turns": v.turns,
        "failed_actions": v.failed,
        "invalid_replies": sum(parse_action(m.content).kind == "invalid" for m in actions),
        "llm_calls": usage.calls,
        "prompt_tokens": usage.prompt_tokens,
        "completion_tokens": usage.completion_tokens,
        "cached_tokens": usage.cached_tokens,
        "cost": usage.cost,
        "usage_by_state": {k: u.to_dict() for k, u in result.usage_by_state().items()},
        "usage_by_model": {k: u.to_dict() for k, u in result.usage_by_model().items()},
        "path": result.path,
        "transitions": [t.to_dict() for t in result.transitions],
        "history": result.history.to_list(),
        "calls": calls.to_list(),
        "eval": {k: str(submit_info[k])[:2000] for k in ("agent_obs", "eval_obs") if k in submit_info},
        "bash_comparison": submit_info.get(COMPARISON),  # bash: what the reward compared (None elsewhere)
        "verdict": submit_info.get("verdict"),  # pdoctor: the oracle's findings (None elsewhere)
        "wall_s": round(clock() - t0, 4),
        "finished_at": datetime.now(UTC).isoformat(timespec="seconds"),
    }
    return EpisodeRecord.from_dict(record)

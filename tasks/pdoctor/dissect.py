"""Root-cause dissection of a failed pdoctor episode with a real method and model.

``diagnose(request, method, models)`` runs the method's flow on mutated requests (see
:mod:`stateflow.envs.pdoctor.dissection`) in a private environment and returns the smallest change that
made the agent pass. Each attempt is a full episode: with a local model expect seconds to a
minute per attempt.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from stateflow.envs.pdoctor import PDoctorEnv, Request, SynthesisConfig
from stateflow.envs.pdoctor.dissection import Diagnosis, dissect
from stateflow.tasks.agents.methods import build_method
from stateflow.tasks.kit.blackboard import episode_vars
from stateflow.tasks.pdoctor.benchmark import PDOCTOR

from stateflow import ModelAssignment, ModelProfile, run
from stateflow.backends.scripted import ScriptedLLM

__all__ = ["attempt_with", "diagnose"]


def attempt_with(
    method: str,
    models: ModelAssignment | ModelProfile | str,
    *,
    grammar: bool = False,
    max_turns: int = 10,
    scripts: Mapping[str, ScriptedLLM] | None = None,
    timeout_s: float | None = 600.0,
) -> Callable[[Request], bool]:
    """``attempt(request) -> passed``: one episode of ``method`` on any request."""
    flow, view = build_method(method, PDOCTOR, grammar=grammar)

    def attempt(request: Request) -> bool:
        env = PDoctorEnv(SynthesisConfig(n=1))
        env.load(request)
        result = run(
            flow,
            f"Task: {request.text}",
            models=models,
            view=view,
            env=env,
            scripts=scripts or {},
            vars={"max_turns": max_turns},
            timeout_s=timeout_s,
            raise_errors=False,
        )
        episode = episode_vars(result)
        if episode.done:
            return episode.reward == 1.0
        _, reward, _, _ = env.step("submit")  # ran out of steps: judged like the runner does
        return reward == 1.0

    return attempt


def diagnose(
    request: Request,
    method: str,
    models: ModelAssignment | ModelProfile | str,
    *,
    budget: int = 20,
    grammar: bool = False,
    max_turns: int = 10,
    scripts: Mapping[str, ScriptedLLM] | None = None,
) -> Diagnosis:
    """The smallest single change to ``request`` that makes ``method`` pass (or ``unresolved``)."""
    attempt = attempt_with(method, models, grammar=grammar, max_turns=max_turns, scripts=scripts)
    return dissect(request, attempt, budget=budget)

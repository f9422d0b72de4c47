"""The PDoctor environment: synthesized requests behind the runner's environment contract.

Task ``i`` is request ``i`` of a :class:`~stateflow.envs.pdoctor.synthesis.SynthesisConfig` (synthesized
on first use and cached in this instance). ``step(call)`` runs a mock tool; ``step("submit")``
runs the oracle: reward 1.0 when the log meets every constraint, else 0.0, with the verdict in
``info["verdict"]``. Nothing here is an LLM judge: the check is exact.
"""

from __future__ import annotations

from typing import Any

from stateflow.envs.base import Task
from stateflow.envs.pdoctor.oracle import judge
from stateflow.envs.pdoctor.request import Request
from stateflow.envs.pdoctor.solver import witness_order
from stateflow.envs.pdoctor.synthesis import SynthesisConfig, synthesize
from stateflow.envs.pdoctor.tools import MockToolkit

__all__ = ["PDoctorEnv", "open_pdoctor_env", "step_budget"]


def step_budget(request: Request) -> int:
    """Tool calls an agent may make before its episode is a Timeout: twice the actions, plus 2."""
    return 2 * len(request.tools) + 2


class PDoctorEnv:
    """Synthesized planning requests with mock tools and an exact oracle."""

    name = "pdoctor"

    def __init__(self, config: SynthesisConfig):
        self.config = config
        self._requests: dict[int, Request] = {}
        self.toolkit: MockToolkit | None = None

    def __len__(self) -> int:
        return self.config.n

    def request(self, index: int) -> Request:
        """Request ``index`` (synthesized once per environment)."""
        if index not in self._requests:
            self._requests[index] = synthesize(self.config, index)
        return self._requests[index]

    def task(self, index: int) -> Task:
        r = self.request(index)
        witness = witness_order(len(r.tools), r.orders, r.bounds, r.durations, r.day_start)
        return Task(
            index=index,
            query=r.text,
            gold=" -> ".join(r.tools[a] for a in witness or ()),
            context=r.profession,
            hardness=f"{len(r.tools)} actions",
            extra={"label": r.label, "tools": list(r.tools), "constraints": [o.name for o in r.orders]},
        )

    @property
    def current(self) -> Request:
        """The request of the running episode.

        Raises:
            RuntimeError: before the first ``reset``/``load``.
        """
        if self.toolkit is None:
            raise RuntimeError("no episode: call reset(index) or load(request) first")
        return self.toolkit.request

    def load(self, request: Request) -> str:
        """Start an episode on any request (root-cause dissection runs mutated ones)."""
        self.toolkit = MockToolkit(request)
        return self.toolkit.describe()

    def reset(self, index: int) -> tuple[Any, dict[str, Any]]:
        return self.load(self.request(index)), {}

    def step(self, action: str) -> tuple[Any, float, bool, dict[str, Any]]:
        if self.toolkit is None:
            raise RuntimeError("no episode: call reset(index) first")
        if action.strip().lower() == "submit":
            verdict = judge(self.toolkit.request, self.toolkit.calls)
            reward = 1.0 if verdict.success else 0.0
            summary = "all constraints met" if verdict.success else f"{verdict.error.value if verdict.error else ''}"
            return summary, reward, True, {"verdict": verdict.to_dict(), "eval_obs": summary}
        observation, executed = self.toolkit.call(action)
        return observation, 0.0, False, {"action_executed": executed}

    def close(self) -> None:
        self.toolkit = None


def open_pdoctor_env(dataset: str) -> PDoctorEnv:
    """An environment for a dataset label such as ``n=50;actions=3:8;sentences=2:6;seed=1``.

    ``"demo"`` (the runner's default dataset name) means the default configuration.
    """
    return PDoctorEnv(SynthesisConfig() if dataset in ("", "demo") else SynthesisConfig.from_label(dataset))

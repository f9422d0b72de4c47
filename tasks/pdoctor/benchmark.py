"""The PDoctor benchmark: its :class:`~stateflow.tasks.kit.benchmark.Benchmark` record."""

from __future__ import annotations

from stateflow.envs.base import Environment, Task
from stateflow.tasks.agents.methods import stateflow_methods
from stateflow.tasks.kit.benchmark import Benchmark, DatasetRequest, EnvOptions, Method
from stateflow.tasks.kit.prompts import PROMPTS_DIR
from stateflow.tasks.kit.tools import ObservationFormat
from stateflow.tasks.pdoctor.flows import build_planning_flow, build_react_flow, dataset_label

from stateflow import StateFlowView

__all__ = ["PDOCTOR"]


def _task(task: Task) -> str:
    return f"Task: {task.query}"


def _open_pdoctor(options: EnvOptions) -> Environment:
    from stateflow.envs.pdoctor import open_pdoctor_env

    return open_pdoctor_env(options.dataset)  # the dataset label names the synthesis settings


def _pdoctor_dataset(request: DatasetRequest) -> str:
    return dataset_label(
        request.actions,
        request.sentences,
        request.n,
        request.seed,
        request.tries,
        request.extended,
        oracle=request.oracle,
    )


PDOCTOR = Benchmark(
    name="pdoctor",
    domain="pdoctor",
    open_env=_open_pdoctor,
    task_prompt=_task,
    observation=ObservationFormat(full_schema=False),  # plain text, cut like Bash's (the flows use their own tools)
    methods={
        **stateflow_methods("", build_planning_flow),
        "react": Method("react", build_react_flow, StateFlowView, "ReAct"),
    },
    prompts_dir=PROMPTS_DIR / "pdoctor",
    # pdoctor has no backends; "sandbox" is what its episode identities have always recorded,
    # kept so earlier pdoctor results still resume.
    default_backend="sandbox",
    flows={"pdoctor-plan": build_planning_flow, "pdoctor-react": build_react_flow},
    resolve_dataset=_pdoctor_dataset,
    description="PDoctor: synthesized planning requests checked by a solver",
)

"""The InterCode-Bash benchmark: its :class:`~stateflow.tasks.kit.benchmark.Benchmark` record."""

from __future__ import annotations

from stateflow.envs.base import Environment, Task
from stateflow.tasks.agents.methods import (
    baseline_methods,
    prefix_first_baselines,
    recipe_methods,
    spec_agent_methods,
    stateflow_methods,
)
from stateflow.tasks.bash.flow import build_bash_flow
from stateflow.tasks.bash.levers import BASH_LEVERS
from stateflow.tasks.bash.listing import describe_filesystem
from stateflow.tasks.kit.benchmark import Benchmark, EnvOptions
from stateflow.tasks.kit.layout import state_task
from stateflow.tasks.kit.prompts import PROMPTS_DIR
from stateflow.tasks.kit.spec_prompts import BASH_SPEC_DOMAIN
from stateflow.tasks.kit.tools import ObservationFormat

from stateflow import Flow

__all__ = ["BASH_FMT", "INTERCODE_BASH"]


def _task(task: Task) -> str:
    return f"Task: {task.query}"


def _open_bash(options: EnvOptions) -> Environment:
    from stateflow.envs.bash import open_bash_env

    return open_bash_env(options.dataset, backend=options.backend, data_dir=options.data_dir)


def _bash_prefix_first(grammar: bool) -> Flow:
    return build_bash_flow(grammar=grammar, prefix_first=True)


BASH_FMT = ObservationFormat(full_schema=False)

INTERCODE_BASH = Benchmark(
    name="intercode-bash",
    domain="bash",
    open_env=_open_bash,
    task_prompt=_task,
    observation=BASH_FMT,
    methods={
        # the paper's flow in both views, as recipes with no lever on (the same flows as before
        # the lever table), so levers compose on them: sf_agent+submit_first
        **recipe_methods(BASH_LEVERS, "", ()),
        # the file system listing, then the task: a prefix shared by every task on one file system (issue 49)
        **stateflow_methods("_prefix_first", _bash_prefix_first),
        **baseline_methods("bash", BASH_FMT),
        **prefix_first_baselines("bash", BASH_FMT, listing=describe_filesystem, question=state_task),
        **spec_agent_methods("bash", BASH_SPEC_DOMAIN, BASH_FMT),
    },
    prompts_dir=PROMPTS_DIR / "bash",
    default_backend="sandbox",
    backends=("sandbox", "docker"),
    flows={"intercode-bash": build_bash_flow},
    levers=BASH_LEVERS,
    spec_domain=BASH_SPEC_DOMAIN,
    description="InterCode-Bash: NL2Bash tasks in a sandboxed shell",
)

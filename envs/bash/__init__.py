"""InterCode Bash environment: NL2Bash tasks in a real, sandboxed shell.

Entry point: :func:`open_bash_env`. Default backend: bubblewrap over a per-episode overlay
(:mod:`stateflow.envs.bash.sandbox`) on a cached Debian base root (:mod:`stateflow.envs.bash.rootfs`); optional
backend: Docker (:mod:`stateflow.envs.bash.docker_backend`). Reward parts: :mod:`stateflow.envs.bash.reward`;
what a reward compared, as the episode record keeps it: :mod:`stateflow.envs.bash.comparison`.
"""

from __future__ import annotations

from stateflow.envs.bash.comparison import BashComparison
from stateflow.envs.bash.env import BashEnv
from stateflow.envs.bash.open import open_bash_env
from stateflow.envs.bash.reward import (
    BashReward,
    answer_similarity,
    bash_reward,
    content_score,
    content_targets,
    diff_score,
    parse_git_status,
)
from stateflow.envs.bash.sandbox import SandboxLimits
from stateflow.envs.bash.tasks import BashDataset, load_bash_dataset

__all__ = [
    "BashComparison",
    "BashDataset",
    "BashEnv",
    "BashReward",
    "SandboxLimits",
    "answer_similarity",
    "bash_reward",
    "content_score",
    "content_targets",
    "diff_score",
    "load_bash_dataset",
    "open_bash_env",
    "parse_git_status",
]

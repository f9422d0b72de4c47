"""Building a ready :class:`~stateflow.envs.bash.env.BashEnv` from a dataset name and a backend name."""

from __future__ import annotations

from stateflow.envs.base import EnvironmentError_
from stateflow.envs.bash.env import BashEnv
from stateflow.envs.bash.sandbox import SandboxLimits
from stateflow.envs.bash.tasks import load_bash_dataset

__all__ = ["BACKENDS", "open_bash_env"]

BACKENDS = ("sandbox", "docker")


def open_bash_env(
    dataset: str = "demo",
    *,
    backend: str = "sandbox",
    data_dir: str | None = None,
    exact_quoting: bool = False,
    limits: SandboxLimits | None = None,
    fs_scripts: str | None = None,
) -> BashEnv:
    """Open the bash environment.

    Args:
        dataset: ``demo`` (ours, shipped), ``nl2bash`` (200 tasks: fs_1, fs_2, fs_3, fs_4 in that
            order, one global index), ``fs_1``..``fs_4``, ``test`` (upstream's test queries, on
            fs_1), or the path of a JSON list of ``{query, gold[, fs]}`` records.
        backend: ``sandbox`` (bubblewrap + overlay, no daemon needed) or ``docker``.
        data_dir: InterCode data directory (holding ``bash/``) or the ``bash/`` directory itself;
            default: ``$STATEFLOW_DATA`` or ``../shared/data/intercode``.
        exact_quoting: give bash the action verbatim instead of upstream's re-split string.
        limits: sandbox resource caps.
        fs_scripts: directory of upstream's ``setup_nl2b_fs_N.sh``: build fs_1..fs_3 by running
            them (see :mod:`stateflow.envs.bash.upstream`) instead of unpacking the tarballs.

    Raises:
        EnvironmentError_: unknown backend, missing data or base root, no sandbox support; each
            message names the fix.
    """
    data = load_bash_dataset(dataset, data_dir, fs_scripts=fs_scripts)
    if backend == "sandbox":
        from stateflow.envs.bash.hosts import SandboxHost
        from stateflow.envs.bash.layers import LayerStore
        from stateflow.envs.bash.rootfs import locate_base_root
        from stateflow.envs.bash.sandbox import check_sandbox_support

        check_sandbox_support()
        base = locate_base_root()
        layers = LayerStore(base)
        agent = SandboxHost(base, layers, data.sources, limits)
        gold = SandboxHost(base, layers, data.sources, limits)
    elif backend == "docker":
        from stateflow.envs.bash.docker_backend import DockerHost, connect_docker

        client = connect_docker()
        agent = DockerHost(client, data.sources, role="agent", limits=limits)
        gold = DockerHost(client, data.sources, role="eval", limits=limits)
    else:
        raise EnvironmentError_(f"unknown bash backend {backend!r}; choose one of {', '.join(BACKENDS)}")
    return BashEnv(data, agent, gold, exact_quoting=exact_quoting)

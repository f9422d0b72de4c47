"""How a run uses the cores for the embedded model by default: workers and pinned replicas.

Measured with ``scripts/bench_throughput.py --configs`` (docs/throughput.md, "Two cores"): see
:data:`PINNED_REPLICAS` for the numbers behind the choice.
"""

from __future__ import annotations

from stateflow.backends.local.server import cpu_cores
from stateflow.profiles import ModelAssignment

__all__ = ["PINNED_REPLICAS", "default_workers", "local_replicas", "local_workers"]

#: whether a run with several workers serves a local model from one pinned server per worker
#: (else one server with every core's threads, requests served one at a time).
PINNED_REPLICAS = False


def local_workers() -> int:
    """Episodes in parallel for a run on the embedded model when the user sets none."""
    return 1


def local_replicas(workers: int) -> int:
    """Pinned servers for a run with ``workers`` episodes in parallel (1: one shared server).

    At most one per core, and never more than workers (an idle replica holds its RAM for nothing).
    """
    if not PINNED_REPLICAS or workers < 2:
        return 1
    return max(1, min(workers, cpu_cores()))


def default_workers(models: ModelAssignment) -> int:
    """Workers for a run that sets none: :func:`local_workers` when a state is served by the
    embedded model (its cores are the run's bottleneck), else 1."""
    local = any(models.profiles[name].provider == "local" for name in models.by_state.values())
    return local_workers() if local else 1

"""How a run uses the cores for the embedded model by default: workers and pinned replicas.

Measured with ``scripts/bench_throughput.py --configs w1,w2,w2r2`` (docs/throughput.md, "Two
cores"): the 1.5B model, the ``new`` arms (prompts laid out for reuse, ``--order context``), the
first two whole-database chunks of the Spider ``dev`` sample (30 tasks per method), the
configurations interleaved per chunk, on 2 cores shared with other jobs (load 1.8-3.5):

================================  ==========  ==========  ============
episodes per hour                 w1          w2          w2r2
================================  ==========  ==========  ============
``oneshot_direct_prefix_first``   1,101       676         1,386 (1.26x)
``sf_agent_vote_prefix_first``    188         251         340 (1.81x)
================================  ==========  ==========  ============

w1: workers 1, one server with a thread per core; w2: workers 2 against it (its requests queue:
llama-cpp-python's server serves one at a time); w2r2: workers 2, one pinned 1-thread server
per core, episodes routed by database. Success was identical in all three (0 tasks won or lost
against w1). w2r2 was faster in 3 of the 4 (method, chunk) cells (0.72x to 2.5x: the machine was
shared, so single cells are noisy) and needs twice the memory (4.3-5.2 GiB resident against
2.3-3.1 GiB). Hence the default for a run on the embedded model: 2 workers, each with its own
pinned replica. It was measured on 2 cores only; more replicas multiply the model's RAM, so the
default stops at 2 and larger machines give each replica several cores.
"""

from __future__ import annotations

from stateflow.backends.local.server import cpu_cores
from stateflow.profiles import ModelAssignment

__all__ = ["MAX_DEFAULT_WORKERS", "PINNED_REPLICAS", "default_workers", "local_replicas", "local_workers"]

#: whether a run with several workers serves a local model from one pinned server per worker
#: (else one server with every core's threads, requests served one at a time); see the table above
PINNED_REPLICAS = True

#: the most workers (and replicas) a run on the embedded model gets by default (measured on 2 cores)
MAX_DEFAULT_WORKERS = 2


def local_workers() -> int:
    """Episodes in parallel for a run on the embedded model when the user sets none."""
    return max(1, min(MAX_DEFAULT_WORKERS, cpu_cores()))


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

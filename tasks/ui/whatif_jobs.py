""" "Replay from this state with another model": what-if replays started from an episode page.

The page posts a state of the episode's path and a model profile; :meth:`WhatIfJobs.start`
checks them (the state is on the path, the profile is known, the episode's results directory is
one the UI was given, the replay can be planned: :func:`~stateflow.tasks.harness.whatif.plan_whatif`)
and runs :func:`~stateflow.tasks.harness.whatif.run_whatif` for that one episode on a background
thread. The new record goes where ``stateflow whatif`` puts it (``RUN_DIR/whatif-<state>-<change>``),
so the same replay asked twice is not run twice (the second finds its record).

One replay runs at a time: a replay asks a model, often the one embedded model the machine has.
A job's outcome (:class:`WhatIfOutcome`) keeps the source record's reward and the new record.
"""

from __future__ import annotations

import itertools
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from stateflow.tasks.harness.registry import BenchmarkRegistry
from stateflow.tasks.harness.whatif import WhatIfPlan, plan_whatif, run_whatif
from stateflow.tasks.kit.episode_record import EpisodeRecord

from stateflow.errors import ConfigError
from stateflow.profiles import ModelAssignment

__all__ = ["BusyError", "WhatIfJob", "WhatIfJobs", "WhatIfOutcome"]

JobStatus = Literal["running", "done", "failed"]


class BusyError(ConfigError):
    """Another replay is running (one at a time: they share the model)."""


@dataclass(frozen=True)
class WhatIfOutcome:
    """A finished replay: the recorded episode's reward and the new record.

    ``faithful`` is False when the replay diverged from the recording (then the new record's
    error says where); ``new_tokens`` counts the tokens of the calls after the fork point.
    """

    before: float
    after: EpisodeRecord
    faithful: bool
    new_tokens: int


@dataclass
class WhatIfJob:
    """One replay asked from an episode page (``id`` names it in URLs)."""

    id: int
    source: int
    digest: str
    task: int
    at: str
    profile: str
    out: Path
    status: JobStatus = "running"
    error: str = ""
    outcome: WhatIfOutcome | None = None
    done: threading.Event = field(default_factory=threading.Event, repr=False)

    def to_dict(self) -> dict[str, object]:
        o = self.outcome
        return {
            "id": self.id,
            "status": self.status,
            "at": self.at,
            "profile": self.profile,
            "error": self.error,
            "before": o.before if o else None,
            "after": o.after.reward_raw if o else None,
        }


class WhatIfJobs:
    """The replays of one UI server.

    Args:
        registry: the benchmarks (to rebuild a recorded episode's flow).
        profiles: the model profiles a replay may use and the run's were built from (``stateflow
            ui --config``'s, else the built-in ones).
        timeout_s: seconds per replayed episode.
    """

    def __init__(self, registry: BenchmarkRegistry, profiles: ModelAssignment, *, timeout_s: float = 600.0):
        self.registry = registry
        self.profiles = profiles
        self.timeout_s = timeout_s
        self._jobs: dict[int, WhatIfJob] = {}
        self._ids = itertools.count(1)
        self._lock = threading.Lock()

    def profile_names(self) -> list[str]:
        """The profiles a page may offer (test doubles cannot replay: they are not models)."""
        return sorted(n for n, p in self.profiles.profiles.items() if p.provider != "scripted")

    def get(self, job_id: int) -> WhatIfJob | None:
        return self._jobs.get(job_id)

    def of_episode(self, source: int, digest: str, task: int) -> list[WhatIfJob]:
        """The replays asked for this episode, newest first."""
        found = [j for j in self._jobs.values() if (j.source, j.digest, j.task) == (source, digest, task)]
        return sorted(found, key=lambda j: -j.id)

    def plan(self, root: Path, record: EpisodeRecord, at: str, profile: str) -> WhatIfPlan:
        """Check a replay of ``record`` (in results directory ``root``) from ``at`` with
        ``profile`` there; nothing runs.

        Raises:
            ConfigError: ``at`` is not on the episode's path, ``profile`` is unknown, or the
                replay cannot be planned (oracle records, a changed flow, no model call in ``at``...).
        """
        if at not in record.path:
            raise ConfigError(f"state {at!r} is not on this episode's path ({' > '.join(record.path)})")
        names = self.profile_names()
        if profile not in names:
            raise ConfigError(f"unknown model profile {profile!r}; known: {', '.join(names) or 'none'}")
        plan = plan_whatif(
            root,
            at,
            {at: profile},
            registry=self.registry,
            base=self.profiles,
            tasks=str(record.task),
            identity_digest=record.identity_digest,
        )
        if not plan.episodes:
            raise ConfigError(f"task {record.task} never asked a model in {at}: there is nothing to replay from there")
        return plan

    def start(self, source: int, root: Path, record: EpisodeRecord, at: str, profile: str) -> WhatIfJob:
        """Plan (see :meth:`plan`) and start the replay on a background thread.

        Raises:
            ConfigError: as :meth:`plan`.
            BusyError: another replay is running.
        """
        with self._lock:
            running = [j for j in self._jobs.values() if j.status == "running"]
            if running:
                j = running[0]
                raise BusyError(
                    f"a replay is running (task {j.task} from {j.at} with {j.profile}); ask again when it ends"
                )
            plan = self.plan(root, record, at, profile)
            job = WhatIfJob(next(self._ids), source, record.identity_digest or "", record.task, at, profile, plan.out)
            self._jobs[job.id] = job
        threading.Thread(target=self._run, args=(job, plan, record), name=f"whatif-{job.id}", daemon=True).start()
        return job

    def _run(self, job: WhatIfJob, plan: WhatIfPlan, record: EpisodeRecord) -> None:
        try:
            result = run_whatif(plan, timeout_s=self.timeout_s)
            after = [*result.after, *result.diverged]
            if not after:
                raise ConfigError("the replay produced no record")
            new = after[0]
            job.outcome = WhatIfOutcome(
                record.reward_raw, new, bool(result.after), result.new_tokens.get(record.task, 0)
            )
            job.status = "done"
        except Exception as err:  # shown on the page; the server goes on
            job.error = f"{type(err).__name__}: {err}"
            job.status = "failed"
        finally:
            job.done.set()

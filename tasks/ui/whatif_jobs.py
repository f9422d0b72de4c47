""" "Replay from this state with another model": what-if replays started from an episode page.

The page posts a state of the episode's path and a model profile; :meth:`WhatIfJobs.start`
checks them (the state is on the path, the profile is known, the episode's results directory is
one the UI was given, the replay can be planned: :func:`~stateflow.tasks.harness.whatif.plan_whatif`)
and runs :func:`~stateflow.tasks.harness.whatif.run_whatif` for that one episode on a background
thread. The new record goes where ``stateflow whatif`` puts it (``RUN_DIR/whatif-<state>-<change>``),
so the same replay asked twice is not run twice (the second finds its record).

What changes (:data:`Scope`): with ``on`` (the default) the chosen model answers every model call
from the fork on, in that state and in every state after it; with ``only`` it answers that
state's calls alone and the other states keep the models they were recorded with.
:func:`describe_change` says which, naming the states, on the form and on the result.

One replay runs at a time: a replay asks a model, often the one embedded model the machine has.
While it runs, the job keeps its progress (the state it is in, the steps so far: the page polls
``/api/whatif``) and its episode is listed on ``/live`` (:func:`run_whatif` writes a side file).
When it ends, the embedded model servers it started are stopped (those that ran before it are
left running). A job's outcome (:class:`WhatIfOutcome`) keeps the source record's reward and
the new record.
"""

from __future__ import annotations

import itertools
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from stateflow.tasks.agents.methods import build_method
from stateflow.tasks.harness.registry import BenchmarkRegistry
from stateflow.tasks.harness.whatif import WhatIfPlan, plan_whatif, run_whatif
from stateflow.tasks.kit.episode_record import EpisodeRecord

from stateflow.backends.local.pool import LocalServerPool, default_pool
from stateflow.errors import ConfigError
from stateflow.events import Event, StateEntered, StepRecorded, ToolReturned
from stateflow.profiles import ModelAssignment

__all__ = ["SCOPES", "BusyError", "Scope", "WhatIfJob", "WhatIfJobs", "WhatIfOutcome", "describe_change"]

JobStatus = Literal["running", "done", "failed"]
Scope = Literal["on", "only"]
SCOPES: tuple[Scope, ...] = ("on", "only")


def recorded_models(record: EpisodeRecord) -> dict[str, str]:
    """``{state or "default": profile}`` as the record's identity names them (``default=a,Solve=b``)."""
    label = str((record.identity or {}).get("models") or record.models or "")
    out: dict[str, str] = {}
    for part in label.split(" (")[0].split(","):
        state, sep, name = part.partition("=")
        if sep and state.strip() and name.strip():
            out[state.strip()] = name.strip()
    return out


def describe_change(record: EpisodeRecord, llm_states: list[str], at: str, profile: str, scope: Scope) -> str:
    """What a replay of ``record`` from ``at`` with ``profile`` changes, naming every state that
    asks a model (``llm_states``, in the flow's order) and the model it will use."""
    models = recorded_models(record)

    def was(state: str) -> str:
        return models.get(state, models.get("default", "?"))

    others = [s for s in llm_states if s != at]
    head = f"The replies before {at}'s first model call are reused as recorded (no model is asked again). "
    if scope == "on":
        tail = f" and every other state that asks a model ({', '.join(others)})" if others else ""
        return head + f"From there, {at}{tail} use{'s' if not others else ''} {profile}."
    kept = "; ".join(f"{s} keeps {was(s)}" for s in others)
    return head + f"From there, only {at} uses {profile}" + (f"; {kept} (their recorded models)." if kept else ".")


@dataclass
class Progress:
    """Where a running replay is: its state, the steps it made, when it started (for the page)."""

    started: float = field(default_factory=time.monotonic)
    state: str = ""
    steps: int = 0
    last: str = ""

    def __call__(self, event: Event) -> None:
        if isinstance(event, StateEntered):
            self.state = event.state
        elif isinstance(event, StepRecorded | ToolReturned):
            self.steps += 1
            m = event.step.message
            self.last = f"{event.step.state} · {event.step.output}: {str(m.content if m else '')[:160]}"

    def to_dict(self) -> dict[str, object]:
        return {
            "state": self.state,
            "steps": self.steps,
            "seconds": round(time.monotonic() - self.started, 1),
            "last": self.last,
        }


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
    scope: Scope = "on"
    what: str = ""
    status: JobStatus = "running"
    error: str = ""
    outcome: WhatIfOutcome | None = None
    progress: Progress = field(default_factory=Progress)
    stopped: list[str] = field(default_factory=list)  # embedded model servers stopped when it ended
    done: threading.Event = field(default_factory=threading.Event, repr=False)

    def to_dict(self) -> dict[str, object]:
        o = self.outcome
        return {
            "id": self.id,
            "status": self.status,
            "at": self.at,
            "profile": self.profile,
            "scope": self.scope,
            "what": self.what,
            "error": self.error,
            "before": o.before if o else None,
            "after": o.after.reward_raw if o else None,
            "progress": self.progress.to_dict(),
            "stopped": list(self.stopped),
        }


class WhatIfJobs:
    """The replays of one UI server.

    Args:
        registry: the benchmarks (to rebuild a recorded episode's flow).
        profiles: the model profiles a replay may use and the run's were built from (``stateflow
            ui --config``'s, else the built-in ones).
        timeout_s: seconds per replayed episode.
    """

    def __init__(
        self,
        registry: BenchmarkRegistry,
        profiles: ModelAssignment,
        *,
        timeout_s: float = 600.0,
        pool: LocalServerPool | None = None,
    ):
        """``pool``: where the embedded model servers a replay starts live (default: the
        process-wide one, :func:`~stateflow.backends.local.pool.default_pool`)."""
        self.registry = registry
        self.profiles = profiles
        self.timeout_s = timeout_s
        self._pool = pool
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

    @property
    def pool(self) -> LocalServerPool:
        return self._pool if self._pool is not None else default_pool()

    def llm_states(self, record: EpisodeRecord) -> list[str]:
        """The states of ``record``'s flow that ask a model, in the flow's order (``[]`` when the
        flow cannot be built here)."""
        ident = record.identity or {}
        try:
            bench = self.registry.get(record.benchmark)
            flow, _ = build_method(str(ident.get("method", record.method)), bench, grammar=bool(ident.get("grammar")))
        except Exception:  # an unknown benchmark or method: refused when planned, with its reason
            return []
        return [s.name for s in flow.llm_states()]

    def refusal(self, record: EpisodeRecord, *, given_file: bool) -> str:
        """Why ``record`` cannot be replayed from its page (``""``: it can be tried). The page
        shows this instead of the form, and a post is refused with it (409)."""
        if given_file:
            return (
                "this source was given as a file (a results file or an archive): a replay writes its records "
                "next to the run's, so open the run's results directory with `stateflow ui DIR`"
            )
        if (record.identity or {}).get("policy") == "oracle":
            return (
                "the records replay the gold answer (oracle policy): there is no model to swap; "
                "a what-if needs model runs"
            )
        if not record.calls:
            return (
                "this record keeps no model calls (written before records kept them, or archived): "
                "a replay reuses the recorded calls before the fork"
            )
        if not self.profile_names():
            return "no model profile is known to replay with (start `stateflow ui` with --config FILE)"
        return ""

    def plan(self, root: Path, record: EpisodeRecord, at: str, profile: str, scope: Scope = "on") -> WhatIfPlan:
        """Check a replay of ``record`` (in results directory ``root``) from ``at`` with
        ``profile`` there (``scope="on"``: and in every state that asks a model after it;
        ``"only"``: in ``at`` alone); nothing runs.

        Raises:
            ConfigError: ``at`` is not on the episode's path, ``profile`` is unknown, or the
                replay cannot be planned (oracle records, a changed flow, no model call in ``at``...).
        """
        if at not in record.path:
            raise ConfigError(f"state {at!r} is not on this episode's path ({' > '.join(record.path)})")
        names = self.profile_names()
        if profile not in names:
            raise ConfigError(f"unknown model profile {profile!r}; known: {', '.join(names) or 'none'}")
        if scope not in SCOPES:
            raise ConfigError(f"scope {scope!r}: expected one of {', '.join(SCOPES)}")
        change = {at: profile}
        if scope == "on":
            change |= {s: profile for s in self.llm_states(record)}
        plan = plan_whatif(
            root,
            at,
            change,
            registry=self.registry,
            base=self.profiles,
            tasks=str(record.task),
            identity_digest=record.identity_digest,
        )
        if not plan.episodes:
            raise ConfigError(f"task {record.task} never asked a model in {at}: there is nothing to replay from there")
        return plan

    def start(
        self, source: int, root: Path, record: EpisodeRecord, at: str, profile: str, scope: Scope = "on"
    ) -> WhatIfJob:
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
            plan = self.plan(root, record, at, profile, scope)
            what = describe_change(record, self.llm_states(record), at, profile, scope)
            job = WhatIfJob(
                next(self._ids), source, record.identity_digest or "", record.task, at, profile, plan.out, scope, what
            )
            self._jobs[job.id] = job
        threading.Thread(target=self._run, args=(job, plan, record), name=f"whatif-{job.id}", daemon=True).start()
        return job

    def _run(self, job: WhatIfJob, plan: WhatIfPlan, record: EpisodeRecord) -> None:
        pool = self.pool
        before = set(pool.running())
        status: JobStatus = "failed"
        try:
            result = run_whatif(plan, timeout_s=self.timeout_s, on_event=job.progress)
            after = [*result.after, *result.diverged]
            if not after:
                raise ConfigError("the replay produced no record")
            new = after[0]
            job.outcome = WhatIfOutcome(
                record.reward_raw, new, bool(result.after), result.new_tokens.get(record.task, 0)
            )
            status = "done"
        except Exception as err:  # shown on the page; the server goes on
            job.error = f"{type(err).__name__}: {err}"
        finally:
            # The servers this replay started hold a model in memory and its cores' threads: stop
            # them (the next replay starts them again); those that ran before it stay. The job
            # reads as ended only once they are stopped.
            try:
                for key in sorted(set(pool.running()) - before):
                    pool.discard(key)
                    job.stopped.append(key)
            finally:
                job.status = status
                job.done.set()

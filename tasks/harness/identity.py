"""Episode identity: everything that can change an episode's outcome, as one typed record.

Every result record carries its :class:`EpisodeIdentity` (as a dict) and the identity's
:attr:`~EpisodeIdentity.digest`; ``(digest, task)`` is the resume key. Two records with the same
key are the same experiment cell, so a resumed run reuses a record only on an exact identity
match, and readers keep only the newest record per key (see :func:`stateflow.tasks.harness.records.latest_records`).

What is in it, and why:

* ``benchmark``, ``dataset`` and ``dataset_sha256``: the dataset's name and a hash of every
  field of every task in order (so an edited task file, or another copy of "spider", differs);
* ``method``, ``flow`` and ``flow_sha256``: the flow definition (states, output functions with
  their prompt texts and grammars, rules in priority order, system message, bounds);
* ``prompts_sha256``: the domain's prompt files (tools and baselines read them too);
* ``policy`` (``llm`` or ``oracle``), ``models`` (the label) and ``models_sha256`` (the resolved
  profiles: model, provider, endpoint, sampling settings);
* ``max_turns``, ``grammar`` and ``backend`` (the SQL server or Bash sandbox kind);
* ``database_scope`` (SQL only): whether ``USE`` may leave the task's database, which changes
  rewards (see ``envs/sql/README.md``);
* ``repeat`` and ``seed`` (``stateflow run --repeats K``): which of K repeats of the episode this
  is and the sampler seed it ran with. Stored only when set, so every record made without
  repeats keeps its digest; repeats of one setting differ only there (:data:`REPEAT_FIELDS`), so
  a results directory holds them side by side and reports pool them.

Deliberately left out: the worker count, the per-task timeout (it only decides when a slow
episode is cut off, which is recorded as ``status="timeout"`` and re-run with
``--retry-errors``), prices (cost accounting, not behaviour), request timeouts and retries, and
the DSN (it may hold a password).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from stateflow.envs.base import Environment

from stateflow import ModelAssignment, ModelProfile
from stateflow.fingerprint import callables_without_stable_id, flow_fingerprint

__all__ = [
    "IDENTITY_VERSION",
    "REPEAT_FIELDS",
    "RUN_WIDE_FIELDS",
    "EpisodeIdentity",
    "FieldDifference",
    "callables_without_stable_id",
    "dataset_fingerprint",
    "differences",
    "flow_fingerprint",
    "models_fingerprint",
    "prompts_fingerprint",
    "setting_digest",
]

IDENTITY_VERSION = 2  # bump when the meaning of a field changes: old records then never match

# Profile fields that change what a model replies; the rest (name, key variable, price,
# timeouts, retries) do not.
_PROFILE_FIELDS = ("model", "provider", "base_url", "temperature", "max_tokens", "stop", "extra_body", "local_model")

# Fields that identify the method within a run; every other field is a run-wide setting.
_METHOD_FIELDS = frozenset({"method", "flow", "flow_sha256"})

REPEAT_FIELDS = ("repeat", "seed")
"""The fields that tell the repeats of one setting apart (absent from records made without repeats)."""


def _sha256(obj: Any) -> str:
    text = json.dumps(obj, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def prompts_fingerprint(folder: Path) -> str:
    """sha256 over every ``*.md`` file in ``folder`` (names and contents, sorted by name).

    Raises:
        FileNotFoundError: ``folder`` is not a directory.
    """
    if not folder.is_dir():
        raise FileNotFoundError(f"prompt folder {folder} not found")
    return _sha256([[p.name, p.read_text(encoding="utf-8")] for p in sorted(folder.glob("*.md"))])


def dataset_fingerprint(env: Environment) -> str:
    """sha256 of every field of every task of ``env``, in index order."""
    return _sha256([dataclasses.asdict(env.task(i)) for i in range(len(env))])


def models_fingerprint(models: ModelAssignment | ModelProfile) -> str:
    """sha256 of the resolved profile serving each state (only the fields that change replies)."""
    if isinstance(models, ModelProfile):
        resolved = {"*": models}
    else:
        resolved = {state: models.profiles[name] for state, name in models.by_state.items()}
    return _sha256({state: _profile_payload(p) for state, p in sorted(resolved.items())})


def _profile_payload(p: ModelProfile) -> dict[str, Any]:
    # a profile's seed only when set: every profile made before seeds existed keeps its fingerprint
    return {f: getattr(p, f) for f in _PROFILE_FIELDS} | ({"seed": p.seed} if p.seed is not None else {})


@dataclass(frozen=True)
class EpisodeIdentity:
    """The settings an episode's outcome depends on (see the module docstring for each field)."""

    benchmark: str
    dataset: str
    dataset_sha256: str
    method: str
    flow: str
    flow_sha256: str
    prompts_sha256: str
    policy: str
    models: str
    models_sha256: str
    max_turns: int
    grammar: bool
    backend: str
    database_scope: str | None = None  # SQL: which databases an agent may USE (stateflow.envs.sql DatabaseScope)
    version: int = IDENTITY_VERSION
    repeat: int | None = None
    seed: int | None = None

    def to_dict(self) -> dict[str, Any]:
        """The identity as stored in a record (JSON types only); ``repeat`` and ``seed`` only when set,
        so identities made without repeats keep their digests."""
        out = dataclasses.asdict(self)
        for name in REPEAT_FIELDS:
            if out[name] is None:
                del out[name]
        return out

    @property
    def digest(self) -> str:
        """A stable 16-hex-digit digest of every field (the resume key with the task index)."""
        return _sha256(self.to_dict())[:16]


def setting_digest(identity: Mapping[str, Any]) -> str:
    """The digest of a stored identity without its repeat fields: what the K repeats of one setting
    share, and equal to the digest of the same setting run without repeats."""
    return _sha256({k: v for k, v in identity.items() if k not in REPEAT_FIELDS})[:16]


RUN_WIDE_FIELDS = tuple(
    f.name for f in dataclasses.fields(EpisodeIdentity) if f.name not in _METHOD_FIELDS and f.name not in REPEAT_FIELDS
)


@dataclass(frozen=True)
class FieldDifference:
    """One identity field that differs: its value in a recorded identity and in this run's."""

    field: str
    recorded: Any
    current: Any

    def __str__(self) -> str:
        def short(v: Any) -> str:
            text = json.dumps(v) if not isinstance(v, str) else v
            return text[:12] if self.field.endswith("_sha256") else text

        return f"{self.field}: {short(self.recorded)} (recorded) vs {short(self.current)} (this run)"


def differences(
    recorded: Mapping[str, Any], current: EpisodeIdentity, fields: Iterable[str] | None = None
) -> list[FieldDifference]:
    """The fields (default: all) whose recorded value differs from ``current``'s.

    A field missing from ``recorded`` (an identity written by another version) counts as
    differing, with ``None`` as its recorded value.
    """
    mine = current.to_dict()
    names = list(fields) if fields is not None else list(mine)
    return [FieldDifference(k, recorded.get(k), mine.get(k)) for k in names if recorded.get(k) != mine.get(k)]

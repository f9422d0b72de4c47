"""Episode identity: everything that can change an episode's outcome, as one typed record.

Every result record carries its :class:`EpisodeIdentity` (as a dict) and the identity's
:attr:`~EpisodeIdentity.digest`; ``(digest, task)`` is the resume key. Two records with the same
key are the same experiment cell, so a resumed run reuses a record only on an exact identity
match, and readers keep only the newest record per key (see :func:`stateflow.tasks.records.latest_records`).

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
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from stateflow.envs.base import Environment

from stateflow import Flow, ModelAssignment, ModelProfile
from stateflow.outputs import LLM, Prompt, Tool
from stateflow.stable_id import has_stable_id, id_of

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


def _callable_name(fn: Callable[..., Any] | None) -> str | None:
    # A callable's code and closure values are not hashable in general, so a flow's callables
    # are identified by name: their stable id (stateflow.stable_id), which survives a move to
    # another module, or for a user's undecorated callable its qualified name.
    return None if fn is None else id_of(fn)


_Namer = Callable[[Any], "str | None"]  # how the payload names a callable (None stays None)


def _grammar_name(grammar: str | Callable[..., Any] | None, name: _Namer) -> str | None:
    """A text grammar as it is; a grammar function by name (as every callable here)."""
    return grammar if isinstance(grammar, str) or grammar is None else name(grammar)


def _output(out: Prompt | LLM | Tool, name: _Namer) -> dict[str, Any]:
    if isinstance(out, Prompt):
        return {"prompt": out.text}
    if isinstance(out, LLM):
        grammar = _grammar_name(out.grammar, name)
        return {
            "llm": out.profile,
            "grammar": grammar,
            "regex": out.regex,
            "stop": list(out.stop),
            "retry_when": name(out.retry_when),
            "retry_temperature": out.retry_temperature,
            **_levers(out, name),
        }
    return {"tool": out.name, "fn": name(out.fn)}


def _levers(out: LLM, name: _Namer) -> dict[str, Any]:
    """The optional reply levers, only when set: flows without them keep their fingerprints."""
    levers: dict[str, Any] = {}
    if out.guard is not None:
        g = out.guard
        levers["guard"] = {
            "parse": name(g.parse),
            "temperatures": list(g.temperatures),
            "note": g.note,
            "max_observation_chars": g.max_observation_chars,
        }
    if out.cut is not None:
        c = out.cut
        levers["cut"] = {"max_run": c.max_run, "max_period": c.max_period, "max_line_chars": c.max_line_chars}
    if out.vote is not None:
        v = out.vote
        levers["vote"] = {
            "parse": name(v.parse),
            "executor": name(v.executor),
            "k": v.k,
            "temperature": v.temperature,
            "seed": v.seed,
            **({"greedy_first": True} if v.greedy_first else {}),  # only when set: older fingerprints hold
            **({"stop_when_decided": True} if v.stop_when_decided else {}),
            **({"quorum": v.quorum} if v.quorum is not None else {}),
            **(
                {
                    "variants": [
                        {
                            "name": x.name,
                            "rewrite": name(x.rewrite),
                            "grammar": _grammar_name(x.grammar, name),
                            "sampled": x.sampled,
                        }
                        for x in v.variants
                    ]
                }
                if v.variants
                else {}
            ),
        }
    return levers


def flow_fingerprint(flow: Flow) -> str:
    """sha256 of a flow's definition: states with their output functions, rules, bounds.

    Rules are identified by their printed form (sources, target, condition name) in priority
    order, so reordering rules or renaming a condition changes the fingerprint.
    """
    return _sha256(_flow_payload(flow, _callable_name))


def callables_without_stable_id(flow: Flow) -> list[str]:
    """The callables in ``flow``'s fingerprint that carry no :func:`~stateflow.stable_id.stable_id`.

    Such a callable is named by where it lives, so moving it changes the fingerprint. Every
    built-in method's list is empty (tests/tasks/test_golden_identities.py checks it).
    """
    missing: list[str] = []

    def name(fn: Any) -> str | None:
        if fn is not None and not has_stable_id(fn):
            missing.append(id_of(fn))
        return _callable_name(fn)

    _flow_payload(flow, name)
    return missing


def _flow_payload(flow: Flow, name: _Namer) -> dict[str, Any]:
    """What :func:`flow_fingerprint` hashes, with callables named by ``name``."""
    return {
        "name": flow.name,
        "initial": flow.initial,
        "max_transitions": flow.max_transitions,
        "system_message": flow.system_message,
        "states": [
            {"name": s.name, "final": s.final, "outputs": [_output(o, name) for o in s.outputs]}
            for s in flow.states.values()
        ],
        "rules": [str(t) for t in flow.transitions],
    }


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

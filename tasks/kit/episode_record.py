"""The episode record: what one finished episode leaves in ``results.jsonl``, as one typed record.

The runner writes :class:`EpisodeRecord` objects (:func:`stateflow.tasks.harness.episode.run_episode`
builds them, the runner stamps the episode identity on), the results file stores them as JSON
lines (:mod:`stateflow.tasks.harness.records`), and metrics and reports read their attributes.

Versions: every record carries ``schema_version`` (:data:`SCHEMA_VERSION` for records written
now). A record without the field was written before it existed and loads as version 0, with the
same fields (fields added later get defaults). A record from a newer version, a missing required
field or a value of the wrong type is an :class:`InvalidRecordError` naming the field (and the
file and line when loaded from a file); keys this version does not know are kept, and written back
unchanged, never dropped.

>>> r = EpisodeRecord(benchmark="intercode-sql", method="react", models="default=local", task=3,
...                   status="ok", success=True, reward_raw=1.0, turns=2, failed_actions=0)
>>> (r.reward_raw, r.schema_version, EpisodeRecord.from_dict(r.to_dict()) == r)
(1.0, 1, True)
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from stateflow.envs.bash.comparison import BashComparison

from stateflow.errors import StateFlowError

__all__ = ["SCHEMA_VERSION", "EpisodeRecord", "InvalidRecordError"]

SCHEMA_VERSION = 1
"""Bump when a field's meaning changes; readers convert older versions in :meth:`EpisodeRecord.from_dict`."""


class InvalidRecordError(StateFlowError):
    """A result record does not have the fields and types of an :class:`EpisodeRecord`.

    Attributes:
        where: ``file:line`` of the record, or ``""`` when it did not come from a file.
        problems: one line per invalid field.
    """

    def __init__(self, where: str, problems: list[str]):
        self.where = where
        self.problems = problems
        super().__init__(
            f"{where + ': ' if where else ''}invalid result record: {'; '.join(problems)}"
            " (fix or remove that line; nothing was written)"
        )


class EpisodeRecord(BaseModel):
    """One finished episode (see the module docstring for versions).

    Attributes (the ones metrics and reports use; the rest are the episode's trace):
        benchmark, dataset, method, models: the experiment cell (``models`` is the label).
        task: the task index; with ``identity_digest`` the resume key.
        status: ``ok``, ``error`` (model or harness failed) or ``timeout``.
        submitted: the agent submitted (else the last observation was submitted for it).
        last_action: the last command the agent executed, which is what a submission scores
            (``None`` when it executed none, or for records written before the field existed).
            Kept in the archive, so a failure can be read without the trace.
        reward_raw: the environment's reward, unclipped; ``reward`` is it clipped at 0.
        success: ``reward_raw == 1``.
        turns, failed_actions, invalid_replies: environment interactions, actions that did
            not execute, replies that were not a valid action.
        llm_calls, prompt_tokens, completion_tokens, cached_tokens, cost: model usage.
        usage_by_state, usage_by_model: the same per state / model profile.
        path, transitions, history: the run's trace.
        eval: upstream's evaluation observations (cut to 2,000 characters).
        bash_comparison: for Bash, what the reward compared (the file-system changes of both
            sides, the content checks, the parts of the score); ``None`` elsewhere and in
            records written before it was kept. Left out of the stored line when ``None``, so
            older records are written back byte for byte.
        verdict: PDoctor's oracle findings (``None`` elsewhere).
        identity, identity_digest: the episode identity (:mod:`stateflow.tasks.harness.identity`);
            ``None`` in records written before identities existed.
        sample: ``dev`` or ``heldout`` when the run selected that fixed sample (``--tasks heldout``;
            :mod:`stateflow.tasks.reports.heldout` counts the recipes tried on it), else ``None``. Not part
            of the identity: the same episode on the same task is the same cell either way.
    """

    model_config = ConfigDict(frozen=True, strict=True, extra="allow")

    schema_version: int = SCHEMA_VERSION
    benchmark: str
    dataset: str = ""
    method: str
    view: str = ""
    flow: str = ""
    models: str
    task: int = Field(ge=0)
    query: str = ""
    gold: str = ""
    hardness: str | None = None
    context: str | None = None
    status: Literal["ok", "error", "timeout"]
    error: str | None = None
    stop_reason: str = ""
    submitted: bool = False
    last_action: str | None = None
    reward_raw: float
    reward: float = 0.0
    success: bool
    turns: int = Field(ge=0)
    failed_actions: int = Field(ge=0)
    invalid_replies: int = 0
    llm_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0
    cost: float = 0.0
    usage_by_state: dict[str, dict[str, Any]] = Field(default_factory=dict)
    usage_by_model: dict[str, dict[str, Any]] = Field(default_factory=dict)
    path: list[str] = Field(default_factory=list)
    transitions: list[dict[str, Any]] = Field(default_factory=list)
    history: list[dict[str, Any]] = Field(default_factory=list)
    eval: dict[str, str] = Field(default_factory=dict)
    bash_comparison: BashComparison | None = None
    verdict: dict[str, Any] | None = None
    wall_s: float = 0.0
    finished_at: str = ""
    identity: dict[str, Any] | None = None
    identity_digest: str | None = None
    sample: str | None = None

    @classmethod
    def from_dict(cls, data: Any, *, where: str = "") -> EpisodeRecord:
        """Validate a record read from JSON (or built by hand).

        Args:
            data: the decoded JSON object.
            where: ``file:line`` for error messages.

        Raises:
            InvalidRecordError: not an object, a newer schema version, a missing field or a
                value of the wrong type; every problem is listed.
        """
        if not isinstance(data, dict):
            raise InvalidRecordError(where, [f"expected a JSON object, got {type(data).__name__}"])
        version = data.get("schema_version", 0)  # written before the field existed
        if isinstance(version, int) and version > SCHEMA_VERSION:
            raise InvalidRecordError(
                where,
                [f"schema_version {version} is newer than this version reads ({SCHEMA_VERSION}); upgrade stateflow"],
            )
        try:
            return cls.model_validate({**data, "schema_version": version})
        except ValidationError as err:
            problems = [f"{'.'.join(map(str, e['loc'])) or 'record'}: {e['msg']}" for e in err.errors()]
            raise InvalidRecordError(where, problems) from None

    def to_dict(self) -> dict[str, Any]:
        """The record as plain values (what the results file stores), unknown keys it was loaded with included.

        ``bash_comparison`` is left out when it is ``None`` (every record but a scored Bash
        episode's), so records written before the field existed keep their exact text.
        """
        data = self.model_dump()
        if data["bash_comparison"] is None:
            del data["bash_comparison"]
        return data

    def stamped(self, identity: dict[str, Any], digest: str) -> EpisodeRecord:
        """The same record carrying its episode identity and digest."""
        return self.model_copy(update={"identity": identity, "identity_digest": digest})

    # Item access for readers written against the former dict records (tests, scripts, the
    # CLI tables); new code reads attributes.
    def __getitem__(self, key: str) -> Any:
        try:
            return getattr(self, key)
        except AttributeError:
            raise KeyError(key) from None

    def get(self, key: str, default: Any = None) -> Any:
        """The field or kept unknown key ``key``, else ``default``."""
        return getattr(self, key, default)

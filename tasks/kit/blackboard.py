"""What an InterCode-style episode records while it runs: typed, on the run's blackboard.

The tools that act in the environment (:mod:`stateflow.tasks.kit.tools`, the baselines, PDoctor, the
spec agents) count turns and failures and store the submitted reward in one
:class:`EpisodeVars` per run (``ctx.board``, see :mod:`stateflow.blackboard`); the flows'
conditions read it and the runner scores from it (``result.board``). The user's ``vars`` keep
only what the user passed in, such as ``max_turns``.

The observation a tool reports is typed too: :class:`Observation` is what ``execute`` puts in a
tool message's ``meta`` (the core's ``meta_is`` conditions read its ``ok`` and ``done`` keys), and
:meth:`Observation.of` reads it back.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from stateflow import Context, RunResult

__all__ = ["EpisodeVars", "Observation", "episode_vars"]


@dataclass
class EpisodeVars:
    """The episode's own facts (one per run).

    Attributes:
        turns: environment interactions so far (malformed replies count, as upstream).
        failed: actions that did not execute, and malformed replies.
        done: the episode was submitted (by the agent or, for Try-Again, by a solved attempt).
        reward: the reward of the submission (``None`` before one).
        submit_info: the environment's ``info`` of the submission (evaluation observations,
            PDoctor's verdict).
        best_reward: Try-Again: the best score of any attempt (``None`` elsewhere).
        best_info: Try-Again: the environment's ``info`` of the first attempt scored
            ``best_reward`` (what the record shows as the scored submission).
        tables: the tables ``SHOW TABLES`` listed (grammars may only name these).
        columns: each table's columns as ``describe_schema`` listed them (for the schema-linked
            grammar of :mod:`stateflow.tasks.sql.grammar`).
        last_action: the last command executed (to notice a repeated action).
    """

    turns: int = 0
    failed: int = 0
    done: bool = False
    reward: float | None = None
    submit_info: dict[str, Any] = field(default_factory=dict)
    best_reward: float | None = None
    best_info: dict[str, Any] = field(default_factory=dict)
    tables: list[str] = field(default_factory=list)
    columns: dict[str, list[str]] = field(default_factory=dict)
    last_action: str | None = None

    @classmethod
    def of(cls, ctx: Context) -> EpisodeVars:
        """The run's record (created on first use)."""
        return ctx.board.setdefault(cls)

    def count_turn(self, *, failed: bool = False) -> None:
        """One environment interaction; ``failed`` when the action did not execute."""
        self.turns += 1
        self.failed += failed

    def submitted(self, reward: float, info: Mapping[str, Any] | None = None) -> None:
        """The episode ended with a submission scored ``reward``."""
        self.done = True
        self.reward = reward
        self.submit_info = dict(info or {})


def episode_vars(result: RunResult) -> EpisodeVars:
    """What a finished run recorded (an empty record when no environment tool ran)."""
    return result.board.get(EpisodeVars) or EpisodeVars()


@dataclass(frozen=True)
class Observation:
    """What a tool reports about one action (a tool message's ``meta``).

    Attributes:
        ok: the action executed (upstream's ``action_executed``); False for a malformed reply.
        done: the environment ended the episode (a submit).
        action: the command run; ``None`` for a malformed reply, ``"submit"`` for a submit.
        statement: the command's first keyword (``SELECT``, ``DESC``...).
        repeated: the command repeats the previous one verbatim.
        reward: the score, for submits and scored attempts.
        solved: Try-Again: the attempt scored 1.
    """

    ok: bool
    done: bool = False
    action: str | None = None
    statement: str = ""
    repeated: bool = False
    reward: float | None = None
    solved: bool | None = None

    def meta(self) -> dict[str, Any]:
        """The ``meta`` mapping of a ``ToolResult`` (``reward`` and ``solved`` only when set)."""
        out: dict[str, Any] = {
            "ok": self.ok,
            "done": self.done,
            "action": self.action,
            "statement": self.statement,
            "repeated": self.repeated,
        }
        if self.reward is not None:
            out["reward"] = self.reward
        if self.solved is not None:
            out["solved"] = self.solved
        return out

    @classmethod
    def of(cls, meta: Mapping[str, Any]) -> Observation | None:
        """Read a tool message's ``meta`` back; ``None`` when it reports no observation (no ``ok``)."""
        if "ok" not in meta:
            return None
        return cls(
            ok=meta["ok"] is True,
            done=meta.get("done") is True,
            action=meta.get("action"),
            statement=str(meta.get("statement") or ""),
            repeated=meta.get("repeated") is True,
            reward=meta.get("reward"),
            solved=meta.get("solved"),
        )

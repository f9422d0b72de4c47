"""The InterCode-SQL benchmark: its :class:`~stateflow.tasks.kit.benchmark.Benchmark` record and named methods.

The runner, the episode and the CLI ask this record instead of comparing domain names. The
environment is imported when first opened, so listing methods or drawing a flow needs no MariaDB
client.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from stateflow.envs.base import Environment, Task
from stateflow.tasks.agents.baselines import build_oneshot
from stateflow.tasks.agents.methods import baseline_methods, spec_agent_methods, stateflow_methods
from stateflow.tasks.kit.benchmark import Benchmark, EnvOptions, Method
from stateflow.tasks.kit.prompts import PROMPTS_DIR
from stateflow.tasks.kit.spec_prompts import SQL_SPEC_DOMAIN
from stateflow.tasks.kit.tools import ObservationFormat, describe_schema, restate_question
from stateflow.tasks.sql.flow import build_sql_flow, executed_statement
from stateflow.tasks.sql.rebind import RebindingExecutor, rebind_columns
from stateflow.tasks.sql.repair import build_answer_repair

from stateflow import Flow, StateFlowView
from stateflow.vote import Vote

__all__ = ["INTERCODE_SQL", "TUNED_SQL_SUFFIX"]


def _question(task: Task) -> str:
    return f"Question: {task.query}"


def _open_sql(options: EnvOptions) -> Environment:
    from stateflow.envs.sql import open_sql_env

    return open_sql_env(
        options.dataset,
        backend=options.backend,
        dsn=options.dsn,
        data_dir=options.data_dir,
        database_scope=options.database_scope,  # type: ignore[arg-type]  # validated by open_sql_env
    )


# Not the paper's: each variant adds one lever measured on the development sample
# (docs/results.md, issue 15) to the one before it.
# _TUNED: schema, repetition guard, degenerate-output cut, the question's column order
_TUNED: dict[str, bool | int] = {"schema": True, "guard": True, "cut": True, "column_order": True}
_LEAN = {**_TUNED, "examples": False}  # no worked examples in the states' instructions
_REPAIR = {**_LEAN, "verify_then_submit": False}  # no Verify: the first SELECT that runs is submitted
_REBIND = {**_REPAIR, "rebind": True}  # columns read through the wrong alias moved to their table
_DIRECT = {**_REBIND, "thoughts": False}  # replies are "Action: ..." with no Thought line
_HINT = {**_DIRECT, "hint": True}  # "Unknown column" errors say which tables have the column
_FIX = {**_HINT, "error_submits": False}  # Error answers with a corrected statement, never submit
_VALUES = {**_HINT, "values": 3}  # Init shows 3 frequent values of each text column
_PROMPT_VOTE = {**_VALUES, "answer_vote": True}  # Solve votes among 3 differently prompted answers
_WIDE_VOTE = {**_PROMPT_VOTE, "wide_vote": True}  # ... among up to 5, until two agree
# Error's repair is voted the same way (on the three-way vote: the wide one lost 1 / 3 on the first 49 dev tasks)
_ERROR_VOTE = {**_PROMPT_VOTE, "error_vote": True}
# statements may name only the listed tables and columns (tasks/sql/grammar.py)
_HINT_NAMES = {**_HINT, "schema_grammar": True}
_VOTE_NAMES = {**_PROMPT_VOTE, "schema_grammar": True}
_VOTE_SHOTS = {**_PROMPT_VOTE, "solve_examples": True}  # Solve shows four worked one-line answers
_VOTE_FEWEST = {**_PROMPT_VOTE, "fewest_tables": True}  # Solve: join a table only for a column the others lack
_VOTE_SIMILAR = {**_PROMPT_VOTE, "similar_examples": 3}  # Init shows 3 solved questions like this one
_VOTE_QUESTION_LAST = {**_PROMPT_VOTE, "question_last": True}  # Init repeats the question after the schema

#: the SQL variant ``stateflow demo`` runs with local models: the best flow measured on the
#: development sample (docs/results.md, "Levers on the development sample")
TUNED_SQL_SUFFIX = "_hint"

# suffix -> the paper's flow with these parts switched off, or a variant with levers on
_SQL_VARIANTS: dict[str, dict[str, bool | int]] = {
    "": {},
    "_no_verify": {"verify": False},
    "_no_error": {"error": False},
    "_no_observe": {"observe": False},
    # the paper's flow without its worked examples: the 0.5B model copies them verbatim (it
    # queries the example's `telescope` table on every database), so this measures that alone
    "_no_examples": {"examples": False},
    # Error answers once; the next failure ends the episode (on 1.5B without examples, no
    # episode that reached Error was solved, and Error took 58 % of the prompt tokens)
    "_budget": {"error_replies": 1},
    "_no_examples_budget": {"examples": False, "error_replies": 1},
    "_schema": {"schema": True},  # Init lists every table with its columns (small models need it)
    "_tuned": _TUNED,
    "_lean": _LEAN,
    "_repair": _REPAIR,
    "_rebind": _REBIND,
    "_direct": _DIRECT,
    "_hint": _HINT,
    "_fix": _FIX,
    "_values": _VALUES,
    "_prompt_vote": _PROMPT_VOTE,
    "_wide_vote": _WIDE_VOTE,
    "_error_vote": _ERROR_VOTE,
    "_hint_names": _HINT_NAMES,
    "_vote_names": _VOTE_NAMES,
    "_vote_shots": _VOTE_SHOTS,
    "_vote_fewest": _VOTE_FEWEST,
    "_vote_similar": _VOTE_SIMILAR,
    "_vote_question_last": _VOTE_QUESTION_LAST,
    "_vote": {**_TUNED, "vote": 5},  # Solve votes over 5 statements run read-only
}


_SQL_FMT = ObservationFormat(full_schema=True)


@dataclass(frozen=True)
class _OneShot:
    """A one-shot lever measured on the development sample (docs/results.md, issue 15); not the paper's."""

    suffix: str
    about: str
    ddl: bool = False  # the schema as CREATE TABLE lines
    keys: bool = False  # the foreign keys under the schema
    thought: bool = True  # a Thought line before the action
    k: int = 0  # Vote over k replies (0: none)
    values: int = 0  # example values per text column (0: none)
    question_last: bool = False  # the question repeated after the schema

    def build(self, grammar: bool) -> Flow:
        vote = None
        if self.k:
            from stateflow.envs.sql.readonly import EpisodeReader  # here: listing methods needs no MySQL driver

            vote = Vote(executed_statement, RebindingExecutor(EpisodeReader()), k=self.k, greedy_first=True)
        setup = describe_schema(keys=self.keys, ddl=self.ddl, values=self.values)
        setups = (setup, restate_question()) if self.question_last else (setup,)
        return build_oneshot(
            "sql", fmt=_SQL_FMT, setup=setups, grammar=grammar, rebind=rebind_columns, thought=self.thought, vote=vote
        )


_SQL_ONESHOTS = (
    _OneShot("_rebind", "One-shot whose statement has wrongly aliased columns re-bound"),
    _OneShot("_keys", "oneshot_rebind with the foreign keys listed under the schema", keys=True),
    _OneShot("_direct", "oneshot_rebind answering with the statement only (no Thought)", thought=False),
    _OneShot("_direct_ddl", "oneshot_direct with the schema as CREATE TABLE lines", ddl=True, thought=False),
    _OneShot("_vote", "oneshot_rebind choosing among 5 replies (greedy + 4 sampled) by their results", k=5),
    _OneShot("_direct_vote", "oneshot_direct choosing among 5 replies (greedy + 4 sampled)", thought=False, k=5),
    _OneShot("_direct_values", "oneshot_direct with 3 frequent values of each text column", thought=False, values=3),
    _OneShot(
        "_direct_question_last",
        "oneshot_direct with the question repeated after the schema",
        thought=False,
        question_last=True,
    ),
)


def _sql_flow(switches: dict[str, bool | int]) -> Callable[[bool], Flow]:
    def build(grammar: bool) -> Flow:
        return build_sql_flow(grammar=grammar, **switches)

    return build


INTERCODE_SQL = Benchmark(
    name="intercode-sql",
    domain="sql",
    open_env=_open_sql,
    task_prompt=_question,
    observation=_SQL_FMT,
    methods={
        **{k: v for suffix, sw in _SQL_VARIANTS.items() for k, v in stateflow_methods(suffix, _sql_flow(sw)).items()},
        **baseline_methods("sql", _SQL_FMT, setup=describe_schema),
        **{f"oneshot{o.suffix}": Method(f"oneshot{o.suffix}", o.build, StateFlowView, o.about) for o in _SQL_ONESHOTS},
        "answer_repair": Method(
            "answer_repair",
            lambda g: build_answer_repair(fmt=_SQL_FMT, grammar=g),
            StateFlowView,
            "oneshot_direct's answer, repaired when it fails to run (not the paper's flow)",
        ),
        **spec_agent_methods("sql", SQL_SPEC_DOMAIN, _SQL_FMT),
    },
    prompts_dir=PROMPTS_DIR / "sql",
    default_backend="embedded",
    backends=("embedded", "docker", "dsn"),
    flows={
        "intercode-sql" + suffix.replace("_", "-"): (lambda sw=sw: build_sql_flow(**sw))
        for suffix, sw in _SQL_VARIANTS.items()
    },
    database_scope=True,
    spec_domain=SQL_SPEC_DOMAIN,
    description="InterCode-SQL: Spider questions on MariaDB",
)

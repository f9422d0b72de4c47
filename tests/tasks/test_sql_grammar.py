"""The schema-bound SQL grammar: its rules, how flows take it, and what it does to a real model."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from stateflow.tasks.harness.identity import flow_fingerprint
from stateflow.tasks.kit.blackboard import EpisodeVars
from stateflow.tasks.kit.grammar import ACTION_GBNF, ACTION_ONLY_GBNF, THOUGHT_ACTION_GBNF
from stateflow.tasks.sql.benchmark import INTERCODE_SQL
from stateflow.tasks.sql.flow import SQL_FLOW
from stateflow.tasks.sql.grammar import (
    schema_action_grammar,
    schema_action_only_grammar,
    schema_statement_rules,
    schema_thought_action_grammar,
)
from stateflow.tasks.sql.levers import build_sql_flow
from stateflow.tasks.sql.transforms import with_schema_grammar

from stateflow import LLM, Context
from tests.backends.local.gbnf_parse import unparsable

TABLES = ["orchestra", "performance"]
COLUMNS = {
    "orchestra": ["Orchestra_ID", "Major_Record_Format", "Record_Company"],
    "performance": ["Performance_ID", "Official ratings (millions)"],
}


def _rule(rules: str, name: str) -> str:
    return next(line for line in rules.splitlines() if line.startswith(f"{name} ::= "))


def test_names_are_offered_as_listed_and_lower_cased_and_odd_names_only_quoted():
    rules = schema_statement_rules(TABLES, COLUMNS)
    names = _rule(rules, "name")
    for n in ["orchestra", "Major_Record_Format", "major_record_format", "Performance_ID", "performance_id"]:
        assert f'"{n}"' in names
    assert "ratings" not in names  # a name with spaces cannot be a bare word
    assert '"Official ratings (millions)"' in _rule(rules, "tick")
    assert 'Record_Format"' not in rules.replace("Major_Record_Format", "")  # only listed names


def test_the_rules_are_the_same_on_every_build():
    assert schema_statement_rules(TABLES, COLUMNS) == schema_statement_rules(list(TABLES), dict(COLUMNS))


def test_no_tables_is_a_clear_error():
    with pytest.raises(ValueError, match="no tables"):
        schema_statement_rules([], {})


def test_each_form_falls_back_to_the_free_one_before_the_schema_is_listed():
    ctx = Context(task="q", history=[])
    assert schema_action_grammar(ctx) == ACTION_GBNF
    assert schema_action_only_grammar(ctx) == ACTION_ONLY_GBNF
    assert schema_thought_action_grammar(ctx) == THOUGHT_ACTION_GBNF
    ep = EpisodeVars.of(ctx)
    ep.tables, ep.columns = TABLES, COLUMNS
    rules = schema_statement_rules(TABLES, COLUMNS)
    assert schema_action_grammar(ctx).endswith(rules) and '"submit"' in schema_action_grammar(ctx)
    assert schema_action_only_grammar(ctx).startswith('root ::= "Action: execute[" stmt "]"')
    assert schema_thought_action_grammar(ctx).startswith('root ::= "Thought: " thought')


def _grammars(flow):
    return {n: o.grammar for n, s in flow.states.items() for o in s.outputs if isinstance(o, LLM)}


def test_the_flow_switch_binds_every_free_reply_form_and_the_votes_thought_variant():
    plain = INTERCODE_SQL.methods["sf_agent_prompt_vote"].build(True)
    bound = INTERCODE_SQL.methods["sf_agent_vote_names"].build(True)
    assert _grammars(plain) == {"Solve": ACTION_GBNF, "Error": ACTION_GBNF}
    assert _grammars(bound) == {"Solve": schema_action_grammar, "Error": schema_action_grammar}
    assert bound.states.keys() == plain.states.keys()
    vote = next(o.vote for o in bound.states["Solve"].outputs if isinstance(o, LLM))
    assert [v.grammar for v in vote.variants] == [None, None, schema_thought_action_grammar]
    # the paper's flow with Thought lines: Solve's two-line form gets the two-line twin
    thoughts = build_sql_flow(grammar=True, schema=True, schema_grammar=True)
    assert _grammars(thoughts)["Solve"] is schema_thought_action_grammar


def test_the_switch_is_part_of_the_flow_fingerprint_and_a_no_op_without_grammar():
    tuned, named = INTERCODE_SQL.methods["sf_agent_prompt_vote"], INTERCODE_SQL.methods["sf_agent_vote_names"]
    assert flow_fingerprint(tuned.build(True)) != flow_fingerprint(named.build(True))
    assert flow_fingerprint(tuned.build(False)) == flow_fingerprint(named.build(False))


def test_bad_combinations_are_clear_errors():
    with pytest.raises(ValueError, match="lever 'schema_grammar' needs 'schema'"):
        build_sql_flow(grammar=True, schema_grammar=True)
    with pytest.raises(ValueError, match="does not list its schema"):
        with_schema_grammar(SQL_FLOW)
    with pytest.raises(ValueError, match=r"no reply .* has a grammar"):
        with_schema_grammar(build_sql_flow(schema=True))


# A child process (a native crash cannot take pytest down) asks the real 0.5B model to run a
# statement with a column that does not exist, with and without the grammar.
_COPY = r"""
import json, sys
from llama_cpp import Llama, LlamaGrammar
from stateflow.tasks.sql.grammar import schema_statement_rules
tables, columns = json.loads(sys.argv[2])
grammar = LlamaGrammar.from_string('root ::= "Action: execute[" stmt "]"\n' + schema_statement_rules(tables, columns),
                                   verbose=False)
model = Llama(sys.argv[1], n_ctx=1024, n_threads=2, verbose=False, seed=0)
messages = [
    {"role": "system", "content": "Reply with exactly one line: Action: execute[<one SQL statement>]"},
    {"role": "user", "content": "Run exactly this statement: SELECT Record_Format, COUNT(*) FROM orchestra "
                                "GROUP BY Record_Format"},
]
out = {}
for key, g in (("free", None), ("bound", grammar)):
    reply = model.create_chat_completion(messages, temperature=0, max_tokens=60, grammar=g)
    out[key] = reply["choices"][0]["message"]["content"]
print(json.dumps(out))
"""


@pytest.mark.local_model
@pytest.mark.slow
def test_a_real_model_under_the_grammar_cannot_write_a_column_that_does_not_exist(local_small_model):
    proc = subprocess.run(
        [sys.executable, "-c", _COPY, str(local_small_model), json.dumps([TABLES, COLUMNS])],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert "SELECT Record_Format" in out["free"]  # the request does ask for the invented name...
    bound = out["bound"]
    assert bound.startswith("Action: execute[SELECT ") and bound.endswith("]")
    # ...and under the grammar every name in the statement is a listed one
    statement = bound[len("Action: execute[") : -1]
    assert "Record_Format" not in statement.replace("Major_Record_Format", "")
    assert "orchestra" in statement.lower()


def test_llama_cpp_parses_every_reply_grammar_with_and_without_a_schema():
    ctx = Context(task="q", history=[])
    free = [f(ctx) for f in (schema_action_grammar, schema_action_only_grammar, schema_thought_action_grammar)]
    ep = EpisodeVars.of(ctx)
    ep.tables, ep.columns = TABLES, COLUMNS
    bound = [f(ctx) for f in (schema_action_grammar, schema_action_only_grammar, schema_thought_action_grammar)]
    assert unparsable([*free, *bound]) == {}


def test_the_named_vote_sends_grammars_built_from_the_listed_schema(sql_available):
    from stateflow.envs.sql import open_sql_env
    from stateflow.tasks.agents.methods import build_method
    from stateflow.tasks.harness.registry import default_registry

    from stateflow import ModelProfile, run
    from stateflow.testing.fake_openai import FakeOpenAIServer

    flow, view = build_method("sf_agent_vote_names", default_registry().get("intercode-sql"), grammar=True)
    with open_sql_env("demo") as env:
        env.reset(0)
        gold = env.task(0).gold
        replies = iter(
            ["Action: execute[SELECT 1]", "Action: execute[SELECT 2]", f"Thought: t\nAction: execute[{gold}]"]
        )
        with FakeOpenAIServer(lambda *a: next(replies)) as srv:
            profile = ModelProfile(name="lc", model="m", provider="llamacpp", base_url=srv.url, api_key_env=None)
            run(flow, env.task(0).query, models=profile, env=env, vars={"max_turns": 10}, view=view)
        tables = [row[0] for row in env.step("SHOW TABLES")[0]]
    grammars = [q["grammar"] for q in srv.requests]
    assert len(grammars) == 3
    assert grammars[0] == grammars[1] and grammars[0].startswith('root ::= "Action: " ("submit" | "execute[" stmt "]")')
    assert grammars[2].startswith('root ::= "Thought: " thought')
    for table in tables:
        assert f'"{table}"' in _rule(grammars[0], "name")

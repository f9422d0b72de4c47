"""The lean chat client (client = "lean", stateflow.backends.lean_openai) on the REAL embedded model
(local-small): the grammar, sent in the request body, binds the reply.

Run under the shared model lock: ``flock /work/model.lock .venv/bin/python -m pytest
tests/backends/local/test_lean_local.py``.
"""

from __future__ import annotations

import dataclasses

import pytest

from stateflow import LLM, Flow, Prompt, State, Transition, run
from stateflow.backends.local import CATALOG, ModelStore, runtime_available
from stateflow.profiles import BUILTIN_PROFILES

pytestmark = pytest.mark.local_model

ANSWER = r'root ::= "Answer: " [a-z ]{1,40} "."'


def test_a_lean_profile_gets_a_grammar_bound_reply_and_its_usage() -> None:
    missing = runtime_available()
    if missing:
        pytest.skip(f"llama-cpp-python runtime absent ({missing}); run scripts/setup_local_llm.sh")
    if not ModelStore().status(CATALOG["local-small"]).present:
        pytest.skip("local-small model not in the cache; run scripts/setup_local_llm.sh")
    profile = dataclasses.replace(BUILTIN_PROFILES["local-small"], max_tokens=24, temperature=0.0, client="lean")
    ask = State("Ask", Prompt("Name a colour of the sky in a few words."), LLM(grammar=ANSWER))
    end = State("End", final=True)
    result = run(Flow("colour", initial=ask, transitions=[Transition(ask, end)]), "Reply briefly.", models=profile)
    assert result.error is None and result.exit_state == "End"
    reply = result.history[-1].content
    assert reply.startswith("Answer: ") and reply.endswith(".")  # the grammar reached the server
    u = result.usage()
    assert u.prompt_tokens > 0 and u.completion_tokens > 0

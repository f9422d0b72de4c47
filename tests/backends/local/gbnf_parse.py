"""Which GBNF grammars llama.cpp cannot parse, asked of the real parser in a child process.

``LlamaGrammar.from_string`` (llama-cpp-python 0.3.x) only stores the text, so it accepts
anything; the parse happens when a sampler is made from the grammar, which needs a vocabulary.
The child loads the local-small model's vocabulary only (under a second) and runs the server's
own check (:func:`stateflow.backends.local.server_app.check_grammar`). A child process, because a
native parser crash must not take the test run down.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from stateflow.backends.local import CATALOG, ModelStore, runtime_available

_PARSE = """
import json, sys
import llama_cpp
from stateflow.backends.local.server_app import InvalidGrammarError, check_grammar
model = llama_cpp.Llama(sys.argv[1], vocab_only=True, verbose=False)
bad = {}
for g in json.loads(sys.stdin.read()):
    try:
        check_grammar(model._model, llama_cpp.LlamaGrammar.from_string(g, verbose=False))
    except InvalidGrammarError as err:
        bad[g] = str(err)
print(json.dumps(bad))
"""


def unparsable(grammars: list[str]) -> dict[str, str]:
    """The grammars of ``grammars`` that llama.cpp rejects, with the error; skips the calling
    test when the runtime or the local-small model is absent."""
    missing = runtime_available()
    if missing:
        pytest.skip(f"llama-cpp-python absent ({missing}); run scripts/setup_local_llm.sh")
    status = ModelStore().status(CATALOG["local-small"])
    if not status.present:
        pytest.skip(
            "local-small model not in the cache (its vocabulary parses grammars); run scripts/setup_local_llm.sh"
        )
    proc = subprocess.run(
        [sys.executable, "-c", _PARSE, str(status.path)],
        input=json.dumps(grammars),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


_ACCEPTS = """
import ctypes, json, sys
import llama_cpp
from stateflow.backends.local.server_app import parse_grammar
model = llama_cpp.Llama(sys.argv[1], vocab_only=True, verbose=False)
eos = model.token_eos()


def allows(sampler, token):
    single = (llama_cpp.llama_token_data * 1)(llama_cpp.llama_token_data(token, 1.0, 0.0))
    check = llama_cpp.llama_token_data_array(data=single, size=1, selected=-1, sorted=False)
    llama_cpp.llama_sampler_apply(sampler, ctypes.byref(check))
    return single[0].logit != float("-inf")


out = []
for grammar, text in json.loads(sys.stdin.read()):
    sampler = parse_grammar(model._model, llama_cpp.LlamaGrammar.from_string(grammar, verbose=False))
    ok = True
    for token in model.tokenize(text.encode("utf-8"), add_bos=False, special=False):
        if not allows(sampler, token):
            ok = False
            break
        llama_cpp.llama_sampler_accept(sampler, token)
    out.append(ok and allows(sampler, eos))  # the whole text, and the grammar may end there
    llama_cpp.llama_sampler_free(sampler)
print(json.dumps(out))
"""


def grammar_accepts(cases: list[tuple[str, str]]) -> list[bool]:
    """For each ``(grammar, text)``: whether llama.cpp's grammar sampler lets the local-small
    model's tokens of ``text`` through, one by one, and then lets the reply end (what decoding
    with that grammar can produce); skips like :func:`unparsable`."""
    missing = runtime_available()
    if missing:
        pytest.skip(f"llama-cpp-python absent ({missing}); run scripts/setup_local_llm.sh")
    status = ModelStore().status(CATALOG["local-small"])
    if not status.present:
        pytest.skip("local-small model not in the cache (its vocabulary tokenizes); run scripts/setup_local_llm.sh")
    proc = subprocess.run(
        [sys.executable, "-c", _ACCEPTS, str(status.path)],
        input=json.dumps(cases),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])

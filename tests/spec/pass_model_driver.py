"""Runs a PASS spec agent on the REAL local-small model and a demo SQL task; prints one JSON line.

Started as a subprocess by test_pass_local_model.py (a native crash cannot kill the test run).
Scenarios:
  scorer - in-process LocalScorer log-probabilities vs a logits_all reference on the same model
  pass   - one PASS episode through the runner's flow (per-turn grammars), with its trace
"""

from __future__ import annotations

import json
import math
import sys
import warnings


def scorer() -> dict:
    """Two candidates after one prompt: the first is scored from an empty cache, the second
    reuses the prompt's KV state. Each is compared with a ``logits_all`` reference evaluated in
    the same batch layout (llama.cpp's kernels are not bit-identical across batch shapes, so a
    layout-matched reference is what makes an exact comparison possible)."""
    import llama_cpp
    import numpy as np

    from stateflow.backends.local import CATALOG, ModelStore
    from stateflow.scoring import LocalScorer

    path = ModelStore().status(CATALOG["local-small"]).path
    msgs = [{"role": "system", "content": "You answer SQL questions."}, {"role": "user", "content": "How many?"}]
    prefix = "[Plan] count the rows\n[Summary]"
    cands = [" 1. execute[SELECT count(*) FROM singer] -> [(6,)]", " There are 6 singers."]
    sc = LocalScorer(path, n_ctx=1024)
    got = [sc.token_logprobs(msgs, prefix, c) for c in cands]
    prompt = sc._render(msgs) + prefix  # the scorer's own rendering (the GGUF chat template)
    ref = llama_cpp.Llama(model_path=str(path), n_ctx=1024, logits_all=True, verbose=False)
    head = ref.tokenize(prompt.encode(), add_bos=False, special=True)
    tails = [ref.tokenize(c.encode(), add_bos=False, special=False) for c in cands]

    def ref_logprobs(tail: list[int]) -> list[float]:
        out = []
        for i, tok in enumerate(tail):
            row = ref.scores[len(head) - 1 + i].astype(np.float64)
            out.append(float(row[tok] - (row.max() + math.log(np.exp(row - row.max()).sum()))))
        return out

    ref.reset()
    ref.eval(head + tails[0][:-1])  # first call: everything but the last token, one batch
    first = ref_logprobs(tails[0])
    ref.n_tokens = len(head) - 1  # second call: the prompt's KV kept, its last token re-evaluated
    ref.eval(([head[-1]] + tails[1])[:-1])
    second = ref_logprobs(tails[1])
    diffs = [abs(a - b) for a, b in zip(first + second, got[0] + got[1], strict=True)]
    return {
        "lengths": [len(x) for x in got],
        "max_abs_diff": max(diffs),
        "evaluated_tokens": sc.evaluated_tokens,
        # without KV reuse the second call would evaluate the prompt again
        "tokens": len(head) + len(tails[0]) - 1 + len(tails[1]),
        "template_start": prompt[:30],
    }


def pass_episode() -> dict:
    from stateflow.tasks.agents.spec_agents import SpecAgentConfig, build_spec_agent
    from stateflow.tasks.harness.runner import RunSpec, open_env
    from stateflow.tasks.kit.blackboard import episode_vars
    from stateflow.tasks.kit.spec_prompts import SQL_SPEC_DOMAIN
    from stateflow.tasks.sql.benchmark import INTERCODE_SQL

    import stateflow
    from stateflow.profiles import BUILTIN_PROFILES

    profile = BUILTIN_PROFILES["local-small"]
    config = SpecAgentConfig("pass", "grammar", max_calls=12)
    flow = build_spec_agent(
        "pass", "grammar", SQL_SPEC_DOMAIN, prefix="sql", fmt=INTERCODE_SQL.observation, config=config
    )
    env = open_env(RunSpec(INTERCODE_SQL, ("spec_pass_grammar",), stateflow.ModelAssignment.of(profile), "x", out=None))
    try:
        env.reset(0)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            result = stateflow.run(
                flow,
                f"Question: {env.task(0).query}",
                models=profile,
                env=env,
                vars={"max_turns": 10},
                raise_errors=False,
            )
    finally:
        env.close()
    meta = result.history.last().meta if result.history.last() is not None else {}
    return {
        "error": result.error,
        "reward": episode_vars(result).reward,
        "prompt_tokens": result.usage().prompt_tokens,
        "completion_tokens": result.usage().completion_tokens,
        "spec": meta.get("spec"),
    }


if __name__ == "__main__":
    scenario = sys.argv[1]
    out = {"scorer": scorer, "pass": pass_episode}[scenario]()
    print(json.dumps(out, default=str))

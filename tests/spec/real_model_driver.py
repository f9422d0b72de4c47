"""Runs spec scenarios against the REAL local-small model; prints one JSON line.

Started as a subprocess by test_local_model.py (a native crash cannot kill the test run).
Scenarios:
  grammars  - every library spec's turn and content grammars parsed by llama.cpp (no model)
  react     - a ReAct spec under the decoding monitor with per-turn grammars, and imported as a
              StateFlow flow, both on the local-small model
"""

from __future__ import annotations

import json
import sys
import warnings

REACT_CALC = """
(define react-calc
  (:states
    (Question "Question:" :env-input)
    (Thought "Thought:")
    (Action "Action:" (:output-constrs "calculate" "finish"))
    (Action-Input "Action Input:")
    (Observation "Observation:" :env-input)
    (Final-Thought "Final Thought:")
    (Answer "Answer:"))
  (:behavior (next Question (until_2 (next Thought Action Action-Input Observation) Final-Thought) Answer)))
"""
QUESTION = "What is 17 * 23?"
SYSTEM = (
    "Solve the question. Steps: Thought:, Action: (calculate or finish), Action Input:, then the "
    "Observation: is given to you. End with Final Thought: and Answer:."
)


def _calculator(expr: str) -> str:
    # a tiny arithmetic evaluator for the test: digits, spaces and * + - only
    allowed = set("0123456789 *+-")
    if not expr or set(expr) - allowed:
        return "error: only digits and * + - are supported"
    total = 0
    for term in expr.replace("-", "+-").split("+"):
        if term.strip():
            prod = 1
            for f in term.split("*"):
                prod *= int(f.strip() or "0")
            total += prod
    return str(total)


def grammars() -> dict:
    import llama_cpp

    from stateflow.backends.local import CATALOG, ModelStore
    from stateflow.spec import library_names, library_spec
    from stateflow.spec.grammar import content_grammar, line_grammar, turn_grammar

    # llama.cpp parses a grammar when a sampler is built from it (LlamaGrammar.from_string does
    # not validate); the model's vocabulary is all that needs loading
    path = ModelStore().status(CATALOG["local-small"]).path
    llm = llama_cpp.Llama(model_path=str(path), vocab_only=True, verbose=False)
    vocab = llama_cpp.llama_model_get_vocab(llm.model)

    def parses(g: str) -> bool:
        sampler = llama_cpp.llama_sampler_init_grammar(vocab, g.encode(), b"root")
        if not sampler:
            return False
        llama_cpp.llama_sampler_free(sampler)
        return True

    checked, rejected = 0, []
    for name in library_names():
        spec = library_spec(name)
        found = [turn_grammar(spec, q) for q in range(spec.dfa.num_states) if spec.dfa.next_states(q)]
        found += [content_grammar(spec, state) for state in spec.spec.states]
        found += [line_grammar(spec, state) for state in spec.spec.states]
        for g in found:
            checked += 1
            if not parses(g):
                rejected.append(g)
    return {"grammars_parsed": checked, "rejected": rejected, "control_rejected": not parses('root ::= "a" q9')}


def react() -> dict:
    import stateflow
    from stateflow.profiles import BUILTIN_PROFILES
    from stateflow.spec import AgentSpec
    from stateflow.spec.completer import completer_for
    from stateflow.spec.importer import SpecRun, spec_to_flow, task_input
    from stateflow.spec.monitor import DecodingMonitor

    spec = AgentSpec.from_text(REACT_CALC)
    profile = BUILTIN_PROFILES["local-small"].with_overrides(max_tokens=48)
    completer = completer_for(profile)

    def env(state, steps):
        return QUESTION if state == "Question" else _calculator(steps[-1].content)

    mon = DecodingMonitor(spec, completer, use_grammar=True, chunk_tokens=96, max_calls=12)
    tr = mon.run([{"role": "system", "content": SYSTEM}, {"role": "user", "content": QUESTION}], env)
    sf = spec_to_flow(
        spec,
        env_inputs={"Question": task_input, "Observation": lambda ctx: _calculator(ctx.history.last().content.strip())},
        system_message=SYSTEM,
        max_transitions=16,
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = stateflow.run(sf.flow, QUESTION, models={"*": profile}, raise_errors=False)
    flow_trace = sf.trace(result)

    def _content(seg):
        return None if seg is None or seg.state not in (None, "Action") else seg.content

    return {
        "monitor": {
            "trace": tr.trace,
            "accepted": spec.dfa.accepts(tr.trace),
            "violations": len(tr.violations),
            "calls": tr.calls,
            "stop_reason": tr.stop_reason,
            "answer": tr.steps[-1].content if tr.steps else "",
        },
        "flow": {
            "trace": flow_trace,
            "prefix_valid": spec.dfa.accepts_prefix(flow_trace),
            "accepted": spec.dfa.accepts(flow_trace),
            "stop_reason": result.stop_reason,
            "error": result.error,
            "violations": list((result.board.get(SpecRun) or SpecRun()).violations),
            # each Action message's content by the spec's splitting rule (the label is stripped)
            "actions": [
                _content((spec.segmenter.split(m.content.strip()) or [None])[0])
                for m in result.history
                if m.state == "Action" and m.kind.value == "llm"
            ],
        },
    }


if __name__ == "__main__":
    scenario = sys.argv[1]
    out = {"grammars": grammars, "react": react}[scenario]()
    print(json.dumps(out))

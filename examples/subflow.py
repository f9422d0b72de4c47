"""A flow as a state of another flow: the subflow's states run inside the parent's state.

Runs as written on the embedded model (its llama.cpp server is started by the run):

    python examples/subflow.py                        # embedded Qwen2.5-Coder-1.5B
    python examples/subflow.py --model local-small    # the embedded 0.5B model
    python examples/subflow.py --graph                # print the nested Mermaid graph only

``State("Write", Prompt(...), WRITER)`` runs the prompt, then the ``WRITER`` flow's own states and
rules (Draft -> Check -> Draft ... -> Ok), then the parent's rules leaving ``Write``. The path,
the trace and usage by state name the inner states ``Write.Draft``, ``Write.Check``, ``Write.Ok``;
checkpoints save them too, so a thread resumes in the middle of the subflow.
"""

from __future__ import annotations

import argparse

from stateflow import (
    LLM,
    Flow,
    ModelAssignment,
    ModelProfile,
    Prompt,
    RunResult,
    State,
    Tool,
    ToolResult,
    Transition,
    meta_is,
    run,
)
from stateflow.graph import to_mermaid

LIMIT = 12  # words


def word_check(ctx) -> ToolResult:
    """Accept the last draft when it is short enough; two tries at most."""
    draft = ctx.history.last("llm")
    words = len(draft.content.split()) if draft is not None else 0
    tries = ctx.vars["tries"] = ctx.vars.get("tries", 0) + 1
    ok = words <= LIMIT or tries >= 2
    verdict = "accepted" if ok else f"too long: {words} words, at most {LIMIT}; shorten it"
    return ToolResult(f"{words} words: {verdict}", {"done": ok})


def writer() -> Flow:
    draft = State("Draft", Prompt(f"Write the slogan, at most {LIMIT} words, nothing else."), LLM())
    check = State("Check", Tool(word_check, "word_check"))
    ok = State("Ok", final=True)
    return Flow(
        "writer",
        initial=draft,
        transitions=[Transition(check, ok, when=meta_is("done")), Transition(draft, check), Transition(check, draft)],
    )


def build() -> Flow:
    plan = State("Plan", Prompt("In one sentence: what should a slogan for this product say?"), LLM())
    write = State("Write", Prompt("Now write it."), writer())
    done = State("Done", final=True)
    return Flow("slogan", initial=plan, transitions=[Transition(plan, write), Transition(write, done)])


def profile_for(model: str, base_url: str | None = None) -> ModelProfile:
    if base_url is not None:
        return ModelProfile(name="writer", model=model, base_url=base_url, api_key_env=None)
    return ModelAssignment.of(model).profile_for("Plan")


def main(model: str = "local", *, base_url: str | None = None, max_tokens: int | None = 64) -> RunResult:
    profile = profile_for(model, base_url)
    if max_tokens is not None:
        profile = profile.with_overrides(max_tokens=max_tokens)
    result = run(build(), "A kettle that boils water with sunlight.", models=profile)
    print("path:", " -> ".join(result.path))
    for state, totals in result.usage_by_state().items():
        print(f"  {state:12s} calls={totals.calls} tokens={totals.prompt_tokens}+{totals.completion_tokens}")
    return result


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="local", help="profile or model name (default: the embedded local)")
    parser.add_argument("--base-url", help="an OpenAI-compatible endpoint serving --model")
    parser.add_argument("--graph", action="store_true", help="print the Mermaid graph and exit")
    args = parser.parse_args()
    if args.graph:
        print(to_mermaid(build()), end="")
    else:
        main(args.model, base_url=args.base_url)

"""Several output functions of one state at once, merged by a declared function: ``Parallel``.

Runs as written on the embedded model (its llama.cpp server is started by the run):

    python examples/parallel_branches.py                        # embedded Qwen2.5-Coder-1.5B
    python examples/parallel_branches.py --model local-small    # the embedded 0.5B model

The ``Gather`` state asks the model for a first answer while two slow lookups (tools that
sleep, standing in for a search index and a database) run beside it; ``merge`` joins the three
results into one message for the ``Answer`` state. The printed trace shows each branch's start
and end: the intervals overlap, and the fan-out's wall time is below the sum of the branches'.
"""

from __future__ import annotations

import argparse
import time

from stateflow import (
    LLM,
    BranchResult,
    Flow,
    ModelAssignment,
    ModelProfile,
    Parallel,
    Prompt,
    RunResult,
    State,
    Tool,
    Transition,
    run,
)

FACTS = {"stock": "kettle: 14 in stock", "reviews": "kettle: 4.6 stars from 212 reviews"}


def stock(ctx) -> str:
    time.sleep(1.0)  # a slow inventory service
    return FACTS["stock"]


def reviews(ctx) -> str:
    time.sleep(1.0)  # a slow review index
    return FACTS["reviews"]


def merge(ctx, results: list[BranchResult]) -> str:
    """One line per branch; a branch that failed would have failed the state (no merge_failures)."""
    return "\n".join(f"{r.name}: {r.content.strip()}" for r in results)


def build() -> Flow:
    gather = State(
        "Gather",
        Prompt("In one sentence: should a customer buy this kettle?"),
        Parallel(
            LLM(), Tool(stock, "stock"), Tool(reviews, "reviews"), merge=merge, names=["opinion", "stock", "reviews"]
        ),
    )
    answer = State("Answer", Prompt("Using the facts above, answer the customer in two sentences."), LLM())
    done = State("Done", final=True)
    return Flow("kettle-advice", initial=gather, transitions=[Transition(gather, answer), Transition(answer, done)])


def profile_for(model: str, base_url: str | None = None) -> ModelProfile:
    if base_url is not None:
        return ModelProfile(name="advisor", model=model, base_url=base_url, api_key_env=None)
    return ModelAssignment.of(model).profile_for("Gather")


def main(model: str = "local", *, base_url: str | None = None, max_tokens: int | None = 64) -> RunResult:
    profile = profile_for(model, base_url)
    if max_tokens is not None:
        profile = profile.with_overrides(max_tokens=max_tokens)
    result = run(build(), "A customer asks about the solar kettle.", models=profile)
    t0 = result.started_at
    for s in result.steps:
        if s.state == "Gather" and s.output.startswith("parallel"):
            print(f"{s.output:28s} {s.started_at - t0:6.2f}s -> {s.started_at + s.latency_s - t0:6.2f}s")
    fan = next(s for s in result.steps if s.output == "parallel")
    print(f"wall {fan.detail['wall_s']:.2f}s, branches {fan.detail['branches_s']:.2f}s")
    print(result.history.last().content)
    return result


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="local", help="profile or model name (default: the embedded local)")
    parser.add_argument("--base-url", help="an OpenAI-compatible endpoint serving --model")
    args = parser.parse_args()
    main(args.model, base_url=args.base_url)

"""A person in any state: ``Human()`` asks through AutoGen's human input, the flow branches on the answer.

Runs as written on the embedded model (its llama.cpp server is started by the run) and asks you
at the console:

    python examples/human_in_the_loop.py                       # embedded Qwen2.5-Coder-1.5B
    python examples/human_in_the_loop.py --model local-small   # the embedded 0.5B model
    python examples/human_in_the_loop.py --base-url http://127.0.0.1:8000/v1 --model Qwen/Qwen2.5-7B-Instruct

The embedded models must be in the cache first (``bash scripts/setup.sh``; ``stateflow llm list``).

The model drafts a reply to a customer; a person approves it (``yes``) or says what to change,
and the draft is revised until approved. ``Human()`` reads the console by default; tests pass a
scripted person (``stateflow.testing.human.ScriptedHuman``) as ``run(..., human_input=...)``.
"""

from __future__ import annotations

import argparse
from typing import Any

from stateflow import (
    LLM,
    Flow,
    Human,
    Kind,
    ModelAssignment,
    ModelProfile,
    Prompt,
    RunResult,
    State,
    Transition,
    last_matches,
    run,
)


def build() -> Flow:
    draft = State("Draft", Prompt("Write or revise a two-sentence reply to the customer."), LLM())
    approve = State("Approve", Human("Send this reply? (yes, or what to change): "))
    done = State("Done", final=True)
    return Flow(
        "human-approval",
        initial=draft,
        max_transitions=8,
        transitions=[
            Transition(draft, approve),
            Transition(approve, done, when=last_matches(r"(?i)^\s*(yes|y|ok)\b", kind=Kind.HUMAN)),
            Transition(approve, draft),
        ],
    )


def main(
    model: str = "local", *, base_url: str | None = None, human_input: Any = None, max_tokens: int | None = None
) -> RunResult:
    if base_url is not None:
        profile = ModelProfile(name="writer", model=model, base_url=base_url, api_key_env=None)
    else:  # a profile or model name StateFlow knows: local, local-small, openai:gpt-4o-mini, a GGUF path...
        profile = ModelAssignment.of(model).profile_for("Draft")
    if max_tokens is not None:
        profile = profile.with_overrides(max_tokens=max_tokens)
    task = "Customer: my kettle arrived with a cracked lid."
    result = run(build(), task, models=profile, human_input=human_input)
    print("path:", " -> ".join(result.path))
    return result


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="local", help="profile or model name (default: the embedded local)")
    parser.add_argument("--base-url", help="an OpenAI-compatible endpoint serving --model")
    args = parser.parse_args()
    main(args.model, base_url=args.base_url)

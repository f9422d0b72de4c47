"""A reply asked for as a typed object: ``LLM(schema=SomePydanticModel)``.

Runs as written on the embedded model (its llama.cpp server is started by the run):

    python examples/structured_output.py                        # embedded Qwen2.5-Coder-1.5B
    python examples/structured_output.py --model local-small    # the embedded 0.5B model
    python examples/structured_output.py --model openai:gpt-4o-mini   # needs OPENAI_API_KEY

The model's JSON schema constrains decoding: the embedded llama.cpp server turns it into a
grammar itself (``response_format`` of type ``json_object`` with the schema), OpenAI-compatible
servers get a ``json_schema`` response format. The reply is validated into a ``Ticket``; one that
does not validate is re-asked once with the error, then the state fails. The object is on the
run's blackboard, so the rule below routes on it with ``parsed(Ticket, ...)``.
"""

from __future__ import annotations

import argparse
from typing import Literal

from pydantic import BaseModel, Field

from stateflow import LLM, Flow, ModelAssignment, ModelProfile, Prompt, RunResult, State, Transition, run
from stateflow.structured import parsed


class Ticket(BaseModel):
    """A support ticket, triaged."""

    summary: str = Field(max_length=120)
    severity: Literal["low", "medium", "high"]
    component: Literal["billing", "login", "search", "other"]


def build() -> Flow:
    triage = State(
        "Triage",
        Prompt("Triage this support ticket. Reply with a JSON object: summary, severity, component."),
        LLM(schema=Ticket),
    )
    page, queue = State("Page", final=True), State("Queue", final=True)
    return Flow(
        "triage",
        initial=triage,
        transitions=[
            Transition(triage, page, when=parsed(Ticket, lambda t: t.severity == "high", "severity is high")),
            Transition(triage, queue),
        ],
    )


def profile_for(model: str, base_url: str | None = None) -> ModelProfile:
    if base_url is not None:
        return ModelProfile(name="triage", model=model, base_url=base_url, api_key_env=None)
    return ModelAssignment.of(model).profile_for("Triage")


def main(model: str = "local", *, base_url: str | None = None, max_tokens: int | None = 96) -> RunResult:
    profile = profile_for(model, base_url)
    if max_tokens is not None:
        profile = profile.with_overrides(max_tokens=max_tokens)
    task = "Since this morning nobody can log in: every password is rejected, the whole team is blocked."
    result = run(build(), task, models=profile)
    ticket = result.board.get(Ticket)
    print(f"path: {' -> '.join(result.path)}")
    print(f"ticket: {ticket!r}")
    return result


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="local", help="profile or model name (default: the embedded local)")
    parser.add_argument("--base-url", help="an OpenAI-compatible endpoint serving --model")
    args = parser.parse_args()
    main(args.model, base_url=args.base_url)

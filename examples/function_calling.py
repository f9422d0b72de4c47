"""An LLM state with tools: OpenAI function calling where the model has it, a text protocol elsewhere.

Runs as written on the embedded model (its llama.cpp server is started by the run):

    python examples/function_calling.py                          # embedded Qwen2.5-Coder-1.5B
    python examples/function_calling.py --model local-small      # the embedded 0.5B model
    python examples/function_calling.py --model openai:gpt-4o-mini                  # needs OPENAI_API_KEY
    python examples/function_calling.py --base-url http://127.0.0.1:11434/v1 --model qwen2.5-coder --native

The embedded models must be in the cache first: ``bash scripts/setup.sh`` puts the 0.5B one there,
``STATEFLOW_SETUP_MODELS=local bash scripts/setup_local_llm.sh`` the 1.5B one (``stateflow llm list``).

``LLM(tools=[...])`` takes plain typed functions (or ``autogen.tools.Tool`` objects). With a
profile whose server takes OpenAI ``tools`` (``function_calling=True``, the default for OpenAI
and Ollama) the model answers with ``tool_calls``; with any other (the embedded model, llama.cpp,
vLLM) it is shown each tool's call with its real parameter names
(``Action: multiply[{"a": <number>, "b": <number>}]``) and a malformed call gets a short
observation saying what is wrong. Either way the run executes the call through AutoGen, records
it and its result in the history and the trace, and asks again until the model answers without a
tool. The tests run both modes against a fake server and the example as written on the embedded
0.5B model (tests/interop/test_examples.py).
"""

from __future__ import annotations

import argparse
from typing import Annotated

from stateflow import LLM, Flow, ModelAssignment, ModelProfile, Prompt, RunResult, State, Transition, run

PRICES = {"kettle": 39.0, "toaster": 25.5, "mug": 7.25}


def price_of(item: Annotated[str, "a product name"]) -> float:
    """The price of a product in euros."""
    if item not in PRICES:
        raise KeyError(f"no product {item!r}; products: {', '.join(PRICES)}")
    return PRICES[item]


def multiply(a: Annotated[float, "first factor"], b: Annotated[float, "second factor"]) -> float:
    """Multiply two numbers."""
    return a * b


def build() -> Flow:
    answer = State(
        "Answer",
        Prompt("Answer the question. Use the tools for prices and arithmetic; never guess a price."),
        LLM(tools=(price_of, multiply), max_tool_rounds=4),
    )
    done = State("Done", final=True)
    return Flow("shop-assistant", initial=answer, transitions=[Transition(answer, done)])


def profile_for(model: str, base_url: str | None = None, native: bool | None = None) -> ModelProfile:
    """``model`` at ``base_url`` (any OpenAI-compatible server), or, without one, a profile or model
    name StateFlow knows (``local``, ``local-small``, ``openai:gpt-4o-mini``, a GGUF path...)."""
    if base_url is not None:
        return ModelProfile(name="assistant", model=model, base_url=base_url, api_key_env=None, function_calling=native)
    profile = ModelAssignment.of(model).profile_for("Answer")
    return profile if native is None else profile.with_overrides(function_calling=native)


def main(
    model: str = "local", *, base_url: str | None = None, native: bool | None = None, max_tokens: int | None = None
) -> RunResult:
    profile = profile_for(model, base_url, native)
    if max_tokens is not None:
        profile = profile.with_overrides(max_tokens=max_tokens)
    result = run(build(), "What do three kettles cost?", models=profile)
    for m in result.history:
        print(f"[{m.kind.value}] {m.name}: {m.content}")
    return result


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="local", help="profile or model name (default: the embedded local)")
    parser.add_argument("--base-url", help="an OpenAI-compatible endpoint serving --model")
    parser.add_argument(
        "--native", action="store_true", default=None, help="the server supports OpenAI function calling"
    )
    args = parser.parse_args()
    main(args.model, base_url=args.base_url, native=args.native)

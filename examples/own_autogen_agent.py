"""Your own AutoGen agents serve states: a writer with a tool, an editor with a nested critic chat.

Runs as written on the embedded model (the example starts its llama.cpp server and gives the
agents its URL):

    python examples/own_autogen_agent.py                       # embedded Qwen2.5-Coder-1.5B
    python examples/own_autogen_agent.py --model local-small   # the embedded 0.5B model
    python examples/own_autogen_agent.py --model openai:gpt-4o-mini                 # needs OPENAI_API_KEY
    python examples/own_autogen_agent.py --base-url http://127.0.0.1:8000/v1 --model Qwen/Qwen2.5-7B-Instruct

The embedded models must be in the cache first (``bash scripts/setup.sh``; ``stateflow llm list``).
Their server does not return OpenAI ``tool_calls``, so there the writer answers without calling
``word_count``; with a function-calling model (OpenAI, Ollama, vLLM with tool parsing) it calls it.

* ``Draft`` is served by an ``AssistantAgent`` with its own system message and a tool
  (``word_count``) registered the AutoGen way (``register_function``); the run executes the tool
  calls it requests and feeds the results back until it answers.
* ``Review`` is served by an editor agent whose reply comes from a nested chat with a critic
  (``register_nested_chats``); the critic's usage is counted for the state (``usage_agents``).

StateFlow appends each agent's reply to the history, picks the next state with its rules and
traces tokens and cost per state. The tests run it against a fake server and as written on the
embedded 0.5B model (tests/interop/test_examples.py).
"""

from __future__ import annotations

import argparse
from typing import Annotated

from autogen import AssistantAgent, ConversableAgent, register_function

from stateflow import AutoGenAgent, Flow, Kind, ModelAssignment, RunResult, State, Transition, last_contains, run


def word_count(text: Annotated[str, "the text to count"]) -> int:
    """Count the words of a text."""
    return len(text.split())


def build(
    base_url: str, model: str, api_key: str = "not-needed", max_tokens: int | None = None, max_transitions: int = 6
) -> Flow:
    """The flow, with agents that call ``model`` at ``base_url`` (at most ``max_transitions`` steps
    between states: a critic that never approves ends the run there)."""
    entry = {"model": model, "base_url": base_url, "api_key": api_key, "price": [0.0, 0.0]}  # your prices here
    if max_tokens is not None:
        entry["max_tokens"] = max_tokens
    llm_config = {"config_list": [entry], "cache_seed": None}
    writer = AssistantAgent(
        "writer",
        system_message="You write one-sentence product blurbs of at most 12 words. Check the length with word_count.",
        llm_config=llm_config,
    )
    register_function(word_count, caller=writer, executor=writer, description="Count the words of a text.")
    critic = AssistantAgent(
        "critic",
        system_message="You review blurbs. Reply APPROVED if the blurb is at most 12 words, else say what to cut.",
        llm_config=llm_config,
    )
    editor = ConversableAgent("editor", llm_config=False, human_input_mode="NEVER")
    editor.register_nested_chats(
        [{"recipient": critic, "max_turns": 1, "summary_method": "last_msg"}], trigger=lambda sender: True
    )
    draft = State("Draft", AutoGenAgent(writer))
    review = State("Review", AutoGenAgent(editor, usage_agents=(critic,)))
    done = State("Done", final=True)
    return Flow(
        "own-agents",
        initial=draft,
        max_transitions=max_transitions,
        transitions=[
            Transition(draft, review),
            Transition(review, done, when=last_contains("APPROVED")),
            Transition(review, draft),
        ],
    )


def endpoint(model: str, base_url: str | None = None) -> tuple[str, str, str]:
    """``(base_url, model, api_key)`` for the agents' ``config_list``: ``model`` at ``base_url``, or
    a profile or model name StateFlow knows (the embedded ones start their server here)."""
    if base_url is not None:
        return base_url, model, "not-needed"
    profile = ModelAssignment.of(model).profile_for("Draft")
    if profile.provider == "local":
        from stateflow.backends.local import resolve_endpoint

        return resolve_endpoint(profile), profile.model, "not-needed"
    return profile.base_url or "https://api.openai.com/v1", profile.model, profile.api_key()


def main(
    model: str = "local", *, base_url: str | None = None, max_tokens: int | None = None, max_transitions: int = 6
) -> RunResult:
    url, served, key = endpoint(model, base_url)
    flow = build(url, served, key, max_tokens, max_transitions)
    result = run(flow, "Write a blurb for a solar-powered kettle.")
    # the writer's reply as recorded (with a tool call: the call, its result, then the blurb)
    print("writer:", last_reply(result, "Draft").replace("\n", "\n        "))
    print("critic:", last_reply(result, "Review"))
    print("stopped:", why_stopped(result, max_transitions))
    print("path:", " -> ".join(result.path))
    for state, usage in result.usage_by_state().items():
        print(f"{state}: {usage.prompt_tokens} prompt + {usage.completion_tokens} completion tokens")
    return result


def last_reply(result: RunResult, state: str) -> str:
    """The last agent reply with text in ``state`` (a tool call's request has none)."""
    replies = [m.content.strip() for m in result.history if m.state == state and m.kind is Kind.LLM]
    return next((r for r in reversed(replies) if r), "(no reply)")


def why_stopped(result: RunResult, max_transitions: int) -> str:
    """Why the run ended, in words."""
    if result.stop_reason == "final":
        return f"the critic approved (final state {result.exit_state})"
    if result.stop_reason == "max_transitions":
        return f"no approval within {max_transitions} transitions (the bound); the last draft is unapproved"
    return f"{result.stop_reason} in state {result.exit_state}" + (f": {result.error}" if result.error else "")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="local", help="profile or model name (default: the embedded local)")
    parser.add_argument("--base-url", help="an OpenAI-compatible endpoint serving --model")
    args = parser.parse_args()
    main(args.model, base_url=args.base_url)

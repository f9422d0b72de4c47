"""Tools from a Model Context Protocol server: ``LLM(tools=[MCPTools(command=[...])])``.

Runs as written on the embedded model (its llama.cpp server is started by the run; the MCP
server ``examples/mcp/calc_server.py`` is started by the run too, over stdio):

    python examples/mcp_tools.py                          # embedded Qwen2.5-Coder-1.5B
    python examples/mcp_tools.py --model local-small      # the embedded 0.5B model
    python examples/mcp_tools.py --model openai:gpt-4o-mini   # needs OPENAI_API_KEY

Needs the ``mcp`` extra (``pip install 'stateflow[mcp]'``; ``scripts/setup.sh`` installs it).
The server's tools reach the model with the schemas the server declared (OpenAI ``tools`` where
the profile has function calling, the text protocol elsewhere); each call goes to the server
through AG2's ``autogen.mcp`` client and is traced like any tool call. A server that dies or
stops answering gives the model a tool error (after ``call_timeout_s``), never a hang.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from stateflow import LLM, Flow, MCPTools, ModelAssignment, ModelProfile, Prompt, RunResult, State, Transition, run

SERVER = Path(__file__).with_name("mcp") / "calc_server.py"


def build(call_timeout_s: float = 30.0) -> Flow:
    shop = MCPTools(command=[sys.executable, str(SERVER)], name="shop", call_timeout_s=call_timeout_s)
    answer = State(
        "Answer",
        Prompt("Answer the question. Use the tools for prices and arithmetic; never guess a price."),
        LLM(tools=(shop,), max_tool_rounds=4),
    )
    done = State("Done", final=True)
    return Flow("mcp-shop", initial=answer, transitions=[Transition(answer, done)])


def profile_for(model: str, base_url: str | None = None) -> ModelProfile:
    if base_url is not None:
        return ModelProfile(name="assistant", model=model, base_url=base_url, api_key_env=None)
    return ModelAssignment.of(model).profile_for("Answer")


def main(model: str = "local", *, base_url: str | None = None, max_tokens: int | None = None) -> RunResult:
    profile = profile_for(model, base_url)
    if max_tokens is not None:
        profile = profile.with_overrides(max_tokens=max_tokens)
    result = run(build(), "What does one kettle cost?", models=profile)
    for m in result.history:
        print(f"[{m.kind.value}] {m.name}: {m.content}")
    return result


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="local", help="profile or model name (default: the embedded local)")
    parser.add_argument("--base-url", help="an OpenAI-compatible endpoint serving --model")
    args = parser.parse_args()
    main(args.model, base_url=args.base_url)

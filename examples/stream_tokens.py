"""Watch a run: states, transitions and the model's tokens as they come (``stateflow.live.stream``).

Runs as written on the embedded model (its llama.cpp server is started by the run):

    python examples/stream_tokens.py                        # embedded Qwen2.5-Coder-1.5B
    python examples/stream_tokens.py --model local-small    # the embedded 0.5B model
    python examples/stream_tokens.py --base-url http://127.0.0.1:8000/v1 --model my-model

``stream(flow, task, ...)`` takes the arguments of ``run`` and yields typed events
(``stateflow.events``); the last one, ``RunFinished``, carries the ``RunResult``. Every
OpenAI-compatible endpoint streams (server-sent events), the embedded server included, with or
without a grammar. The same events reach telemetry and the report: a ``StepRecorded`` event
carries the very ``Step`` the result keeps. Tested against the fake server in
tests/interop/test_examples.py.
"""

from __future__ import annotations

import argparse
import sys

from stateflow import LLM, Flow, ModelProfile, Prompt, RunResult, State, Transition
from stateflow.events import RunFinished, StateEntered, TokenDelta, TransitionTaken
from stateflow.live import stream


def build() -> Flow:
    draft = State("Draft", Prompt("Write one sentence answering the task."), LLM())
    shorten = State("Shorten", Prompt("Rewrite your sentence in at most eight words."), LLM())
    done = State("Done", final=True)
    return Flow("draft-shorten", initial=draft, transitions=[Transition(draft, shorten), Transition(shorten, done)])


def main(model: str = "local", base_url: str | None = None, task: str = "Why is the sky blue?") -> RunResult:
    models: str | ModelProfile = model
    if base_url is not None:
        models = ModelProfile(name="streamed", model=model, base_url=base_url, api_key_env=None, max_tokens=96)
    result = None
    for event in stream(build(), task, models=models):
        if isinstance(event, StateEntered):
            print(f"\n== {event.state}", flush=True)
        elif isinstance(event, TokenDelta):
            sys.stdout.write(event.text)  # each piece as the model produces it
            sys.stdout.flush()
        elif isinstance(event, TransitionTaken):
            print(f"\n-> {event.record.target} ({event.record.rule})")
        elif isinstance(event, RunFinished):
            result = event.result
    assert result is not None
    print(f"\nstatus: {result.status}, path: {' -> '.join(result.path)}")
    return result


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="local")
    ap.add_argument("--base-url")
    ap.add_argument("--task", default="Why is the sky blue?")
    args = ap.parse_args()
    main(args.model, args.base_url, args.task)

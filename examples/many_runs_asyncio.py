"""Many runs at once from asyncio: ``await arun(...)`` and ``async for event in astream(...)``.

Runs as written on the embedded model (its server answers one request at a time, so the runs
queue there; against a hosted model they overlap):

    python examples/many_runs_asyncio.py --model local-small --runs 3
    python examples/many_runs_asyncio.py --base-url http://127.0.0.1:8000/v1 --model my-model --runs 50

``arun`` takes ``run``'s arguments and returns its ``RunResult`` without blocking the event loop;
cancelling the awaiting task cancels the run at its next step. ``astream`` is ``stream`` for
``async for``. Tested against the fake server with 200 ms latency in tests/interop/test_examples.py
(``scripts/bench_live.py --part asyncio`` measures 50 runs).
"""

from __future__ import annotations

import argparse
import asyncio
import time

from stateflow import LLM, Flow, ModelProfile, Prompt, RunResult, State, Transition
from stateflow.backends.http import HttpClients
from stateflow.events import TokenDelta
from stateflow.live import arun, astream


def build() -> Flow:
    answer = State("Answer", Prompt("Answer in one short sentence."), LLM())
    done = State("Done", final=True)
    return Flow("one-answer", initial=answer, transitions=[Transition(answer, done)])


async def run_all(models: str | ModelProfile, questions: list[str]) -> list[RunResult]:
    flow = build()
    with HttpClients() as http:  # shared by every run: connections, the model client, prepared agents
        # the first run is watched token by token, the others are awaited together
        async for event in astream(flow, questions[0], models=models, http=http):
            if isinstance(event, TokenDelta):
                print(event.text, end="", flush=True)
        print()
        return await asyncio.gather(*[arun(flow, q, models=models, http=http) for q in questions[1:]])


def main(model: str = "local", base_url: str | None = None, runs: int = 3) -> list[RunResult]:
    models: str | ModelProfile = model
    if base_url is not None:
        models = ModelProfile(name="many", model=model, base_url=base_url, api_key_env=None, max_tokens=64)
    questions = [f"What is {i} + {i}?" for i in range(runs + 1)]
    t0 = time.perf_counter()
    results = asyncio.run(run_all(models, questions))
    print(f"{len(results)} concurrent runs in {time.perf_counter() - t0:.2f} s")
    for q, r in zip(questions[1:], results, strict=True):
        print(f"{q} -> {r.history.last().content if r.history.last() else ''}")
    return results


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="local")
    ap.add_argument("--base-url")
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    main(args.model, args.base_url, args.runs)

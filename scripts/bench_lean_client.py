#!/usr/bin/env python
"""CPU per model call: AutoGen's OpenAI client (UsageKeepingClient) vs LeanChatClient (issue #44).

Usage::

    .venv/bin/python scripts/bench_lean_client.py [--calls 300] [--reps 5]

Both clients sit in an ``OpenAIWrapper`` on one shared ``httpx.Client`` and call the fake OpenAI
server (no latency, in this process's threads) ``--calls`` times; the two are interleaved
``--reps`` times in the same process and the process CPU per call is reported (median over reps),
with the ratio lean/openai and the load average. The fake server's own CPU is counted in both.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import httpx
from autogen import OpenAIWrapper
from openai import OpenAI

from stateflow.backends.lean_openai import LeanChatClient
from stateflow.backends.stream_usage import UsageKeepingClient
from stateflow.testing.fake_openai import FakeOpenAIServer


def _wrappers(url: str, http: httpx.Client) -> dict[str, OpenAIWrapper]:
    entry = {"model": "m", "api_key": "sk-x", "base_url": url, "max_retries": 2, "price": [0.0, 0.0]}
    openai_w = OpenAIWrapper(config_list=[{**entry, "model_client_cls": "UsageKeepingClient"}], cache_seed=None)
    oa = OpenAI(base_url=url, api_key="sk-x", max_retries=2, http_client=http)
    openai_w.register_model_client(UsageKeepingClient, openai_client=oa)
    lean_w = OpenAIWrapper(config_list=[{**entry, "model_client_cls": "LeanChatClient"}], cache_seed=None)
    lean_w.register_model_client(LeanChatClient, http_client=http)
    return {"openai": openai_w, "lean": lean_w}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=300)
    ap.add_argument("--reps", type=int, default=5)
    args = ap.parse_args()
    msgs = [{"role": "system", "content": "You write SQL."}, {"role": "user", "content": "Count the rows of t."}]
    cpu: dict[str, list[float]] = {"openai": [], "lean": []}
    with FakeOpenAIServer(lambda *a: "SELECT COUNT(*) FROM t") as srv, httpx.Client() as http:
        ws = _wrappers(srv.url, http)
        for w in ws.values():
            w.create(messages=msgs)  # warm-up
        for _ in range(args.reps):
            for name, w in ws.items():
                t0 = time.process_time()
                for _ in range(args.calls):
                    w.create(messages=msgs)
                cpu[name].append((time.process_time() - t0) / args.calls * 1000)
    med = {k: statistics.median(v) for k, v in cpu.items()}
    print(f"CPU per call (ms, median of {args.reps}x{args.calls}): openai {med['openai']:.2f}, lean {med['lean']:.2f}")
    print(f"ratio lean/openai {med['lean'] / med['openai']:.2f}; load average {os.getloadavg()}")


if __name__ == "__main__":
    main()

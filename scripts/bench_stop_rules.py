#!/usr/bin/env python
"""Benchmark the local server's stop rules: degenerate runs and clients that gave up.

Usage::

    taskset -c 0 .venv/bin/python scripts/bench_stop_rules.py [--model local-small|local] [--json FILE]

Two servers of the same model run side by side in this process's pool of children, one with the
rules on (the default, ``degenerate_run_chars=48``) and one with them off (``0``); each request
goes to both, alternating which goes first, so both see the same machine load. It prints:

1. **degenerate replies**: prompts whose greedy continuation is a run (``LIMIT 1000...``, a list
   of one repeated value); per prompt the completion tokens and seconds with and without the
   rule, and the ratio off/on (max_tokens 384, the built-in profiles' value);
2. **a client that gives up**: a request that would decode 600 tokens, abandoned after 2 s (as
   an HTTP timeout does), then a short request; the short one's wait with and without the
   cancel (without it, it queues behind the abandoned generation).

Real model, real HTTP; nothing is asserted (tests/backends/local/test_server.py checks the
behaviour). Numbers on a busy 2-core machine vary; the ratios much less.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import time
import urllib.request
from typing import Any

from stateflow.backends.local import CATALOG, ManagedServer, ModelStore, ServerConfig, runtime_available

PROMPTS = {
    "limit run": "SELECT name FROM singer ORDER BY age LIMIT 1000000000000",
    "repeated value": "SELECT * FROM t WHERE id IN (1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,",
    "dashes": "-- results\n-----------------------------------",
    "same line": "SELECT name FROM t;\nSELECT name FROM t;\nSELECT name FROM t;\n",
}
MAX_TOKENS = 384


def _post(url: str, body: dict[str, Any], timeout: float) -> dict[str, Any]:
    request = urllib.request.Request(url, json.dumps(body).encode(), {"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=timeout) as resp:
        return json.loads(resp.read())


def _complete(base: str, prompt: str, max_tokens: int, timeout: float = 600.0) -> tuple[int, float, str | None, str]:
    started = time.perf_counter()
    body = {"prompt": prompt, "max_tokens": max_tokens, "temperature": 0.0}
    answer = _post(base + "/v1/completions", body, timeout)
    seconds = time.perf_counter() - started
    text = answer["choices"][0]["text"]
    return answer["usage"]["completion_tokens"], seconds, answer.get("timings", {}).get("stopped_by"), text


def _abandon_then_ask(base: str) -> float:
    """Seconds a short request waits after a long one was abandoned after 2 s."""
    body = {"prompt": "Count from 1 to 1000: 1, 2, 3,", "max_tokens": 600, "temperature": 0.0}
    with contextlib.suppress(OSError):  # the timeout: this client gives up, as an HTTP client's does
        _post(base + "/v1/completions", body, timeout=2.0)
    _, seconds, _, _ = _complete(base, "SELECT", 4)
    return seconds


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="local-small", choices=sorted(CATALOG))
    parser.add_argument("--json", help="also write the numbers to this file")
    args = parser.parse_args(argv)
    missing = runtime_available()  # None when the runtime is there, else the reason
    if missing:
        print(missing, file=sys.stderr)
        return 2
    path = ModelStore().locate(CATALOG[args.model], allow_network=False).path
    servers = {
        rule: ManagedServer(
            ServerConfig(
                model_path=path,
                alias=args.model,
                n_threads=1,
                degenerate_run_chars=48 if on else 0,
                stop_when_client_gone=on,
            )
        )
        for rule, on in (("on", True), ("off", False))
    }
    try:
        bases = {rule: s.ensure_running().removesuffix("/v1") for rule, s in servers.items()}
        results: dict[str, Any] = {"model": args.model, "max_tokens": MAX_TOKENS, "degenerate": {}, "abandoned": {}}
        print(f"{args.model}: degenerate replies (max_tokens {MAX_TOKENS})")
        print(f"{'prompt':16} {'tokens on':>9} {'s on':>7} {'tokens off':>10} {'s off':>7} {'off/on':>7}  stopped by")
        for i, (name, prompt) in enumerate(PROMPTS.items()):
            order = ("on", "off") if i % 2 == 0 else ("off", "on")
            got = {rule: _complete(bases[rule], prompt, MAX_TOKENS) for rule in order}
            (t_on, s_on, why, text), (t_off, s_off, _, _) = got["on"], got["off"]
            results["degenerate"][name] = {"on": [t_on, s_on, why], "off": [t_off, s_off], "reply_on": text}
            ratio = s_off / s_on
            print(f"{name:16} {t_on:9d} {s_on:7.2f} {t_off:10d} {s_off:7.2f} {ratio:6.2f}x  {why}  {text[:40]!r}")
        print("\na client gives up after 2 s on a 600-token request; then a 4-token request waits:")
        for rule in ("on", "off"):
            waited = _abandon_then_ask(bases[rule])
            results["abandoned"][rule] = waited
            print(f"  rules {rule:3}: {waited:6.2f} s")
        print(f"  ratio off/on: {results['abandoned']['off'] / results['abandoned']['on']:.1f}x")
    finally:
        for s in servers.values():
            s.stop()
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(results, f, indent=2)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

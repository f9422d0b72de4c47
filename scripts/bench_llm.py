#!/usr/bin/env python
"""Benchmark the embedded local LLM: server overhead, prompt-cache efficiency, time to first token.

Usage::

    .venv/bin/python scripts/bench_llm.py [--model local-small|local] [--quick] [--json FILE]

Prints, for the chosen model (it must be assembled: scripts/setup_local_llm.sh):

1. **time to first token** from a cold start (new server process, model already in the cache)
   to the first streamed token of a short chat; target < 3 s;
2. **server vs in-process** llama-cpp-python on the same prompts, same settings: prompt tokens/s
   (fresh prompt, 1 output token), decode tokens/s (cached prompt, 48 output tokens) and per-step
   latency (fresh prompt + 48 tokens); ratio server/in-process, target >= 0.9;
3. **evaluated/sent prompt tokens** over a 6-turn agent episode (real model replies), with 1 and
   4 concurrent workers sharing one server, for three prompt layouts: ``history`` (the paper's
   StateFlow: one system message, each state's instruction appended to the history),
   ``per-state-system`` (SF_Agent: flow system message + the state's instruction as the leading
   system message) and ``per-state-trailing`` (the state's instruction as a system message after
   the history), with the prompt-state cache on (the default) and off; target <= 0.3.

All runs alternate or share one process so they see the same machine load; numbers on a busy
2-core machine vary by +-30 %, the ratios much less.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import threading
import time
from typing import Any

from stateflow.backends.local import CATALOG, LocalServerPool, ModelStore, cpu_cores, runtime_available

FLOW_SYSTEM = (
    "You are an expert SQL developer working inside a MySQL shell. You interact with the database "
    "by proposing one action per turn. Valid actions are execute[<SQL query>] and submit. The "
    "observation after each action shows the query result or the error message."
)
STATE_INSTRUCTIONS = {
    "Observe": "State Observe: look at the schema first. Reply with 'Thought: ...' and then one "
    "'Action: execute[...]' that DESCribes or SELECTs a few rows from a table you have not seen yet.",
    "Solve": "State Solve: write the query that answers the question. Reply with 'Thought: ...' "
    "and then one 'Action: execute[<the full SQL query>]'.",
    "Verify": "State Verify: check that the last result really answers the question (columns, "
    "filters, ordering). Reply with 'Thought: ...' and then 'Action: submit' if it is right, "
    "else 'Action: execute[<a corrected query>]'.",
}
EPISODE_STATES = ["Observe", "Solve", "Verify", "Solve", "Verify", "Solve"]


def _task(worker: int) -> str:
    tables = [
        ("singer", "singer_id INT, name TEXT, country TEXT, age INT, is_male TEXT"),
        ("concert", "concert_id INT, concert_name TEXT, theme TEXT, stadium_id INT, year INT"),
        ("stadium", "stadium_id INT, location TEXT, name TEXT, capacity INT, highest INT, average INT"),
        ("employee", "employee_id INT, name TEXT, age INT, city TEXT, hire_year INT"),
    ]
    questions = [
        "What is the average age of singers from France?",
        "How many concerts were held in 2014 or 2015?",
        "Which stadium has the largest capacity? Give its name and location.",
        "List the names of employees older than 30 living in Bristol, ordered by age.",
    ]
    schema = "; ".join(f"{t}({cols})" for t, cols in tables)
    return f"Question {worker}: {questions[worker % len(questions)]}\nTables: {schema}"


def _observation(turn: int, worker: int) -> str:
    rows = ", ".join(f"({worker}, 'row{turn}-{i}', {20 + 3 * i})" for i in range(6))
    return f"Observation: {rows}"


LAYOUTS = ("history", "per-state-system", "per-state-trailing")


def _messages(layout: str, state: str, history: list[dict[str, str]]) -> list[dict[str, str]]:
    instruction = STATE_INSTRUCTIONS[state]
    if layout == "history":  # the paper's view: instruction appended to the shared history
        return [{"role": "system", "content": FLOW_SYSTEM}, *history, {"role": "user", "content": instruction}]
    if layout == "per-state-system":  # SF_Agent: private instruction in the leading system message
        return [{"role": "system", "content": FLOW_SYSTEM + "\n\n" + instruction}, *history]
    # private instruction as a trailing system message: the history stays a shared prefix
    return [{"role": "system", "content": FLOW_SYSTEM}, *history, {"role": "system", "content": instruction}]


def _episode(client: Any, alias: str, layout: str, worker: int, max_tokens: int, sink: list[tuple[int, int]]) -> None:
    history: list[dict[str, str]] = [{"role": "user", "content": _task(worker)}]
    for turn, state in enumerate(EPISODE_STATES):
        messages = _messages(layout, state, history)
        resp = client.chat.completions.create(model=alias, messages=messages, temperature=0.0, max_tokens=max_tokens)
        u = resp.usage
        cached = u.prompt_tokens_details.cached_tokens if u.prompt_tokens_details else 0
        sink.append((u.prompt_tokens, u.prompt_tokens - (cached or 0)))
        if layout == "history":
            # The paper's view keeps each state's instruction in the shared history.
            history.append({"role": "user", "content": STATE_INSTRUCTIONS[state]})
        history.append({"role": "assistant", "content": resp.choices[0].message.content or ""})
        history.append({"role": "user", "content": _observation(turn, worker)})


def bench_episodes(model: str, quick: bool) -> list[dict[str, Any]]:
    from openai import OpenAI

    rows = []
    for cache_on in (True,) if quick else (True, False):
        pool = LocalServerPool(allow_network=False, cache_bytes=(1 << 30) if cache_on else 0)
        try:
            url = pool.endpoint(model)
            alias = CATALOG[model].alias
            client = OpenAI(base_url=url, api_key="not-needed", max_retries=0, timeout=600)
            for layout in LAYOUTS:
                for workers in (1, 4):
                    sink: list[tuple[int, int]] = []
                    t0 = time.perf_counter()
                    threads = [
                        threading.Thread(target=_episode, args=(client, alias, layout, w, 32, sink))
                        for w in range(workers)
                    ]
                    for t in threads:
                        t.start()
                    for t in threads:
                        t.join()
                    sent = sum(s for s, _ in sink)
                    evaluated = sum(e for _, e in sink)
                    row = {
                        "prompt_cache": "on" if cache_on else "off",
                        "layout": layout,
                        "workers": workers,
                        "requests": len(sink),
                        "sent": sent,
                        "evaluated": evaluated,
                        "ratio": evaluated / sent if sent else float("nan"),
                        "seconds": time.perf_counter() - t0,
                    }
                    rows.append(row)
                    print(
                        f"  cache {row['prompt_cache']:3}  {layout:16}  workers {workers}: "
                        f"evaluated/sent = {evaluated}/{sent} = {row['ratio']:.3f}  ({row['seconds']:.1f} s)",
                        flush=True,
                    )
        finally:
            pool.close()
    return rows


def bench_ttft(model: str, repeats: int) -> list[dict[str, float]]:
    from openai import OpenAI

    OpenAI(base_url="http://127.0.0.1:9/v1", api_key="x")  # import/initialise the client outside the timing
    out = []
    for _ in range(repeats):
        pool = LocalServerPool(allow_network=False)
        try:
            t0 = time.perf_counter()
            url = pool.endpoint(model)
            t_ready = time.perf_counter()
            client = OpenAI(base_url=url, api_key="not-needed", max_retries=0)
            stream = client.chat.completions.create(
                model=CATALOG[model].alias,
                messages=[{"role": "user", "content": "Write a SQL query that counts the rows of table singer."}],
                temperature=0.0,
                max_tokens=16,
                stream=True,
            )
            t_first = None
            for chunk in stream:
                if chunk.choices and chunk.choices[0].delta.content:
                    t_first = time.perf_counter()
                    break
            stream.close()
            out.append({"server_start": t_ready - t0, "ttft": (t_first or time.perf_counter()) - t0})
            print(f"  server start {out[-1]['server_start']:.2f} s, first token {out[-1]['ttft']:.2f} s", flush=True)
        finally:
            pool.close()
    return out


def _prompt(i: int) -> list[dict[str, str]]:
    # A distinct first line per prompt: no KV prefix is shared beyond the template's few tokens.
    body = " ".join(f"Table t{j}(id INT, name TEXT, value{j} REAL, created DATE)." for j in range(18))
    return [
        {"role": "system", "content": f"Session {i * 7919}. You write SQL for analysts."},
        {"role": "user", "content": f"{body}\nWrite thirty different SELECT queries over these tables, one per line."},
    ]


def bench_overhead(model: str, n_prompts: int) -> dict[str, Any]:
    import llama_cpp
    from openai import OpenAI

    path = ModelStore().locate(CATALOG[model], allow_network=False).path
    pool = LocalServerPool(allow_network=False)
    url = pool.endpoint(model)
    client = OpenAI(base_url=url, api_key="not-needed", max_retries=0, timeout=600)
    alias = CATALOG[model].alias
    local = llama_cpp.Llama(
        model_path=str(path),
        n_ctx=8192,
        n_batch=512,
        n_threads=cpu_cores(),
        n_threads_batch=cpu_cores(),
        logits_all=False,
        verbose=False,
    )

    def via_server(messages: list[dict[str, str]], max_tokens: int) -> tuple[float, int, int]:
        t = time.perf_counter()
        r = client.chat.completions.create(model=alias, messages=messages, temperature=0.0, max_tokens=max_tokens)
        return time.perf_counter() - t, r.usage.prompt_tokens, r.usage.completion_tokens

    def in_process(messages: list[dict[str, str]], max_tokens: int) -> tuple[float, int, int]:
        t = time.perf_counter()
        r = local.create_chat_completion(messages=messages, temperature=0.0, max_tokens=max_tokens)
        return time.perf_counter() - t, r["usage"]["prompt_tokens"], r["usage"]["completion_tokens"]

    results: dict[str, dict[str, list[float]]] = {
        m: {"prompt_tps": [], "decode_tps": [], "step_s": []} for m in ("server", "in-process")
    }
    try:
        via_server(_prompt(10_000), 4)  # warm both paths (first decode allocates buffers)
        in_process(_prompt(10_001), 4)
        for i in range(n_prompts):
            order = [("server", via_server), ("in-process", in_process)]
            if i % 2:
                order.reverse()
            for name, call in order:
                t, p, _ = call(_prompt(2 * i + (name == "server") * 1000), 1)
                results[name]["prompt_tps"].append(p / t)
                t, _, c = call(_prompt(2 * i + (name == "server") * 1000), 48)  # prompt cached: ~pure decode
                results[name]["decode_tps"].append(c / t)
                t, _, _ = call(_prompt(2 * i + 1 + (name == "server") * 1000), 48)
                results[name]["step_s"].append(t)
            srv, loc = results["server"], results["in-process"]
            print(
                f"  prompt {i}: server {srv['prompt_tps'][-1]:.0f} / in-process {loc['prompt_tps'][-1]:.0f} "
                f"prompt tok/s; decode {srv['decode_tps'][-1]:.1f} / {loc['decode_tps'][-1]:.1f} tok/s; "
                f"step {srv['step_s'][-1]:.2f} / {loc['step_s'][-1]:.2f} s",
                flush=True,
            )
    finally:
        pool.close()
        local.close()
    med = {m: {k: statistics.median(v) for k, v in d.items()} for m, d in results.items()}
    return {
        **med,
        "ratio": {
            "prompt_tps": med["server"]["prompt_tps"] / med["in-process"]["prompt_tps"],
            "decode_tps": med["server"]["decode_tps"] / med["in-process"]["decode_tps"],
            "step_speed": med["in-process"]["step_s"] / med["server"]["step_s"],
        },
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="local-small", choices=sorted(CATALOG))
    parser.add_argument("--quick", action="store_true", help="fewer repetitions, prompt cache on only")
    parser.add_argument("--json", help="also write the results to this file")
    parser.add_argument(
        "--only", choices=("ttft", "overhead", "episodes"), action="append", help="run only these sections"
    )
    args = parser.parse_args()
    missing = runtime_available()
    if missing or not ModelStore().status(CATALOG[args.model]).present:
        print(f"needs the runtime and the {args.model} model: run scripts/setup_local_llm.sh", file=sys.stderr)
        return 2
    print(f"model {args.model} ({CATALOG[args.model].display_name}), {cpu_cores()} threads")
    only = set(args.only or ("ttft", "overhead", "episodes"))
    summary: dict[str, Any] = {"model": args.model}
    if "ttft" in only:
        print("1. time to first token (cold server start, model assembled)")
        ttft = bench_ttft(args.model, 1 if args.quick else 3)
        summary["ttft_s"] = statistics.median(x["ttft"] for x in ttft)
        summary["server_start_s"] = statistics.median(x["server_start"] for x in ttft)
        print(f"  => TTFT {summary['ttft_s']:.2f} s (server start {summary['server_start_s']:.2f} s; target < 3 s)")
    if "overhead" in only:
        print("2. server vs in-process llama-cpp-python (same prompts and settings)")
        summary["overhead"] = overhead = bench_overhead(args.model, 2 if args.quick else 4)
        r = overhead["ratio"]
        print(
            f"  => ratio server/in-process: prompt {r['prompt_tps']:.2f}, decode {r['decode_tps']:.2f}, "
            f"step speed {r['step_speed']:.2f} (target >= 0.9)"
        )
    if "episodes" in only:
        print("3. evaluated/sent prompt tokens over a 6-turn episode (target <= 0.3)")
        summary["episodes"] = bench_episodes(args.model, args.quick)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump(summary, fh, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python
"""Benchmark a local SQL agent episode: the framework against a minimal in-process loop.

Usage::

    taskset -c 0 .venv/bin/python scripts/bench_agent.py [--model local|local-small] [--tasks N]
        [--quick] [--json FILE] [--no-grammar] [--no-minimal-cache] [--lookup-episodes N]

What it runs: the demo's flow (method ``sf_agent_schema`` of ``intercode-sql``, the response
grammar on, as ``stateflow run`` does for the embedded model) on the first N tasks of the fixed
Spider ``dev`` sample (:mod:`stateflow.tasks.kit.samples`; default 4, ``--quick`` 1), embedded MariaDB.

(a) **framework**: each episode through :func:`stateflow.tasks.harness.episode.run_episode` with the
    runner's :class:`EpisodeSpec` (AutoGen, HTTP to the managed llama.cpp server with its
    prompt-state cache). The model server is started the way the runner starts it, before the
    first episode. Every HTTP request is recorded (body, round-trip time, the server's own
    ``timings`` of the request) and every environment step is timed.
(b) **minimal**: right after each framework episode, the same model loaded in this process with
    the server's settings (:func:`server_app.load_model`, with the server's prompt-state cache so
    both evaluate the same tokens; ``--no-minimal-cache``: a naive loop keeping only the live KV
    prefix) replays every recorded request: the exact messages, and the request
    parsed by the server's own request type, so sampling (temperature, repeat penalty, top-k...),
    max_tokens, stop, seed and grammar are identical. A minimal episode costs the sum of its calls
    plus the same environment steps.

Then, on the same replayed prompts: decode tokens/s without the grammar, and with prompt-lookup
decoding (``LlamaPromptLookupDecoding`` as the llama's draft model), with and without grammar.

Prints per-call and per-episode ratios framework / minimal (target <= 1.15) and where the
framework's time goes: server start (before the episodes), AutoGen + OpenAI client, HTTP +
server app, the model (prompt evaluation, decoding, sampling = grammar, prompt-cache
save/restore, template/tokenizer), environment, and the rest (group chat, flow, scoring). All
variants run interleaved per episode in one process, so they see the same machine load.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from stateflow.tasks.harness.registry import default_registry

from stateflow import ModelAssignment
from stateflow.backends.http import HttpClients
from stateflow.backends.local import CATALOG, ModelStore, ServerConfig, cpu_cores, default_pool, runtime_available
from stateflow.profiles import BUILTIN_PROFILES

METHOD = "sf_agent_schema"
BENCHMARK = "intercode-sql"
DATASET = "spider"

# -- recording the framework's traffic ----------------------------------------------------------


@dataclass
class CallRecord:
    """One model request the framework made, as it went over HTTP."""

    body: dict[str, Any]
    http_s: float
    response: dict[str, Any]

    @property
    def server(self) -> dict[str, float]:
        return self.response.get("timings") or {}

    @property
    def text(self) -> str:
        return self.response["choices"][0]["message"].get("content") or ""

    @property
    def completion_tokens(self) -> int:
        return int(self.response["usage"]["completion_tokens"])

    @property
    def evaluated(self) -> int:
        u = self.response["usage"]
        return int(u["prompt_tokens"]) - int((u.get("prompt_tokens_details") or {}).get("cached_tokens") or 0)


class _RecordingTransport(httpx.BaseTransport):
    """Passes every request to the real transport and keeps chat-completion exchanges."""

    def __init__(self, sink: list[CallRecord]):
        self._inner = httpx.HTTPTransport()
        self._sink = sink

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        t0 = time.perf_counter()
        response = self._inner.handle_request(request)
        if not request.url.path.endswith("/chat/completions"):
            return response
        content = response.read()
        elapsed = time.perf_counter() - t0
        self._sink.append(CallRecord(json.loads(request.content), elapsed, json.loads(content)))
        return httpx.Response(response.status_code, headers=response.headers, content=content, request=request)

    def close(self) -> None:
        self._inner.close()


class RecordingHttpClients(HttpClients):
    """The runner's shared HTTP pools, with every chat request recorded in ``calls``."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[CallRecord] = []

    def get(self, base_url: str | None, timeout: float) -> httpx.Client:
        key = base_url or "https://api.openai.com/v1"
        with self._lock:
            client = self._clients.get(key)
            if client is None:
                client = httpx.Client(
                    timeout=httpx.Timeout(timeout), transport=_RecordingTransport(self.calls), follow_redirects=True
                )
                self._clients[key] = client
            return client


class TimedEnv:
    """The episode's environment with every ``step`` timed (tools and scoring call it)."""

    def __init__(self, env: Any):
        self._env = env
        self.step_s: list[float] = []

    def step(self, action: str) -> Any:
        t0 = time.perf_counter()
        try:
            return self._env.step(action)
        finally:
            self.step_s.append(time.perf_counter() - t0)

    def reset(self, index: int) -> Any:
        t0 = time.perf_counter()
        try:
            return self._env.reset(index)
        finally:
            self.step_s.append(time.perf_counter() - t0)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._env, name)

    def __len__(self) -> int:
        return len(self._env)


# -- the minimal loop -------------------------------------------------------------------------


def replay_kwargs(body: dict[str, Any], *, grammar: bool = True) -> dict[str, Any]:
    """``create_chat_completion`` arguments for a recorded request, exactly as the server builds
    them (its request type supplies the same defaults; see llama_cpp.server.app)."""
    import llama_cpp
    from llama_cpp.server.types import CreateChatCompletionRequest

    request = CreateChatCompletionRequest(**body)
    kwargs = request.model_dump(exclude={"n", "logit_bias_type", "user", "min_tokens"})
    if request.grammar is not None and grammar:
        kwargs["grammar"] = llama_cpp.LlamaGrammar.from_string(request.grammar)
    else:
        kwargs.pop("grammar", None)
    return kwargs


@dataclass
class Replayed:
    seconds: float
    completion_tokens: int
    evaluated: int
    text: str
    timings: dict[str, float]


def replay(llama: Any, body: dict[str, Any], *, grammar: bool = True) -> Replayed:
    kwargs = replay_kwargs(body, grammar=grammar)
    t0 = time.perf_counter()
    r = llama.create_chat_completion(**kwargs)
    seconds = time.perf_counter() - t0
    u = r["usage"]
    return Replayed(
        seconds,
        int(u["completion_tokens"]),
        int(u["prompt_tokens"]) - int(u["prompt_tokens_details"]["cached_tokens"]),
        r["choices"][0]["message"].get("content") or "",
        r.get("timings") or {},
    )


def gen_seconds(t: dict[str, float]) -> float:
    """Generation time of one request: everything but prompt evaluation and cache transfers."""
    return t.get("total_s", 0.0) - t.get("prompt_eval_s", 0.0) - t.get("cache_load_s", 0.0) - t.get("cache_save_s", 0.0)


def tok_per_s(tokens: int, seconds: float) -> float:
    return tokens / seconds if seconds > 0 else float("nan")


# -- one episode, both ways -------------------------------------------------------------------


@dataclass
class EpisodeNumbers:
    task: int
    success: bool
    wall_s: float
    calls: list[CallRecord]
    llm_latency_s: float  # the episode's model calls as the framework timed them (around AutoGen)
    env_s: float
    minimal: list[Replayed]
    no_grammar: list[Replayed] = field(default_factory=list)
    stock_grammar: list[Replayed] = field(default_factory=list)
    lookup: list[Replayed] = field(default_factory=list)
    lookup_no_grammar: list[Replayed] = field(default_factory=list)

    @property
    def minimal_s(self) -> float:
        return sum(r.seconds for r in self.minimal) + self.env_s

    def breakdown(self) -> dict[str, float]:
        """Where the framework episode's wall time went (seconds)."""
        model = sum(c.server.get("total_s", 0.0) for c in self.calls)
        http = sum(c.http_s for c in self.calls)
        steps = self.llm_latency_s
        parts = {
            "model: prompt eval": sum(c.server.get("prompt_eval_s", 0.0) for c in self.calls),
            "model: decode eval": sum(c.server.get("decode_eval_s", 0.0) for c in self.calls),
            "model: sampling (grammar)": sum(c.server.get("sample_s", 0.0) for c in self.calls),
            "model: prompt-cache save/restore": sum(
                c.server.get("cache_save_s", 0.0) + c.server.get("cache_load_s", 0.0) for c in self.calls
            ),
        }
        parts["model: template/tokenizer/other"] = model - sum(parts.values())
        parts["HTTP + server app"] = http - model
        parts["AutoGen + OpenAI client"] = steps - http
        parts["environment"] = self.env_s
        parts["group chat, flow, scoring, record"] = self.wall_s - steps - self.env_s
        return parts


def run_framework_episode(env: TimedEnv, index: int, spec: Any, http: RecordingHttpClients) -> EpisodeNumbers:
    from stateflow.tasks.harness.episode import run_episode

    first_call, env.step_s = len(http.calls), []
    record = run_episode(env, index, spec)
    if record.status != "ok":
        print(f"  task {index}: episode {record.status}: {record.error}", file=sys.stderr)
    calls = http.calls[first_call:]
    if record.llm_calls != len(calls):
        raise RuntimeError(f"task {index}: the record counts {record.llm_calls} model calls, HTTP saw {len(calls)}")
    latency = sum(float(u["latency_s"]) for u in record.usage_by_model.values())
    return EpisodeNumbers(index, record.success, record.wall_s, calls, latency, sum(env.step_s), [])


# -- report -----------------------------------------------------------------------------------


def _median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def summarize(episodes: list[EpisodeNumbers], server_start_s: float) -> dict[str, Any]:
    calls = [c for e in episodes for c in e.calls]
    minimal = [r for e in episodes for r in e.minimal]
    per_call = [c.http_s / r.seconds for c, r in zip(calls, minimal, strict=True)]
    breakdown: dict[str, float] = {}
    for e in episodes:
        for k, v in e.breakdown().items():
            breakdown[k] = breakdown.get(k, 0.0) + v

    def rate(items: list[Replayed]) -> float:
        return tok_per_s(sum(r.completion_tokens for r in items), sum(gen_seconds(r.timings) for r in items))

    framework_gen = tok_per_s(sum(c.completion_tokens for c in calls), sum(gen_seconds(c.server) for c in calls))
    out: dict[str, Any] = {
        "episodes": len(episodes),
        "calls": len(calls),
        "solved": sum(e.success for e in episodes),
        "server_start_s": server_start_s,
        "framework_episode_s": sum(e.wall_s for e in episodes),
        "minimal_episode_s": sum(e.minimal_s for e in episodes),
        "episode_ratio": sum(e.wall_s for e in episodes) / sum(e.minimal_s for e in episodes),
        "episode_ratios": [e.wall_s / e.minimal_s for e in episodes],
        "call_ratio_http_median": _median(per_call),
        "call_ratio_http_total": sum(c.http_s for c in calls) / sum(r.seconds for r in minimal),
        "call_ratio_framework_total": sum(e.llm_latency_s for e in episodes) / sum(r.seconds for r in minimal),
        "identical_replies": sum(c.text == r.text for c, r in zip(calls, minimal, strict=True)),
        "evaluated_prompt_tokens": {
            "framework": sum(c.evaluated for c in calls),
            "minimal": sum(r.evaluated for r in minimal),
        },
        "completion_tokens": sum(c.completion_tokens for c in calls),
        "decode_tok_s": {
            "framework (as the flow ran)": framework_gen,
            "minimal (grammar)": rate(minimal),
            "minimal (no grammar)": rate([r for e in episodes for r in e.no_grammar]),
            "minimal (grammar in llama.cpp's chain, before)": rate([r for e in episodes for r in e.stock_grammar]),
            "prompt lookup (grammar)": rate([r for e in episodes for r in e.lookup]),
            "prompt lookup (no grammar)": rate([r for e in episodes for r in e.lookup_no_grammar]),
        },
        "sample_ms_per_token": {
            "grammar": 1000
            * sum(r.timings.get("sample_s", 0.0) for r in minimal)
            / max(1, sum(r.completion_tokens for r in minimal)),
            "grammar in llama.cpp's chain (before)": 1000
            * sum(r.timings.get("sample_s", 0.0) for e in episodes for r in e.stock_grammar)
            / max(1, sum(r.completion_tokens for e in episodes for r in e.stock_grammar)),
            "no grammar": 1000
            * sum(r.timings.get("sample_s", 0.0) for e in episodes for r in e.no_grammar)
            / max(1, sum(r.completion_tokens for e in episodes for r in e.no_grammar)),
        },
        "lookup_identical_replies": sum(
            a.text == b.text for e in episodes for a, b in zip(e.minimal, e.lookup, strict=False)
        ),
        "lookup_calls": sum(len(e.lookup) for e in episodes),
        "stock_identical_replies": sum(
            a.text == b.text for e in episodes for a, b in zip(e.minimal, e.stock_grammar, strict=True)
        ),
        "stock_differing_replies": [
            {"task": e.task, "call": i, "checked_after": a.text, "in_chain": b.text}
            for e in episodes
            for i, (a, b) in enumerate(zip(e.minimal, e.stock_grammar, strict=True))
            if a.text != b.text
        ],
        "breakdown_s": breakdown,
    }
    return out


def print_summary(s: dict[str, Any]) -> None:
    print(f"\n== {s['episodes']} episode(s), {s['calls']} model calls, {s['solved']} solved")
    print(f"server start + model load (before the first episode): {s['server_start_s']:.2f} s")
    print(
        f"per episode: framework {s['framework_episode_s']:.1f} s / minimal {s['minimal_episode_s']:.1f} s "
        f"= {s['episode_ratio']:.3f}x (each: {', '.join(f'{r:.2f}' for r in s['episode_ratios'])}; target <= 1.15)"
    )
    print(
        f"per call (HTTP round trip / in-process): median {s['call_ratio_http_median']:.3f}x, "
        f"total {s['call_ratio_http_total']:.3f}x; as the framework times them (AutoGen included): "
        f"total {s['call_ratio_framework_total']:.3f}x"
    )
    ev = s["evaluated_prompt_tokens"]
    print(
        f"evaluated prompt tokens: framework {ev['framework']} / minimal {ev['minimal']}; "
        f"completion tokens {s['completion_tokens']}; identical replies {s['identical_replies']}/{s['calls']}"
    )
    print("decode tok/s (completion tokens / generation time):")
    for k, v in s["decode_tok_s"].items():
        print(f"  {k:48} {v:6.2f}")
    print("sampling ms per token: " + ", ".join(f"{k} {v:.2f}" for k, v in s["sample_ms_per_token"].items()))
    print(
        f"identical replies: grammar checked after sampling vs in the chain {s['stock_identical_replies']}/"
        f"{s['calls']}; prompt lookup vs plain {s['lookup_identical_replies']}/{s['lookup_calls']}"
    )
    print("where the framework's episode time goes:")
    total = s["framework_episode_s"]
    for k, v in s["breakdown_s"].items():
        print(f"  {k:36} {v:8.2f} s  {100 * v / total:5.1f} %")


# -- main ---------------------------------------------------------------------------------------


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="local", choices=("local", "local-small"))
    parser.add_argument("--tasks", type=int, default=4, help="first N tasks of the Spider dev sample")
    parser.add_argument("--quick", action="store_true", help="one task")
    parser.add_argument("--json", help="also write the numbers to this file")
    parser.add_argument(
        "--grammar",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="run the flow with its response grammar (what `stateflow run` picks for the embedded model)",
    )
    parser.add_argument(
        "--minimal-cache",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="give the minimal loop the server's prompt-state cache (same evaluated tokens: the ratio is the "
        "framework's overhead); without it, a naive loop keeping only the live KV prefix",
    )
    parser.add_argument(
        "--lookup-episodes", type=int, default=1, help="episodes replayed with prompt-lookup decoding (0: none)"
    )
    args = parser.parse_args()
    n_tasks = 1 if args.quick else args.tasks
    missing = runtime_available()
    if missing or not ModelStore().status(CATALOG[args.model]).present:
        print(f"needs the runtime and the {args.model} model: run scripts/setup_local_llm.sh", file=sys.stderr)
        return 2

    from stateflow.tasks.harness.episode import EpisodeSpec
    from stateflow.tasks.harness.executors import ThreadExecutor
    from stateflow.tasks.harness.runner import RunSpec, open_env
    from stateflow.tasks.kit.samples import sample_of

    from stateflow.backends.local.server_app import load_model

    profile = BUILTIN_PROFILES[args.model]
    models = ModelAssignment.of(args.model)
    run_spec = RunSpec(
        default_registry().get(BENCHMARK),
        (METHOD,),
        models=models,
        models_label=args.model,
        out=Path("."),
        dataset=DATASET,
    )
    raw_env = open_env(run_spec)
    env = TimedEnv(raw_env)
    sample = sample_of("dev", DATASET, [raw_env.task(i) for i in range(len(raw_env))])
    indices = sample.indices[:n_tasks]
    print(
        f"model {args.model} ({CATALOG[args.model].display_name}), {cpu_cores()} thread(s); "
        f"{METHOD} (grammar {'on' if args.grammar else 'off'}) on Spider dev-sample tasks {list(indices)}"
    )

    # The runner's way: the executor starts the model servers before the first episode.
    t0 = time.perf_counter()
    executor = ThreadExecutor(1, lambda: raw_env)
    executor.start_models(models)
    server_start_s = time.perf_counter() - t0
    http = RecordingHttpClients()
    spec = EpisodeSpec(
        benchmark=run_spec.bench,
        dataset=DATASET,
        method=METHOD,
        models=models,
        models_label=args.model,
        max_turns=run_spec.max_turns,
        timeout_s=run_spec.task_timeout_s,
        grammar=args.grammar,  # on: what `stateflow run` picks for the embedded model
        http=http,
    )
    path = ModelStore().locate(CATALOG[args.model], allow_network=False).path
    server_settings = ServerConfig(model_path=path, alias=profile.model).child_config(0)
    settings = {**server_settings, "cache_bytes": 0}
    t0 = time.perf_counter()
    minimal = load_model(server_settings if args.minimal_cache else settings)
    lookup = load_model({**settings, "prompt_lookup": 10}) if args.lookup_episodes > 0 else None
    print(f"server start {server_start_s:.2f} s; in-process model load(s) {time.perf_counter() - t0:.2f} s")

    episodes: list[EpisodeNumbers] = []
    try:
        for index in indices:
            e = run_framework_episode(env, index, spec, http)
            e.minimal = [replay(minimal, c.body) for c in e.calls]
            e.no_grammar = [replay(minimal, c.body, grammar=False) for c in e.calls]
            minimal.check_grammar_after_sampling = False
            e.stock_grammar = [replay(minimal, c.body) for c in e.calls]
            minimal.check_grammar_after_sampling = True
            if lookup is not None and len(episodes) < args.lookup_episodes:
                e.lookup = [replay(lookup, c.body) for c in e.calls]
                e.lookup_no_grammar = [replay(lookup, c.body, grammar=False) for c in e.calls]
            episodes.append(e)
            pairs = ", ".join(f"{c.http_s:.1f}/{r.seconds:.1f}" for c, r in zip(e.calls, e.minimal, strict=True))
            print(
                f"  task {index}: {'solved' if e.success else 'failed'}, {len(e.calls)} calls; framework "
                f"{e.wall_s:.1f} s, minimal {e.minimal_s:.1f} s ({e.wall_s / e.minimal_s:.2f}x); "
                f"per call framework/minimal s: {pairs}",
                flush=True,
            )
    finally:
        executor.close()
        http.close()
        default_pool().close()
        raw_env.close()
        minimal.close()
        if lookup is not None:
            lookup.close()
    summary = summarize(episodes, server_start_s)
    summary["model"] = args.model
    summary["tasks"] = list(indices)
    summary["threads"] = cpu_cores()
    summary["minimal_cache"] = args.minimal_cache
    summary["grammar"] = args.grammar
    print_summary(summary)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump(summary, fh, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())

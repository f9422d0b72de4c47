"""The server child process: llama-cpp-python's OpenAI-compatible app with StateFlow's settings.

Run only as ``python -P .../server_app.py --config JSON`` (it imports nothing from ``stateflow``) by
:class:`~stateflow.backends.local.server.ManagedServer` (or ``stateflow llm serve``). It reuses
llama-cpp-python 0.3.36's server (its router, request types, chat template handling and grammar
support) and adds three things around it:

* **prompt-token accounting**: every non-streaming ``/v1/chat/completions`` and ``/v1/completions``
  response's ``usage`` (and a streamed chat reply's last chunk, OpenAI's usage chunk, which the
  library does not send) carries OpenAI's ``prompt_tokens_details.cached_tokens``, the number of prompt
  tokens that were NOT evaluated because their KV state was reused (live KV prefix or prompt-state
  cache); ``GET /stateflow/stats`` gives running totals. The library's own routes would drop that
  field (their response model is a TypedDict without it), so these two paths are served by thin
  routes of ours that call the library's handlers and return the JSON unchanged.
* **a lean prompt-state cache**: llama-cpp-python's ``LlamaRAMCache`` (here with redundant prefix
  entries pruned, :class:`PrefixPruningRAMCache`) keeps the model state after
  every request keyed by its tokens, so a request that extends ANY earlier one (another worker's
  episode, or a state whose system message differs from the last request's) restores that state and
  evaluates only the new suffix. The stock ``save_state`` also copies the host logits buffer
  (``n_batch x n_vocab`` floats: ~300 MB for Qwen's 152k vocabulary, not counted against the
  cache's capacity and useless without ``logits_all``); :class:`AccountingLlama` leaves it out.
* **generation that stops when nothing will read it**: a reply that has turned into a periodic
  run (``LIMIT 10000000...``, ``ababab...`` over :data:`DEFAULT_DEGENERATE_RUN_CHARS` characters)
  stops there instead of decoding up to ``max_tokens`` (a minute per call on one core), and a
  request whose client has gone (it timed out and will retry) stops at the next token instead of
  holding the model for the retry; the response's ``timings`` say which rule stopped it.
* **JSON schemas with their numeric bounds**: a chat request's ``response_format``
  ``{"type": "json_object", "schema": ...}`` is decoded with the grammar of
  ``schema_grammar.py`` (the library's converter plus integer and number bounds; a schema it
  cannot convert is refused with HTTP 400 instead of the library's silent any-JSON grammar).
* **a lifeline**: the parent passes the read end of a pipe; when the parent process dies for any
  reason the pipe reaches EOF and this process exits (``PR_SET_PDEATHSIG`` alone would fire when the
  parent *thread* that spawned us ends, which is wrong for a server shared by worker threads).

The listening socket is created by the parent and inherited (``--fd``), so a port can never be
taken between choosing it and binding it.
"""

# No `from __future__ import annotations`: FastAPI must resolve the route signatures' types.

import argparse
import asyncio
import contextvars
import ctypes
import functools
import json
import os
import re
import signal
import sys
import threading
import time
from typing import Any

import numpy as np

__all__ = [
    "DEFAULT_DEGENERATE_RUN_CHARS",
    "AccountingLlama",
    "PrefixPruningRAMCache",
    "build_app",
    "load_model",
    "main",
    "schema_as_grammar",
]

#: a run of one unit of 1-4 characters repeated over this many characters ends the generation
DEFAULT_DEGENERATE_RUN_CHARS = 48
_RUN_PERIODS = range(1, 5)
#: set by a route while its client is connected; the model thread reads it (contextvars reach
#: the worker thread that runs the model call)
_CLIENT_GONE: contextvars.ContextVar[threading.Event | None] = contextvars.ContextVar("client_gone", default=None)

try:
    # Only llama_cpp here: the web stack (~0.8 s of imports) is imported while the model loads.
    import llama_cpp
    from llama_cpp.llama_speculative import LlamaPromptLookupDecoding
except ImportError as err:  # pragma: no cover - the parent checks before spawning
    raise SystemExit(f"llama-cpp-python is not installed: {err}") from err


def _load_schema_grammar() -> Any:
    """``schema_grammar.py`` beside this file, loaded by its path: this process imports nothing
    from ``stateflow`` (it runs with ``-P``, so its own directory is not on ``sys.path``)."""
    import importlib.util

    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "schema_grammar.py")
    spec = importlib.util.spec_from_file_location("stateflow_server_schema_grammar", path)
    if spec is None or spec.loader is None:  # pragma: no cover - the file ships with this one
        raise SystemExit(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


schema_grammar = _load_schema_grammar()


def schema_as_grammar(body: Any) -> None:
    """Turn a chat request's ``response_format`` ``json_object`` + ``schema`` into its
    ``grammar`` (:func:`schema_grammar.schema_to_gbnf`), in place; other requests are unchanged.

    Raises:
        schema_grammar.SchemaGrammarError: the schema cannot be converted (answered with 400).
    """
    fmt = body.response_format
    if not isinstance(fmt, dict) or fmt.get("type") != "json_object" or "schema" not in fmt:
        return
    body.grammar = schema_grammar.schema_to_gbnf(fmt["schema"])
    # the library would otherwise build its own grammar from response_format, over this one
    body.response_format = None


class ClientGoneError(RuntimeError):
    """The request's client disconnected before the model started on it."""


class InvalidGrammarError(ValueError):
    """A request's GBNF grammar that llama.cpp cannot parse (answered with HTTP 400)."""


def parse_grammar(model: Any, grammar: Any) -> Any:
    """llama.cpp's grammar sampler for ``grammar`` (a pointer the caller owns), or
    :class:`InvalidGrammarError` when llama.cpp cannot parse it.

    Why: ``llama_cpp.LlamaGrammar.from_string`` (0.3.x) only stores the text; the parse happens
    when a sampler is made from it, and on a parse error that returns NULL, which the library
    then puts into the sampler chain as if it were a sampler. Parsing here first turns a
    malformed grammar into a clear client error instead of a crash of the server or an
    unconstrained reply. llama.cpp prints where the parse failed to the server's stderr.
    """
    text, root = grammar._grammar, grammar._root
    sampler = llama_cpp.llama_sampler_init_grammar(model.vocab, text.encode("utf-8"), root.encode("utf-8"))
    if not sampler:
        first = text.strip().splitlines()[0][:120] if text.strip() else "(empty)"
        raise InvalidGrammarError(
            f"invalid grammar: llama.cpp could not parse it (its error is in the server log); "
            f"the grammar starts with: {first}"
        )
    return sampler


def check_grammar(model: Any, grammar: Any) -> None:
    """Raise :class:`InvalidGrammarError` when llama.cpp cannot parse ``grammar`` (see
    :func:`parse_grammar`); for callers that hand the grammar on to the library, which parses it
    again."""
    llama_cpp.llama_sampler_free(parse_grammar(model, grammar))


class AccountingLlama(llama_cpp.Llama):
    """``llama_cpp.Llama`` that reports how many prompt tokens each completion really evaluated,
    and where its time went.

    Every response carries ``timings`` (seconds unless named otherwise): ``total_s`` (the whole
    request in the model, chat template included), ``prompt_eval_s`` (the prompt suffix the KV
    cache did not cover), ``decode_eval_s`` and ``decode_evals`` (model evaluations while
    generating; with prompt-lookup decoding one evaluation checks several drafted tokens),
    ``sample_s`` (choosing tokens: the grammar's work is here), ``cache_load_s`` /
    ``cache_save_s`` (prompt-state cache restore and store). The rest of ``total_s`` is
    templating, tokenizing and detokenizing.

    Requests are served one at a time by the library's lock, so per-request fields are safe.
    """

    def _sf_timings(self) -> dict[str, Any]:
        if not hasattr(self, "_sf_request"):
            self._sf_request: dict[str, Any] = {}
        return self._sf_request

    def _sf_add(self, key: str, seconds: float) -> None:
        timings = self._sf_timings()
        timings[key] = timings.get(key, 0.0) + seconds

    def eval(self, tokens: Any) -> None:
        started = time.perf_counter()
        # The first eval of a request is the prompt suffix that the KV cache did not cover.
        first = getattr(self, "_sf_prompt_evaluated", 0) is None
        if first:
            self._sf_prompt_evaluated = len(tokens)
        super().eval(tokens)
        if first:
            self._sf_add("prompt_eval_s", time.perf_counter() - started)
        else:
            self._sf_add("decode_eval_s", time.perf_counter() - started)
            self._sf_add("decode_evals", 1)

    #: check a grammar after sampling (see :meth:`_sample_then_check`); False puts it in the
    #: sampler chain as the library does (scripts/bench_agent.py compares both)
    check_grammar_after_sampling = True

    def _init_sampler(self, *args: Any, grammar: Any = None, **kwargs: Any) -> Any:
        self._sf_grammar = None
        if not self.check_grammar_after_sampling:
            if grammar is not None:
                check_grammar(self._model, grammar)
            return super()._init_sampler(*args, grammar=grammar, **kwargs)
        # The grammar is kept out of the chain and checked after it (see _sample_then_check);
        # parsed once, before the chain is built, so a bad grammar fails the request early.
        parsed = parse_grammar(self._model, grammar) if grammar is not None else None
        try:
            chain = super()._init_sampler(*args, grammar=None, **kwargs)
        except BaseException:
            if parsed is not None:
                llama_cpp.llama_sampler_free(parsed)
            raise
        if parsed is not None:
            self._sf_grammar = llama_cpp._internals.LlamaSampler()
            llama_cpp.llama_sampler_chain_add(self._sf_grammar.sampler, parsed)  # the chain now owns it
        return chain

    def sample(self, **kwargs: Any) -> Any:
        started = time.perf_counter()
        temporary = self._sampler is None
        if temporary:  # called outside generate(): a sampler for this one token, as the library does
            self._sampler = self._init_sampler(**{k: v for k, v in kwargs.items() if k != "idx"})
        try:
            if getattr(self, "_sf_grammar", None) is not None:
                idx = kwargs.get("idx")
                token = self._sample_then_check(idx - self.n_tokens if idx is not None else -1)
            else:
                token = super().sample(**kwargs)
        finally:
            if temporary:
                self._sampler = None
        self._sf_add("sample_s", time.perf_counter() - started)
        return token

    def _sample_then_check(self, ridx: int) -> int:
        """Sample without the grammar, keep the token if the grammar accepts it, else sample again
        with the grammar applied to the whole vocabulary (llama.cpp's common sampler does this).

        Why: the grammar sampler tests every candidate token against the grammar, and Qwen's
        vocabulary has 152k tokens: that cost ~40 ms per generated token here, more than the
        decoding itself on a 0.5B model, while the model's favourite token is almost always
        allowed. Greedy decoding (temperature 0) gives exactly the same tokens as the grammar
        in the chain; with temperature > 0 a rejected first draw is redrawn from the
        grammar-constrained distribution, as in llama.cpp's own server.
        """
        cpp = llama_cpp
        chain, grammar = self._sampler.sampler, self._sf_grammar.sampler
        logits = np.ctypeslib.as_array(cpp.llama_get_logits_ith(self._ctx.ctx, ridx), shape=(self._n_vocab,))
        candidates = getattr(self, "_sf_candidates", None)
        if candidates is None:
            candidates = self._sf_candidates = llama_cpp._internals.LlamaTokenDataArray(n_vocab=self._n_vocab)
        candidates.copy_logits(logits)
        cpp.llama_sampler_apply(chain, ctypes.byref(candidates.candidates))
        token = int(candidates.candidates_data.id[candidates.candidates.selected])
        single = (cpp.llama_token_data * 1)(cpp.llama_token_data(token, 1.0, 0.0))
        check = cpp.llama_token_data_array(data=single, size=1, selected=-1, sorted=False)
        cpp.llama_sampler_apply(grammar, ctypes.byref(check))
        if single[0].logit == float("-inf"):
            candidates.copy_logits(logits)
            cpp.llama_sampler_apply(grammar, ctypes.byref(candidates.candidates))
            cpp.llama_sampler_apply(chain, ctypes.byref(candidates.candidates))
            token = int(candidates.candidates_data.id[candidates.candidates.selected])
            self._sf_add("grammar_resamples", 1)
        cpp.llama_sampler_accept(grammar, token)
        cpp.llama_sampler_accept(chain, token)
        return token

    def create_chat_completion(self, *args: Any, sf_include_usage: bool = False, **kwargs: Any) -> Any:
        """The library's chat completion, with timings; a stream ends with OpenAI's usage chunk
        when ``sf_include_usage`` (the request's ``stream_options.include_usage``)."""
        started = time.perf_counter()
        result = super().create_chat_completion(*args, **kwargs)
        if isinstance(result, dict):
            result["timings"] = {**self._sf_timings(), "total_s": time.perf_counter() - started}
            return result
        return self._sf_chat_stream(result, sf_include_usage)

    def _sf_chat_stream(self, chunks: Any, include_usage: bool) -> Any:
        """A streamed chat reply, then OpenAI's usage chunk (``choices: []``, ``usage``), which the
        library never sends: without it a streaming client counts no tokens at all."""
        self._sf_stream_usage: dict[str, Any] | None = None
        last: dict[str, Any] = {}
        for chunk in chunks:
            last = chunk
            yield chunk
        if include_usage and self._sf_stream_usage is not None and last:
            head = {k: last[k] for k in ("id", "created", "model") if k in last}
            yield {**head, "object": "chat.completion.chunk", "choices": [], "usage": self._sf_stream_usage}

    def _sf_completion_stream(self, chunks: Any, prompt: Any) -> Any:
        """A streamed completion, counted as a non-streamed one is (usage for the chat stream's
        last chunk, the running totals)."""
        started = time.perf_counter()
        self._sf_prompt_evaluated = None  # the generator runs the model: its first eval is the prompt
        text = []
        for chunk in chunks:
            for choice in chunk.get("choices") or []:
                text.append(choice.get("text") or "")
            yield chunk
        if isinstance(prompt, str):
            # as the library tokenizes it in _create_completion
            prompt_tokens = len(self.tokenize(prompt.encode("utf-8"), special=True)) if prompt else 1
        else:
            prompt_tokens = len(prompt or [])
        reply = "".join(text)
        completion_tokens = len(self.tokenize(reply.encode("utf-8"), add_bos=False, special=True)) if reply else 0
        evaluated = self._sf_prompt_evaluated or 0
        cached = max(0, prompt_tokens - evaluated)
        self._sf_stream_usage = {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
            "prompt_tokens_details": {"cached_tokens": cached},
        }
        stats = self.sf_stats()
        stats["requests"] += 1
        stats["prompt_tokens"] += prompt_tokens
        stats["evaluated_prompt_tokens"] += prompt_tokens - cached
        stats["completion_tokens"] += completion_tokens
        stats["seconds"] += time.perf_counter() - started
        self._sf_prompt_evaluated = 0

    #: see :data:`DEFAULT_DEGENERATE_RUN_CHARS`; 0 turns the rule off (``load_model`` sets it)
    degenerate_run_chars = DEFAULT_DEGENERATE_RUN_CHARS
    #: stop a generation whose client disconnected (off only to measure what it saves)
    stop_when_client_gone = True

    def _stop_rules(self) -> Any:
        """A stopping criterion: the client is gone, or the reply's tail is a periodic run."""
        gone = _CLIENT_GONE.get() if self.stop_when_client_gone else None
        limit = self.degenerate_run_chars
        runs = (
            [re.compile(rf"(.{{{p}}})\1{{{-(-limit // p) - 1},}}$", re.DOTALL) for p in _RUN_PERIODS] if limit else []
        )
        generated = 0

        def stop(input_ids: Any, logits: Any) -> bool:
            nonlocal generated
            generated += 1
            if gone is not None and gone.is_set():
                self._sf_request["stopped_by"] = "client_gone"
                return True
            if runs and generated * 4 >= limit:  # a token is at most a few characters of a run
                # input_ids ends with the tokens generated so far; a run is made of short tokens
                tail = self.detokenize(list(input_ids[-min(generated, limit) :])).decode("utf-8", "ignore")
                for run in runs:
                    m = run.search(tail)
                    if m is not None and not m.group(1).isspace():
                        self._sf_request["stopped_by"] = f"run of {m.group(1)!r}"
                        return True
            return False

        return stop

    def create_completion(self, *args: Any, **kwargs: Any) -> Any:
        self._sf_prompt_evaluated = None
        self._sf_request = {}
        gone = _CLIENT_GONE.get()
        if gone is not None and gone.is_set():  # abandoned while it waited for the model
            raise ClientGoneError("the client closed the request before the model started on it")
        rules = kwargs.get("stopping_criteria")
        kwargs["stopping_criteria"] = llama_cpp.StoppingCriteriaList([*(rules or []), self._stop_rules()])
        started = time.perf_counter()
        result = super().create_completion(*args, **kwargs)
        if not isinstance(result, dict):  # a stream: the model runs while it is read
            return self._sf_completion_stream(result, kwargs.get("prompt", args[0] if args else ""))
        if isinstance(result, dict):
            result["timings"] = {**self._sf_timings(), "total_s": time.perf_counter() - started}
            if "stopped_by" in self._sf_request:
                result["timings"]["stopped_by"] = self._sf_request["stopped_by"]
        if isinstance(result, dict) and isinstance(result.get("usage"), dict):
            usage = result["usage"]
            evaluated = self._sf_prompt_evaluated or 0
            cached = max(0, int(usage.get("prompt_tokens", 0)) - evaluated)
            usage["prompt_tokens_details"] = {"cached_tokens": cached}
            stats = self.sf_stats()
            stats["requests"] += 1
            stats["prompt_tokens"] += int(usage.get("prompt_tokens", 0))
            stats["evaluated_prompt_tokens"] += int(usage["prompt_tokens"]) - cached
            stats["completion_tokens"] += int(usage.get("completion_tokens", 0))
            stats["seconds"] += time.perf_counter() - started
        self._sf_prompt_evaluated = 0
        return result

    def sf_stats(self) -> dict[str, Any]:
        """Running totals since start (``requests``, ``prompt_tokens``, ``evaluated_prompt_tokens``...)."""
        if not hasattr(self, "_sf_stats"):
            self._sf_stats: dict[str, Any] = {
                "requests": 0,
                "prompt_tokens": 0,
                "evaluated_prompt_tokens": 0,
                "completion_tokens": 0,
                "seconds": 0.0,
            }
        return self._sf_stats

    def save_state(self) -> llama_cpp.LlamaState:
        started = time.perf_counter()
        try:
            return self._save_state()
        finally:
            self._sf_add("cache_save_s", time.perf_counter() - started)

    def _save_state(self) -> llama_cpp.LlamaState:
        if self._logits_all:
            return super().save_state()
        size = llama_cpp.llama_state_get_size(self._ctx.ctx)
        buf = (llama_cpp.ctypes.c_uint8 * int(size))()
        n_bytes = int(llama_cpp.llama_state_get_data(self._ctx.ctx, buf, size))
        if n_bytes > int(size):
            raise RuntimeError("llama_state_get_data wrote more than llama_state_get_size")
        return llama_cpp.LlamaState(
            input_ids=self.input_ids[: self.n_tokens].copy(),
            scores=np.empty((0, self._n_vocab), dtype=np.single),
            n_tokens=self.n_tokens,
            llama_state=bytes(memoryview(buf)[:n_bytes]),
            llama_state_size=n_bytes,
            seed=self._seed,
        )

    def load_state(self, state: llama_cpp.LlamaState) -> None:
        started = time.perf_counter()
        try:
            self._load_state(state)
        finally:
            self._sf_add("cache_load_s", time.perf_counter() - started)

    def _load_state(self, state: llama_cpp.LlamaState) -> None:
        if self._logits_all or state.scores.shape[0] != 0:
            super().load_state(state)
            return
        self.input_ids[: state.n_tokens] = state.input_ids[: state.n_tokens]
        self.n_tokens = state.n_tokens
        # Restored state has no fresh logits: generate() replays at least one token first.
        self._requires_eval = True
        self._seed = state.seed
        buf = (llama_cpp.ctypes.c_uint8 * state.llama_state_size).from_buffer_copy(state.llama_state)
        if llama_cpp.llama_state_set_data(self._ctx.ctx, buf, state.llama_state_size) != state.llama_state_size:
            raise RuntimeError("llama_state_set_data failed to restore a cached prompt state")


class PrefixPruningRAMCache(llama_cpp.LlamaRAMCache):
    """``LlamaRAMCache`` that drops entries made redundant by a longer one.

    Lookups pick the entry sharing the longest prefix with the new prompt; an entry whose tokens
    are a prefix of another entry's can never win against it, so it is removed when the longer
    one is stored. In an agent loop every turn extends the previous one, so this keeps one entry
    per live conversation instead of one per turn, and the capacity holds more conversations.
    """

    def __setitem__(self, key: Any, value: Any) -> None:
        key = tuple(key)
        dominated = [k for k in self.cache_state if len(k) < len(key) and key[: len(k)] == k]
        for k in dominated:
            del self.cache_state[k]
        super().__setitem__(key, value)


def _scrub_settings_env(*settings_classes: Any) -> None:
    # ModelSettings/ServerSettings are pydantic BaseSettings: stray variables such as API_KEY or
    # CHAT_FORMAT in the user's environment would silently change the server. Every value we
    # rely on is passed explicitly; the rest must come from defaults, not the environment.
    for cls in settings_classes:
        for name in cls.model_fields:
            os.environ.pop(name.upper(), None)
            os.environ.pop(name, None)


def load_model(config: dict[str, Any]) -> AccountingLlama:
    """Load the GGUF with the server's settings (chat template from the GGUF metadata).

    ``config["prompt_lookup"]`` (optional, default 0): draft this many tokens per step by prompt
    lookup (``LlamaPromptLookupDecoding``: the continuation of the last n-gram's earlier
    occurrence in the context), verified in one evaluation; 0 turns it off.
    ``config["degenerate_run_chars"]`` (optional): see :data:`DEFAULT_DEGENERATE_RUN_CHARS`; 0: off.
    ``config["stop_when_client_gone"]`` (optional, default true): see :class:`AccountingLlama`.
    """
    lookup = int(config.get("prompt_lookup", 0))
    draft = LlamaPromptLookupDecoding(num_pred_tokens=lookup) if lookup > 0 else None
    llama = AccountingLlama(
        model_path=config["model_path"],
        n_gpu_layers=0,
        n_ctx=config["n_ctx"],
        n_batch=config["n_batch"],
        n_threads=config["n_threads"],
        n_threads_batch=config["n_threads"],
        logits_all=False,  # all-logits costs GBs of RAM and is only needed for logprobs
        embedding=False,
        chat_format=None,
        verbose=config.get("verbose", False),
        draft_model=draft,
    )
    if config["cache_bytes"] > 0:
        llama.set_cache(PrefixPruningRAMCache(capacity_bytes=config["cache_bytes"]))
    llama.degenerate_run_chars = int(config.get("degenerate_run_chars", DEFAULT_DEGENERATE_RUN_CHARS))
    llama.stop_when_client_gone = bool(config.get("stop_when_client_gone", True))
    return llama


def build_app(config: dict[str, Any], llama: AccountingLlama) -> Any:
    """Create the FastAPI app around an already loaded model."""
    import anyio
    import llama_cpp.server.app as llama_app
    from fastapi import Body, FastAPI, Request
    from fastapi.responses import JSONResponse
    from llama_cpp.server.model import LlamaProxy
    from llama_cpp.server.settings import ModelSettings, ServerSettings
    from llama_cpp.server.types import CreateChatCompletionRequest, CreateCompletionRequest
    from sse_starlette.sse import EventSourceResponse
    from starlette.middleware import Middleware
    from starlette_context.middleware import RawContextMiddleware
    from starlette_context.plugins import RequestIdPlugin

    class PreloadedProxy(LlamaProxy):
        """The library's model proxy, handed our model instead of loading its own."""

        def load_llama_from_model_settings(self, settings: ModelSettings) -> llama_cpp.Llama:  # type: ignore[override]
            return llama

    _scrub_settings_env(ModelSettings, ServerSettings)
    server_settings = ServerSettings(host=config["host"], port=config["port"], interrupt_requests=False, api_key=None)
    model_settings = ModelSettings(
        model=config["model_path"], model_alias=config["alias"], n_ctx=config["n_ctx"], cache=False
    )
    llama_app.set_server_settings(server_settings)
    app = FastAPI(
        title="StateFlow local LLM (llama-cpp-python)",
        version=llama_cpp.__version__,
        middleware=[Middleware(RawContextMiddleware, plugins=(RequestIdPlugin(),))],
    )
    started = time.time()

    @app.get("/health")
    async def health() -> dict[str, Any]:
        # Answers without taking the model lock, so it works while a long request runs.
        return {"status": "ok", "alias": config["alias"], "pid": os.getpid(), "since": started}

    @app.get("/stateflow/stats")
    async def stats() -> dict[str, Any]:
        cache = llama.cache
        ram = isinstance(cache, llama_cpp.LlamaRAMCache)
        return {
            "alias": config["alias"],
            **llama.sf_stats(),
            "cache_entries": len(cache.cache_state) if ram else 0,
            "cache_bytes": cache.cache_size if ram else 0,
        }

    async def served(request: Request, handler: Any, body: Any) -> Any:
        """Run the library's handler while watching the client; see :class:`AccountingLlama`."""
        gone = threading.Event()
        _CLIENT_GONE.set(gone)  # this task's context, copied into the model's worker thread

        async def watch() -> None:
            while not await request.is_disconnected():
                await asyncio.sleep(0.2)
            gone.set()

        watcher = asyncio.create_task(watch())
        try:
            result = await handler(request, body)
        except ClientGoneError as err:
            return JSONResponse({"error": {"message": str(err), "type": "client_gone"}}, status_code=499)
        except InvalidGrammarError as err:
            return JSONResponse({"error": {"message": str(err), "type": "invalid_request_error"}}, status_code=400)
        finally:
            watcher.cancel()
        return JSONResponse(result) if isinstance(result, dict) else result

    async def chat_stream(request: Request, body: CreateChatCompletionRequest) -> Any:
        """The library's streaming branch, calling OUR ``create_chat_completion``.

        Why: the library's route passes the base class's unbound method
        (``llama_cpp.Llama.create_chat_completion``), which skips an override: the usage chunk
        never arrived (seen on the wire) and every streamed call counted 0 tokens.
        """
        kwargs = body.model_dump(exclude={"n", "logit_bias_type", "user", "min_tokens"})
        # stream_options is not a field of the library's request model: read it from the body
        raw = await request.json()
        options = raw.get("stream_options") if isinstance(raw, dict) else None
        kwargs["sf_include_usage"] = isinstance(options, dict) and options.get("include_usage") is True
        send, receive = anyio.create_memory_object_stream(10)
        return EventSourceResponse(
            receive,
            data_sender_callable=functools.partial(
                llama_app.get_event_publisher,
                request=request,
                inner_send_chan=send,
                body=body,
                body_model=body.model,
                llama_call=type(llama).create_chat_completion,
                kwargs=kwargs,
            ),
            sep="\n",
            ping_message_factory=llama_app._ping_message_factory,
        )

    @app.post("/v1/chat/completions")
    async def chat(request: Request, body: CreateChatCompletionRequest = Body(...)) -> Any:  # noqa: B008
        handler = chat_stream if body.stream else llama_app.create_chat_completion
        try:
            schema_as_grammar(body)
        except schema_grammar.SchemaGrammarError as err:
            return JSONResponse({"error": {"message": str(err), "type": "invalid_request_error"}}, status_code=400)
        return await served(request, handler, body)

    @app.post("/v1/completions")
    async def completions(request: Request, body: CreateCompletionRequest = Body(...)) -> Any:  # noqa: B008
        return await served(request, llama_app.create_completion, body)

    app.include_router(llama_app.router)  # everything else (models, tokenize...) from the library
    # The library keeps its proxy in a module global that its routes read; this process serves
    # exactly one app, so setting it is safe.
    llama_app._llama_proxy = PreloadedProxy(models=[model_settings])
    return app


def _watch_lifeline(fd: int) -> None:
    def wait() -> None:
        try:
            while os.read(fd, 1):
                pass
        except OSError:
            pass
        # The parent is gone: leave at once (no graceful shutdown of a request nobody awaits).
        os._exit(0)

    threading.Thread(target=wait, name="lifeline", daemon=True).start()


def main(argv: list[str] | None = None) -> None:
    """Entry point of the child process."""
    parser = argparse.ArgumentParser(prog="server_app.py")
    parser.add_argument("--config", required=True, help="JSON object with the server settings")
    parser.add_argument("--fd", type=int, default=None, help="inherited listening socket")
    parser.add_argument("--lifeline", type=int, default=None, help="pipe read end; EOF = parent died")
    args = parser.parse_args(argv)
    config = json.loads(args.config)
    if config.get("cpus"):
        # Before any thread starts (threads inherit it, llama.cpp's workers too): a replica keeps
        # to its core, so two replicas never contend for one (two 2-thread servers on 2 cores
        # made calls 5-10x slower).
        os.sched_setaffinity(0, config["cpus"])
    if args.lifeline is not None:
        _watch_lifeline(args.lifeline)
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
    # Load the model (native code, releases the GIL) while the web stack is imported.
    loaded: dict[str, Any] = {}

    def load() -> None:
        try:
            loaded["llama"] = load_model(config)
        except BaseException as err:
            loaded["error"] = err

    loader = threading.Thread(target=load, name="model-loader")
    loader.start()
    import llama_cpp.server.app  # noqa: F401 - warm the import cache for build_app
    import uvicorn

    loader.join()
    if "error" in loaded:
        raise SystemExit(f"cannot load {config['model_path']}: {loaded['error']}")
    app = build_app(config, loaded["llama"])
    print(f"stateflow-llm: serving {config['alias']} on {config['host']}:{config['port']}", flush=True)
    if args.fd is not None:
        uvicorn.run(app, fd=args.fd, log_level="warning", access_log=False)
    else:
        uvicorn.run(app, host=config["host"], port=config["port"], log_level="warning", access_log=False)
    sys.exit(0)


if __name__ == "__main__":
    main()

"""Likelihood scoring: how probable a continuation is under a model, length-normalised.

A summariser that may return either its summary or the raw results (PASS) keeps whichever the
agent's own model finds more probable after the conversation so far. Raw log-likelihood favours
short texts, so the sum is divided by a length penalty (Wu et al. 2016's GNMT normalisation)::

    score(y) = sum(log p(y_i | x, y_<i)) / ((5 + |y|)^alpha / 6^alpha)

with ``|y|`` in tokens; ``alpha = 0`` is the plain sum, ``alpha = 1`` roughly a per-token mean.

Scorers (a :class:`Scorer` returns the per-token log-probabilities of ``continuation`` after a
chat ``messages`` whose last assistant turn is still open, continued by ``prefix``):

* :class:`LocalScorer`: in-process on a GGUF model with llama-cpp-python. It asks llama.cpp for
  logits at the continuation's positions only (one batched decode, no ``logits_all`` buffer),
  and keeps the KV cache between calls, so scoring two candidates after the same conversation
  evaluates the conversation once.
* :class:`OpenAIScorer`: any OpenAI-compatible ``/v1/completions`` endpoint that echoes prompt
  log-probabilities (vLLM, a llama.cpp server started with ``logits_all``). An endpoint that
  returns none raises :class:`ScoringUnsupportedError`; so does the embedded ``local`` server,
  which runs without ``logits_all`` (it would cost GBs of RAM): use :class:`LocalScorer` there.

:func:`scorer_for` picks one for a model profile.
"""

from __future__ import annotations

import json
import math
import threading
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from stateflow.errors import ConfigError, StateFlowError
from stateflow.profiles import ModelProfile

__all__ = [
    "Choice",
    "LocalScorer",
    "OpenAIScorer",
    "Scorer",
    "ScoringUnsupportedError",
    "chatml",
    "choose_by_likelihood",
    "length_normalised",
    "scorer_for",
]


class ScoringUnsupportedError(StateFlowError):
    """The model or endpoint cannot give token log-probabilities."""


def length_normalised(logprobs: Sequence[float], alpha: float) -> float:
    """``sum(logprobs) / ((5 + n)^alpha / 6^alpha)`` with ``n = len(logprobs)``.

    Example:
        >>> round(length_normalised([-1.0, -2.0], alpha=1.0), 4)  # -3 / (7/6)
        -2.5714

    Raises:
        ValueError: empty ``logprobs`` (an empty text has no likelihood to compare) or a
            negative ``alpha``.
    """
    if not logprobs:
        raise ValueError("cannot score an empty continuation")
    if alpha < 0:
        raise ValueError(f"alpha must be >= 0, got {alpha}")
    penalty = ((5 + len(logprobs)) ** alpha) / (6**alpha)
    return math.fsum(logprobs) / penalty


@runtime_checkable
class Scorer(Protocol):
    """What likelihood scoring needs from a model."""

    def token_logprobs(self, messages: Sequence[dict[str, Any]], prefix: str, continuation: str) -> list[float]:
        """Log-probabilities of ``continuation``'s tokens after ``messages`` + open assistant ``prefix``."""
        ...


@dataclass(frozen=True)
class Choice:
    """The outcome of :func:`choose_by_likelihood`.

    Attributes:
        best: the label of the kept candidate.
        scores: label -> length-normalised score.
        logprob_sums: label -> plain sum of token log-probabilities.
        tokens: label -> number of scored tokens.
        alpha: the normalisation exponent used.
    """

    best: str
    scores: dict[str, float]
    logprob_sums: dict[str, float]
    tokens: dict[str, int]
    alpha: float

    def to_dict(self) -> dict[str, Any]:
        return {
            "best": self.best,
            "alpha": self.alpha,
            "scores": {k: round(v, 4) for k, v in self.scores.items()},
            "logprob_sums": {k: round(v, 4) for k, v in self.logprob_sums.items()},
            "tokens": dict(self.tokens),
        }


def choose_by_likelihood(
    scorer: Scorer,
    messages: Sequence[dict[str, Any]],
    prefix: str,
    candidates: Mapping[str, str],
    *,
    alpha: float,
) -> Choice:
    """Score each candidate continuation and keep the highest (ties: the first listed).

    Args:
        scorer: the model to score with.
        messages: the chat so far; the last assistant turn is open and continued by ``prefix``.
        prefix: text already written in that turn (e.g. a transcript ending ``[Summary]``).
        candidates: label -> continuation text (non-empty).
        alpha: the length-normalisation exponent (see :func:`length_normalised`).

    Raises:
        ValueError: no candidate, or an empty one.
    """
    if not candidates:
        raise ValueError("no candidates to choose from")
    scores: dict[str, float] = {}
    sums: dict[str, float] = {}
    tokens: dict[str, int] = {}
    for label, text in candidates.items():
        if not text:
            raise ValueError(f"candidate {label!r} is empty")
        lps = scorer.token_logprobs(messages, prefix, text)
        scores[label] = length_normalised(lps, alpha)
        sums[label] = math.fsum(lps)
        tokens[label] = len(lps)
    best = max(scores, key=lambda k: scores[k])  # max keeps the first of equal scores
    return Choice(best, scores, sums, tokens, alpha)


def chatml(messages: Sequence[dict[str, Any]]) -> str:
    """Render chat messages in ChatML (Qwen's template) with an open assistant turn.

    Used to turn chat messages into a completion prompt for endpoints scored over HTTP; pass
    another renderer to :class:`OpenAIScorer` for models with a different template.
    """
    parts = [f"<|im_start|>{m['role']}\n{m.get('content') or ''}<|im_end|>\n" for m in messages]
    return "".join(parts) + "<|im_start|>assistant\n"


class LocalScorer:
    """In-process scoring on a GGUF model (llama-cpp-python), for scoring only (no sampling).

    Args:
        model_path: the GGUF file.
        n_ctx: context size; a prompt plus continuation longer than this raises ``ValueError``.
        n_threads: CPU threads (default: the machine's cores).
        render: chat messages -> prompt text; default: the GGUF's own chat template.

    The model is loaded on first use. Calls are serialised (one llama.cpp context).
    """

    def __init__(
        self,
        model_path: str | Path,
        *,
        n_ctx: int = 8192,
        n_threads: int | None = None,
        render: Callable[[Sequence[dict[str, Any]]], str] | None = None,
    ):
        self.model_path = Path(model_path)
        self.n_ctx = n_ctx
        self.n_threads = n_threads
        self._render = render
        self._llm: Any = None
        self._kv: list[int] = []  # tokens whose KV state the context holds, in order
        self._lock = threading.Lock()
        self.evaluated_tokens = 0  # tokens decoded so far (cost accounting)

    def _load(self) -> Any:
        if self._llm is None:
            try:
                import llama_cpp
            except ImportError as err:
                raise ScoringUnsupportedError(
                    "in-process scoring needs llama-cpp-python; run scripts/setup_local_llm.sh"
                ) from err
            from stateflow.backends.local import cpu_cores

            self._llm = llama_cpp.Llama(
                model_path=str(self.model_path),
                n_ctx=self.n_ctx,
                n_threads=self.n_threads or cpu_cores(),
                logits_all=False,  # logits are requested per position below
                verbose=False,
            )
            if self._render is None:
                self._render = self._gguf_template(self._llm)
        return self._llm

    @staticmethod
    def _gguf_template(llm: Any) -> Callable[[Sequence[dict[str, Any]]], str]:
        from llama_cpp.llama_chat_format import Jinja2ChatFormatter

        template = llm.metadata.get("tokenizer.chat_template")
        if not template:
            return chatml

        def text_of(token: int) -> str:
            return "" if token == -1 else llm.detokenize([token], special=True).decode("utf-8", "replace")

        eos, bos = text_of(llm.token_eos()), text_of(llm.token_bos())
        fmt = Jinja2ChatFormatter(template=template, eos_token=eos, bos_token=bos, add_generation_prompt=True)
        return lambda messages: fmt(messages=list(messages)).prompt

    def token_logprobs(self, messages: Sequence[dict[str, Any]], prefix: str, continuation: str) -> list[float]:
        import numpy as np

        if not continuation:
            raise ValueError("cannot score an empty continuation")
        with self._lock:
            llm = self._load()
            assert self._render is not None
            prompt = self._render(messages) + prefix
            head = llm.tokenize(prompt.encode("utf-8"), add_bos=False, special=True)
            tail = llm.tokenize(continuation.encode("utf-8"), add_bos=False, special=False)
            tokens = head + tail
            if len(tokens) > self.n_ctx:
                raise ValueError(f"prompt + continuation is {len(tokens)} tokens; the scorer's n_ctx is {self.n_ctx}")
            # logits at position i predict token i+1: we need positions len(head)-1 .. len(tokens)-2
            first_needed = len(head) - 1
            keep = 0
            while keep < min(len(self._kv), first_needed) and self._kv[keep] == tokens[keep]:
                keep += 1
            return self._decode(llm, np, tokens, keep, first_needed)

    def _decode(self, llm: Any, np: Any, tokens: list[int], keep: int, first_needed: int) -> list[float]:
        import llama_cpp

        ctx = llm.ctx
        llama_cpp.llama_memory_seq_rm(llama_cpp.llama_get_memory(ctx), -1, keep, -1)
        self._kv = self._kv[:keep]
        n_batch = llm.n_batch
        batch = llama_cpp.llama_batch_init(n_batch, 0, 1)
        out: list[float] = []
        n_vocab = llm.n_vocab()
        try:
            pos = keep
            while pos < len(tokens) - 1:  # the last token's logits are never needed
                end = min(len(tokens) - 1, pos + n_batch)
                wanted: list[int] = []
                batch.n_tokens = end - pos
                for j, p in enumerate(range(pos, end)):
                    batch.token[j] = tokens[p]
                    batch.pos[j] = p
                    batch.n_seq_id[j] = 1
                    batch.seq_id[j][0] = 0
                    need = p >= first_needed
                    batch.logits[j] = need
                    if need:
                        wanted.append(j)
                rc = llama_cpp.llama_decode(ctx, batch)
                if rc != 0:
                    raise StateFlowError(f"llama_decode failed with code {rc} while scoring")
                self.evaluated_tokens += end - pos
                for j in wanted:
                    row = np.ctypeslib.as_array(llama_cpp.llama_get_logits_ith(ctx, j), shape=(n_vocab,))
                    top = float(row.max())
                    log_z = top + math.log(float(np.exp(row - top).sum()))
                    out.append(float(row[tokens[pos + j + 1]]) - log_z)
                self._kv.extend(tokens[pos:end])
                pos = end
        finally:
            llama_cpp.llama_batch_free(batch)
        return out


@dataclass
class OpenAIScorer:
    """Scoring over an OpenAI-compatible ``/v1/completions`` endpoint with ``echo`` + ``logprobs``.

    Args:
        base_url: endpoint root including ``/v1``.
        model: model name sent in requests.
        api_key: bearer token (``""`` for none).
        render: chat messages -> prompt text (default :func:`chatml`).
        timeout: seconds per request.
    """

    base_url: str
    model: str
    api_key: str = ""
    render: Callable[[Sequence[dict[str, Any]]], str] = chatml
    timeout: float = 120.0

    def token_logprobs(self, messages: Sequence[dict[str, Any]], prefix: str, continuation: str) -> list[float]:
        if not continuation:
            raise ValueError("cannot score an empty continuation")
        prompt = self.render(messages) + prefix
        body = {
            "model": self.model,
            "prompt": prompt + continuation,
            "max_tokens": 1,
            "temperature": 0.0,
            "echo": True,
            "logprobs": 1,
        }
        url = self.base_url.rstrip("/") + "/completions"
        req = urllib.request.Request(url, json.dumps(body).encode(), {"Content-Type": "application/json"})
        if self.api_key:
            req.add_header("Authorization", f"Bearer {self.api_key}")
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as resp:
                data = json.loads(resp.read())
        except urllib.error.HTTPError as err:
            detail = err.read()[:300].decode("utf-8", "replace")
            raise ScoringUnsupportedError(
                f"{url} refused a prompt-logprobs request (HTTP {err.code}: {detail}); "
                "scoring needs an endpoint that echoes prompt logprobs (vLLM, llama.cpp with logits_all)"
            ) from err
        except (urllib.error.URLError, OSError, ValueError) as err:
            raise StateFlowError(f"scoring request to {url} failed: {err}") from err
        return _echoed_logprobs(data, len(prompt), len(prompt) + len(continuation), url)


def _echoed_logprobs(data: dict[str, Any], start: int, end: int, url: str) -> list[float]:
    """The echoed log-probabilities of the tokens starting in ``[start, end)`` of the prompt text."""
    try:
        lp = data["choices"][0]["logprobs"]
    except (KeyError, IndexError, TypeError):
        lp = None
    if not lp or not lp.get("token_logprobs") or not lp.get("text_offset"):
        raise ScoringUnsupportedError(
            f"{url} returned no prompt log-probabilities (no choices[0].logprobs with token_logprobs and "
            "text_offset); this endpoint cannot score texts"
        )
    out = []
    for offset, value in zip(lp["text_offset"], lp["token_logprobs"], strict=False):
        if start <= offset < end:
            if value is None:
                raise ScoringUnsupportedError(f"{url} returned a null logprob inside the scored text")
            out.append(float(value))
    if not out:
        raise ScoringUnsupportedError(f"{url} echoed no tokens inside the scored text (offsets do not match)")
    return out


def scorer_for(profile: ModelProfile) -> Scorer:
    """A scorer for ``profile``'s model.

    ``local`` profiles get an in-process :class:`LocalScorer` on the same GGUF file; other
    providers an :class:`OpenAIScorer` on the profile's endpoint (errors surface on first use
    when the endpoint returns no log-probabilities).

    Raises:
        ConfigError: a test-double profile (``scripted``/``replay``) or one without an endpoint
            that could score (OpenAI's own API returns no prompt logprobs).
    """
    from stateflow.backends.providers import capabilities

    how = capabilities(profile.provider, own_api=profile.base_url is None).prompt_logprobs
    if capabilities(profile.provider).test_double:
        raise ConfigError(f"profile {profile.name!r} is a {profile.provider} test double and cannot score texts")
    if how == "in_process":
        from stateflow.backends.local import default_pool

        if not profile.local_model:
            raise ConfigError(f"local profile {profile.name!r} names no local_model")
        server = default_pool().server(profile.local_model, alias=profile.model)
        return LocalScorer(server.config.model_path)
    if how == "none":
        raise ConfigError(
            f"profile {profile.name!r}: its endpoint ({profile.base_url or 'OpenAI API'}) returns no prompt "
            "log-probabilities; score with a local model or a vLLM/llama.cpp endpoint"
        )
    if profile.base_url is None:
        raise ConfigError(f"profile {profile.name!r} has no base_url to score against")
    return OpenAIScorer(profile.base_url, profile.model, api_key=_key(profile), timeout=profile.timeout)


def _key(profile: ModelProfile) -> str:
    try:
        return profile.api_key()
    except ConfigError:
        return ""

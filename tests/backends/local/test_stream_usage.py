"""The embedded server's usage chunk for streamed chat replies, on the library's real stream
conversion (llama-cpp-python's chat handler helpers) with a stand-in for the model's tokenizer:
no model is loaded."""

from __future__ import annotations

import pytest

server_app = pytest.importorskip("stateflow.backends.local.server_app")


class _Stub:
    """What the two stream wrappers use of ``AccountingLlama``: a tokenizer (one token per
    character here), the prompt-eval counter, the running totals."""

    _sf_prompt_evaluated: int | None = 0

    def tokenize(self, text: bytes, add_bos: bool = True, special: bool = False) -> list[int]:
        return list(text) + ([0] if add_bos else [])

    def sf_stats(self):
        return server_app.AccountingLlama.sf_stats(self)

    _sf_completion_stream = server_app.AccountingLlama._sf_completion_stream
    _sf_chat_stream = server_app.AccountingLlama._sf_chat_stream


def _completion_chunks(model: _Stub, pieces: list[str]):
    for i, piece in enumerate(pieces):
        if i == 0:
            model._sf_prompt_evaluated = 3  # the model's first eval: 3 prompt tokens not cached
        yield {
            "id": "cmpl-1",
            "created": 1,
            "model": "m",
            "choices": [{"index": 0, "text": piece, "logprobs": None, "finish_reason": None}],
        }


def test_a_streamed_chat_reply_ends_with_its_usage():
    from llama_cpp.llama_chat_format import _convert_text_completion_chunks_to_chat

    model = _Stub()
    prompt = "abcdefghij"  # 10 characters: 11 tokens with BOS
    text = model._sf_completion_stream(_completion_chunks(model, ["Hel", "lo"]), prompt)
    chunks = list(model._sf_chat_stream(_convert_text_completion_chunks_to_chat(text), True))
    deltas = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"])
    assert deltas == "Hello"
    last = chunks[-1]
    assert last["choices"] == [] and last["object"] == "chat.completion.chunk" and last["id"] == chunks[0]["id"]
    assert last["usage"] == {
        "prompt_tokens": 11,
        "completion_tokens": 5,
        "total_tokens": 16,
        "prompt_tokens_details": {"cached_tokens": 8},
    }
    assert model.sf_stats()["requests"] == 1 and model.sf_stats()["evaluated_prompt_tokens"] == 3


def test_the_usage_chunk_is_sent_only_when_the_client_asks_for_it():
    # OpenAI sends it only with stream_options.include_usage; a client that did not ask may
    # read choices[0] of every chunk
    from llama_cpp.llama_chat_format import _convert_text_completion_chunks_to_chat

    model = _Stub()
    text = model._sf_completion_stream(_completion_chunks(model, ["Hi"]), "abc")
    chunks = list(model._sf_chat_stream(_convert_text_completion_chunks_to_chat(text), False))
    assert chunks and all(c["choices"] for c in chunks)
    assert model.sf_stats()["requests"] == 1  # still counted in the running totals

"""llama.cpp, the benchmarks' peer, in its own interpreter: one JSON request per line in, one JSON answer out.

The chat benchmarks run this file with the peers' Python (`tests/bench/setup_peers.sh` makes it:
llama-cpp-python builds from source, and the locked .venv stays exactly the lock), so it imports
nothing of NPU Studio, only the standard library, numpy and llama_cpp. tests/bench/peer_process.py is
the other end. Requests (`op`):

* `version`: llama-cpp-python's version.
* `load`: a GGUF with `threads` (decode and batch), `n_ctx`, `logits_all`, and `prompt_lookup`
  (`{"max_ngram_size": N, "num_pred_tokens": K}`: llama-cpp-python's `LlamaPromptLookupDecoding` draft
  model, prompt-lookup decoding; null: none). One model at a time; loading replaces it.
* `generate`: greedy generation from prompt `tokens` (reset first: no prompt cache carried over), up to
  `max_new` tokens or one of `eos`; answers the tokens, the time to the first token and decode tok/s.
* `chat`: `create_chat_completion(messages, max_tokens, temperature=0, top_k=1, repeat_penalty=1,
  stream=True)` as users write it (the GGUF's own chat template); answers the text, the number of
  chunks (one per token), the time to the first chunk and decode tok/s over the chunks after it.
* `logits`: evaluate `tokens` (logits_all) and save the scores of every position to `path` (.npy).
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any

_llm: Any = None


def _load(request: dict[str, Any]) -> dict[str, Any]:
    global _llm
    from llama_cpp import Llama

    _llm = None
    draft = None
    lookup = request.get("prompt_lookup")
    if lookup:
        from llama_cpp.llama_speculative import LlamaPromptLookupDecoding

        draft = LlamaPromptLookupDecoding(
            max_ngram_size=int(lookup["max_ngram_size"]), num_pred_tokens=int(lookup["num_pred_tokens"])
        )
    threads = int(request["threads"])
    started = time.perf_counter()
    _llm = Llama(
        request["gguf"], n_threads=threads, n_threads_batch=threads, n_ctx=int(request.get("n_ctx", 2048)),
        logits_all=bool(request.get("logits_all", False)), draft_model=draft, verbose=False,
    )  # fmt: skip
    return {"load_s": time.perf_counter() - started}


def _generate(request: dict[str, Any]) -> dict[str, Any]:
    """Greedy generation as llama-cpp-python users write it; the first token is timed from the prompt's tokens.
    `reset()` first: otherwise llama-cpp-python reuses the previous run's prompt from its cache and skips
    the prefill, while each engine run is a new conversation that prefills the whole prompt."""
    eos = set(request.get("eos", []))
    max_new = int(request["max_new"])
    _llm.reset()
    started = time.perf_counter()
    first = 0.0
    tokens: list[int] = []
    for token in _llm.generate(request["tokens"], top_k=1, top_p=1.0, temp=0.0, repeat_penalty=1.0, reset=True):
        tokens.append(int(token))
        if len(tokens) == 1:
            first = time.perf_counter()
        if token in eos or len(tokens) >= max_new:
            break
    end = time.perf_counter()
    decode = (len(tokens) - 1) / (end - first) if len(tokens) > 1 and end > first else 0.0
    return {"tokens": tokens, "ttft_s": first - started, "decode_tps": decode, "total_s": end - started}


def _chat(request: dict[str, Any]) -> dict[str, Any]:
    _llm.reset()
    started = time.perf_counter()
    first = 0.0
    chunks = 0
    pieces: list[str] = []
    stream = _llm.create_chat_completion(
        messages=request["messages"], max_tokens=int(request["max_tokens"]), temperature=0.0, top_k=1,
        top_p=1.0, repeat_penalty=1.0, stream=True,
    )  # fmt: skip
    for chunk in stream:
        delta = chunk["choices"][0].get("delta", {})
        text = delta.get("content")
        if text is None:
            continue
        chunks += 1
        if chunks == 1:
            first = time.perf_counter()
        pieces.append(text)
    end = time.perf_counter()
    decode = (chunks - 1) / (end - first) if chunks > 1 and end > first else 0.0
    return {"text": "".join(pieces), "chunks": chunks, "ttft_s": first - started, "decode_tps": decode,
            "total_s": end - started}  # fmt: skip


def _logits(request: dict[str, Any]) -> dict[str, Any]:
    import numpy as np

    tokens = request["tokens"]
    _llm.reset()
    _llm.eval(tokens)
    np.save(request["path"], np.asarray(_llm.scores[: len(tokens)], dtype=np.float32))
    return {"rows": len(tokens)}


def _version(request: dict[str, Any]) -> dict[str, Any]:
    import llama_cpp

    return {"version": llama_cpp.__version__, "python": sys.version.split()[0]}


OPS = {"version": _version, "load": _load, "generate": _generate, "chat": _chat, "logits": _logits}


def main() -> int:
    out = sys.stdout
    sys.stdout = sys.stderr  # only answers go to the pipe
    for line in sys.stdin:
        if not line.strip():
            continue
        request = json.loads(line)
        try:
            answer = OPS[request["op"]](request)
        except Exception as exc:  # the caller shows it; the peer keeps serving
            answer = {"error": f"{type(exc).__name__}: {exc}"}
        out.write(json.dumps(answer) + "\n")
        out.flush()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

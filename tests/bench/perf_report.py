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


BENCHMARKS: dict[str, Benchmark] = {
    "folder": Benchmark(
        "Folder classification vs a hand-written script",
        "tests/bench/bench_folder.py",
        "`npu-studio classify FOLDER --device cpu --json` against tests/bench/folder_script.py (Pillow "
        "draft + resize + crop + one onnxruntime session, batch 1), whole process, alternating, medians. "
        "Targets: speed-up >= 1.5x, identical top-5, CLI peak RSS <= 300 MB.",
        (
            _f("large_cli_s", "100 photos of 12 MP: npu-studio classify", "s"),
            _f("large_script_s", "100 photos of 12 MP: hand-written script", "s"),
            _f("large_speedup", "100 photos of 12 MP: speed-up vs the script", "x"),
            _f("large_cli_rss_mb", "100 photos of 12 MP: CLI peak RSS", "MB"),
            _f("small_cli_s", "1,000 photos of 1 MP: npu-studio classify", "s"),
            _f("small_script_s", "1,000 photos of 1 MP: hand-written script", "s"),
            _f("small_speedup", "1,000 photos of 1 MP: speed-up vs the script", "x"),
            _f("small_cli_rss_mb", "1,000 photos of 1 MP: CLI peak RSS", "MB"),
            _f("identical", "top-5 identical to the script's for every photo", "1 = yes"),
            _f("app_ratio", "app batch through VisionHost / classify_many in-process, throughput", "x"),
        ),
    ),
    "chat_peers": Benchmark(
        "Chat vs llama.cpp on the same model",
        "tests/bench/bench_chat_peers.py --quality",
        "The demo chat model through the chat engine against llama.cpp (llama-cpp-python 0.3.36) on the "
        "Q4_1 GGUF it is built from, same prompt, greedy, same threads, alternating, medians. Quality: "
        "next-token agreement with the fp32 model and perplexity over 2,048 tokens, each runtime's own "
        "logits. Targets: decode ratio >= 1.0, first-token ratio <= 1.0, quality no worse. Read the speed "
        "ratios with the machine's load: llama.cpp's OpenMP threads spin-wait, and on cores busy with other "
        "work its decode collapses (3-4 tok/s at load 7 on 2 cores, where n_threads=1 gave 38 tok/s), so "
        "the figures below come from a quiet sitting (its load average is given).",
        (
            _f("engine_tps", "decode, NPU Studio", "tok/s"),
            _f("llama_tps", "decode, llama.cpp", "tok/s"),
            _f("decode_ratio", "decode ratio NPU Studio / llama.cpp", "x"),
            _f("engine_ttft_ms", "time to first token, NPU Studio", "ms"),
            _f("llama_ttft_ms", "time to first token, llama.cpp", "ms"),
            _f("ttft_ratio", "time-to-first-token ratio NPU Studio / llama.cpp", "x"),
            _f("npu_agreement", "next-token agreement with fp32, NPU Studio", "%"),
            _f("llama.cpp_agreement", "next-token agreement with fp32, llama.cpp", "%"),
            _f("npu_perplexity", "perplexity, NPU Studio", "ppl"),
            _f("llama.cpp_perplexity", "perplexity, llama.cpp", "ppl"),
            _f("fp32_perplexity", "perplexity, fp32", "ppl"),
        ),
    ),
    "memory": Benchmark(
        "Desktop app memory, both demo models loaded, idle",
        "tests/bench/bench_memory.py",
        "Resident memory of every process of the app (Studio in-process, models loaded, idle 3 s). "
        "Target: all together <= 450 MB.",
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
    data = load()
    data[bench] = {
        "command": command,
        "measured": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "machine": machine(),
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

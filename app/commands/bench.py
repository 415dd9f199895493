"""`npu-studio bench [--model NAME...] [--devices all|npu,gpu,cpu] [--runs N] [--batch N] [--json|--csv]`.

The same models on every device, side by side. A progress bar goes to stderr (stdout stays clean for
--json and --csv); each run is added to the benchmark history the app shows.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from app.terminal import write_raw

if TYPE_CHECKING:
    from app.commands import Subcommands
    from engines import BenchProgress, BenchRun, DeviceResult

DEFAULT_MODELS = ("efficientnet-lite0", "smollm2-135m-instruct")
BAR_WIDTH = 24


def register(sub: Subcommands) -> None:
    parser = sub.add_parser(
        "bench",
        help="benchmark models on every device (NPU, GPU, CPU), side by side",
        description="Benchmark models on every device of this machine: session creation, latency percentiles, "
        "throughput, CPU and memory, time to first token and tokens/s for chat models, and the overhead "
        "against raw ONNX Runtime / onnxruntime-genai calls measured in the same run.",
    )
    parser.add_argument(
        "--model",
        dest="models",
        nargs="+",
        action="extend",
        metavar="NAME",
        help="model names or folders (default: both demo models)",
    )
    parser.add_argument("--devices", default="all", help="all, or a comma-separated list of npu, gpu, cpu")
    parser.add_argument("--runs", type=int, default=200, metavar="N", help="timed calls per path at batch 1 (200)")
    parser.add_argument("--batch", type=int, default=8, metavar="N", help="batch size for the throughput run (8)")
    parser.add_argument("--warmup", type=int, default=3, metavar="N", help="untimed warm-up calls (3)")
    parser.add_argument("--threads", type=int, default=0, metavar="N", help="intra-op threads (ONNX Runtime's)")
    parser.add_argument("--chat-tokens", type=int, default=64, metavar="N", help="tokens per chat answer (64)")
    parser.add_argument("--chat-rounds", type=int, default=3, metavar="N", help="timed chat answers (3)")
    parser.add_argument("--prompt", metavar="TEXT", help="chat prompt (default: a request for a short story)")
    out = parser.add_mutually_exclusive_group()
    out.add_argument("--json", action="store_true", help="print the results as JSON")
    out.add_argument("--csv", action="store_true", help="print the results as CSV")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")
    parser.add_argument("--no-save", action="store_true", help="do not add this run to the benchmark history")
    parser.set_defaults(func=run)


def resolve_models(names: list[str] | None) -> tuple[Path, ...]:
    from app.commands.classify import model_folder

    return tuple(model_folder(name, default=name) for name in (names or DEFAULT_MODELS))


class ProgressBar:
    """A one-line bar redrawn in place on a terminal; elsewhere one line per stage."""

    def __init__(self, stream: TextIO, interactive: bool | None = None, min_interval: float = 0.1) -> None:
        self.stream = stream
        self.interactive = stream.isatty() if interactive is None else interactive
        self._min_interval = min_interval
        self._last_draw = 0.0
        self._stage = ""
        self._drawn = False

    def update(self, progress: BenchProgress) -> None:
        now = time.monotonic()
        stage_changed = progress.stage != self._stage
        self._stage = progress.stage
        if not self.interactive:
            if stage_changed:
                self.stream.write(f"[{progress.fraction * 100:3.0f}%] {progress.stage}\n")
                self.stream.flush()
            return
        if not stage_changed and now - self._last_draw < self._min_interval:
            return
        self._last_draw = now
        filled = round(BAR_WIDTH * progress.fraction)
        bar = "#" * filled + "-" * (BAR_WIDTH - filled)
        line = f"[{bar}] {progress.fraction * 100:3.0f}%  {progress.text}"
        write_raw(self.stream, "\r")  # the redraw is ours; the line itself is escaped like any text
        self.stream.write(line[:110].ljust(110))
        self.stream.flush()
        self._drawn = True

    def close(self) -> None:
        if self._drawn:
            write_raw(self.stream, "\r" + " " * 110 + "\r")
            self.stream.flush()
            self._drawn = False


def _f(value: float | None, digits: int = 1, suffix: str = "") -> str:
    return "—" if value is None else f"{value:.{digits}f}{suffix}"


def _result_lines(r: DeviceResult) -> list[str]:
    if r.status != "ok":
        return [f"  {r.device:<4} {r.status}: {r.reason}"]
    lines = [f"  {r.device:<4} ran on {r.ran_on}" + (f"  (FELL BACK: {r.fallback_reason})" if r.fell_back else "")]
    if r.sessions is not None:
        lines.append(
            f"       session: first {r.sessions.first_s:.2f} s, cached {r.sessions.cached_s:.2f} s"
            + (f"  [{r.sessions.first_status}/{r.sessions.cached_status}]" if r.sessions.first_status else "")
        )
        if r.sessions.note:
            lines.append(f"       ({r.sessions.note})")
    if r.latency is not None:
        lat = r.latency
        lines.append(
            f"       latency ({r.latency_unit}, {lat.count} samples): p50 {lat.p50_ms:.2f}  p90 {lat.p90_ms:.2f}"
            f"  p99 {lat.p99_ms:.2f}"
        )
    batch_n = f", batch {r.batch} {_f(r.throughput_batch_n)}" if r.throughput_batch_n is not None else ""
    lines.append(f"       throughput ({r.throughput_unit}): batch 1 {_f(r.throughput_batch1)}{batch_n}")
    if r.chat is not None:
        c = r.chat
        lines.append(
            f"       first token {c.time_to_first_token_ms:.0f} ms, prefill {c.prefill_tokens_per_s:.0f} tok/s, "
            f"decode {c.decode_tokens_per_s:.1f} tok/s"
        )
        if c.decode_ratio is not None:
            lines.append(
                f"       vs raw onnxruntime-genai loop: decode {_f(c.raw_decode_tokens_per_s)} tok/s, "
                f"ratio {c.decode_ratio:.3f} (1.0 = as fast as raw)"
            )
    if r.overhead_ratio is not None and r.raw_latency is not None:
        lines.append(
            f"       vs raw session.run: p50 {r.raw_latency.p50_ms:.2f} ms, overhead {_f(r.overhead_ms, 3)} ms, "
            f"ratio {r.overhead_ratio:.3f} (1.0 = no overhead)"
        )
    if r.resources is not None:
        lines.append(
            f"       process CPU {r.resources.cpu_percent:.0f}% ({r.resources.cpu_count} cores), "
            f"peak RSS {r.resources.peak_rss_mb:.0f} MB"
        )
    return lines


def format_run(run: BenchRun) -> str:
    machine = run.machine
    lines = [
        f"Benchmark {run.run_id} on {machine.get('system', '')} ({machine.get('processor', '')}, "
        f"{machine.get('cpu_count', '?')} cores); ONNX Runtime {machine.get('onnxruntime', '?')}, "
        f"onnxruntime-genai {machine.get('onnxruntime_genai') or 'not installed'}; {run.seconds:.1f} s"
    ]
    for model in run.models():
        results = run.for_model(model)
        lines.append("")
        lines.append(f"{model} ({results[0].kind})")
        for result in results:
            lines.extend(_result_lines(result))
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    from app.storage.bench_history import BenchHistory
    from app.terminal import print_json, write_machine
    from engines import (
        BENCH_DEFAULT_PROMPT,
        BenchConfig,
        CancelToken,
        StorageError,
        bench_csv_text,
        parse_devices,
        printable,
        run_benchmark,
    )

    config = BenchConfig(
        models=resolve_models(args.models),
        devices=parse_devices(args.devices),
        runs=args.runs,
        batch=args.batch,
        warmup=args.warmup,
        threads=args.threads,
        chat_prompt=args.prompt if args.prompt is not None else BENCH_DEFAULT_PROMPT,
        chat_tokens=args.chat_tokens,
        chat_rounds=args.chat_rounds,
    )
    bar = None if args.no_progress else ProgressBar(sys.stderr)
    try:
        result = run_benchmark(config, on_progress=bar.update if bar else None, cancel=CancelToken())
    finally:
        if bar is not None:
            bar.close()
    if not args.no_save:
        try:
            BenchHistory().append(result)
        except StorageError as exc:
            print(f"npu-studio: warning: {exc.user_text()}", file=sys.stderr)
    if args.json:
        print_json(result.as_dict())
    elif args.csv:
        write_machine(printable(bench_csv_text([result])))  # UTF-8 like JSON; no escape sequence reaches a terminal
    else:
        print(format_run(result))
    return 0 if any(r.ok for r in result.results) else 1

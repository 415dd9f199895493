"""The memory roofline of decoding: how many bytes one decoded token reads, and how fast these cores read.

Decoding one token of a small language model on a CPU is bound by memory, not arithmetic: every weight the
graph uses is read once per token (the activations are one row), so tokens/s can be no higher than the
read bandwidth divided by the bytes a token reads. Both sides are measured here, not guessed:

* `decode_bytes(model_dir)` walks the model's ONNX graph (initializers and the nodes that read them) and
  counts what one decode step reads: every weight read whole (MatMulNBits blocks, scales and zero points,
  fp32 MatMul weights, norms), the one row a lookup reads (the embedding rows of `Gather` /
  `GatherBlockQuantized`, the rotary cos/sin rows of `GroupQueryAttention`), and the KV cache, whose
  bytes per position come from the graph's past_key_values inputs (a token at position p reads p of them).
  A weight reached through a constant Reshape/Unsqueeze/Squeeze/Cast/Transpose counts through what reads
  the result (the demo model's int8 embedding table is both the lookup's table and the LM head's weight:
  read whole, once).
* `read_bandwidth(threads)` is a STREAM-like read probe: `threads` threads each stream their share of a
  buffer many times the size of the last-level cache through a numpy reduction that releases the GIL,
  best of a few repetitions (as STREAM reports its best time), for a few kernels; the fastest counts.

The roofline fraction is bytes per token x tokens/s / bandwidth: 100 % means the decoder reads memory as
fast as these cores can.
"""

from __future__ import annotations

import threading
import time
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

import numpy as np

# Operators that pass a constant through (folded at session creation): their consumers decide how it is read.
_PASS_THROUGH = {"Reshape", "Unsqueeze", "Squeeze", "Cast", "Transpose", "Identity", "Flatten"}
# (operator, input index) read one row per token: lookups by the token id or by its position.
_ROW_READS = {("Gather", 0), ("GatherBlockQuantized", 0), ("GatherBlockQuantized", 2),
              ("GatherBlockQuantized", 3), ("GroupQueryAttention", 7), ("GroupQueryAttention", 8)}  # fmt: skip
_ELEMENT_BYTES = {1: 4, 10: 2, 16: 2, 11: 8}  # float, float16, bfloat16, double


@dataclass(frozen=True)
class DecodeBytes:
    """What one decode step reads, from the model's files."""

    whole: int  # weights read whole every token
    rows: int  # the rows of lookup tables one token reads
    tables: int  # the full size of those lookup tables (not read per token)
    kv_per_position: int  # KV cache bytes per position held
    file_bytes: int  # all initializers together (model.onnx + its external data)

    def per_token(self, positions: float) -> float:
        """Bytes read by one decode step with `positions` tokens in the KV cache."""
        return self.whole + self.rows + self.kv_per_position * positions


def _tensor_bytes(tensor: object) -> int:
    from onnx import TensorProto, helper

    assert isinstance(tensor, TensorProto)
    for entry in tensor.external_data:
        if entry.key == "length":
            return int(entry.value)
    if tensor.raw_data:
        return len(tensor.raw_data)
    count = int(np.prod(tensor.dims)) if tensor.dims else 1
    return count * np.dtype(helper.tensor_dtype_to_np_dtype(tensor.data_type)).itemsize


def decode_bytes(model_dir: Path, filename: str = "model.onnx") -> DecodeBytes:
    """Count what one decode step of the ONNX decoder in `model_dir` reads (the `onnx` package reads the
    graph only: the external weights are not loaded)."""
    import onnx

    model = onnx.load(str(model_dir / filename), load_external_data=False)
    graph = model.graph
    sizes = {t.name: _tensor_bytes(t) for t in graph.initializer}
    dims = {t.name: list(t.dims) for t in graph.initializer}
    consumers: dict[str, list[tuple[str, int, list[str]]]] = defaultdict(list)
    for node in graph.node:
        for index, name in enumerate(node.input):
            if name:
                consumers[name].append((node.op_type, index, list(node.output)))

    def reads(name: str, depth: int = 0) -> set[str]:
        """How the tensor `name` is read: "row" (one row per token) and/or "whole"."""
        found: set[str] = set()
        for op, index, outputs in consumers.get(name, []):
            if op in _PASS_THROUGH and index == 0 and depth < 8:
                for output in outputs:
                    found |= reads(output, depth + 1)
            elif (op, index) in _ROW_READS:
                found.add("row")
            else:
                found.add("whole")
        return found

    whole = rows = tables = 0
    for name, size in sizes.items():
        how = reads(name)
        if "whole" in how:
            whole += size
        elif "row" in how:
            tables += size
            first = dims[name][0] if dims[name] else 1
            rows += size // max(first, 1)
    kv = 0
    for value in graph.input:
        if value.name.startswith("past_key_values."):
            shape = value.type.tensor_type.shape.dim
            element = _ELEMENT_BYTES.get(value.type.tensor_type.elem_type, 4)
            fixed = [d.dim_value for i, d in enumerate(shape) if i not in (0, 2)]  # not batch, not positions
            if any(v == 0 for v in fixed):  # a symbolic head size: take it from genai_config.json
                fixed = [v for v in fixed if v] + [_head_size(model_dir)]
            kv += element * int(np.prod(fixed))
    return DecodeBytes(whole, rows, tables, kv, sum(sizes.values()))


def _head_size(model_dir: Path) -> int:
    import json

    config = json.loads((model_dir / "genai_config.json").read_text(encoding="utf-8"))
    return int(config["model"]["decoder"]["head_size"])


# --------------------------------------------------------------------------------------------
# STREAM-like read bandwidth
# --------------------------------------------------------------------------------------------


def last_level_cache_bytes() -> int:
    """The largest CPU cache this machine reports (Linux sysfs), 32 MiB when it says nothing."""
    best = 0
    for size_file in Path("/sys/devices/system/cpu/cpu0/cache").glob("index*/size"):
        text = size_file.read_text(encoding="utf-8").strip().upper()
        scale = {"K": 2**10, "M": 2**20, "G": 2**30}.get(text[-1:], 1)
        try:
            best = max(best, int(text.rstrip("KMG")) * scale)
        except ValueError:
            continue
    return best or 32 * 2**20


@dataclass(frozen=True)
class Bandwidth:
    bytes_per_s: float
    kernel: str
    buffer_bytes: int
    threads: int


def _kernels() -> dict[str, object]:
    # Each reads every byte of its chunk once and returns a small result; numpy releases the GIL inside.
    return {
        "max(float32)": lambda chunk: np.max(chunk.view(np.float32)),
        "bitwise_or.reduce(uint64)": lambda chunk: np.bitwise_or.reduce(chunk.view(np.uint64)),
        "count_nonzero(uint64)": lambda chunk: np.count_nonzero(chunk.view(np.uint64)),
    }


def read_bandwidth(threads: int = 2, buffer_bytes: int | None = None, repeats: int = 5) -> Bandwidth:
    """Best read bandwidth of `threads` threads streaming a buffer >= 16x the last-level cache (>= 512 MiB)."""
    size = buffer_bytes or max(16 * last_level_cache_bytes(), 512 * 2**20)
    size -= size % (64 * threads)
    buffer = np.empty(size, dtype=np.uint8)
    buffer.view(np.float32)[:] = 1.0  # touch every page: the probe measures reads, not page faults
    chunks = np.array_split(buffer, threads)
    best = Bandwidth(0.0, "", size, threads)
    for name, kernel in _kernels().items():
        run = kernel  # bound for the threads below
        barrier = threading.Barrier(threads + 1)

        def work(chunk: np.ndarray, run: object = run, barrier: threading.Barrier = barrier) -> None:
            for _ in range(repeats + 1):
                barrier.wait()
                run(chunk)  # type: ignore[operator]
                barrier.wait()

        workers = [threading.Thread(target=work, args=(chunk,), daemon=True) for chunk in chunks]
        for worker in workers:
            worker.start()
        times = []
        for _ in range(repeats + 1):  # the first pass warms the kernel up
            barrier.wait()
            started = time.perf_counter()
            barrier.wait()
            times.append(time.perf_counter() - started)
        for worker in workers:
            worker.join()
        rate = size / min(times[1:])
        if rate > best.bytes_per_s:
            best = Bandwidth(rate, name, size, threads)
    del buffer, chunks
    return best

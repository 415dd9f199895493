"""How many threads the CPU decoder runs on when the model folder does not say.

Left unset, onnxruntime-genai's CPU session decodes on one thread here (2 cores: 155 tok/s, the same as
`intra_op_num_threads: 1`; with 2: ~205 tok/s on the demo model, tests/bench/bench_chat_peers.py). So
NPU Studio asks for one thread per physical core it may run on (`engines.types.physical_cores`: what
ONNX Runtime recommends; a second hyper-thread per core only contends for the same units), unless the
folder's own `genai_config.json` sets `intra_op_num_threads` (config_policy.py caps it at this
machine's CPUs).
"""

from __future__ import annotations

import json

THREADS_KEY = "intra_op_num_threads"


def threads_overlay(threads: int) -> str:
    """The genai config overlay that sets the decoder's intra-op threads."""
    return json.dumps({"model": {"decoder": {"session_options": {THREADS_KEY: threads}}}})

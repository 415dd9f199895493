"""Put the GGUF's own quantized weights, exactly, into the onnxruntime-genai chat model.

The model builder re-quantizes the (already quantized, then dequantized) GGUF weights: a second rounding
that cost ~20 points of next-token agreement with the fp32 model. The GGUF's blocks fit ONNX Runtime's
``MatMulNBits`` (blocks of 32 along K) without any rounding:

* Q4_1 (the projections): ``w = d*q + m``, q in 0..15. ``MatMulNBits`` computes ``(q - zp) * scale``; a
  float zero point ``-m/d`` would be exact but sends the CPU kernel down a dequantize-everything path
  (~50x slower at decode). So the node keeps the fast uint4 form ``d*(q - 8)`` and the rest,
  ``c = 8d + m`` per (block, column), is added by a small fp32 product:
  ``y = x·W_q + blocksum(x)·C`` with ``blocksum(x)`` (one value per 32 inputs) shared by the projections
  that read the same input ([batch, sequence, K] inputs, the builder's layout).
* Q8_0 (token embeddings, tied to the LM head): ``w = d*q``, q in -128..127: uint8 ``q + 128`` with the
  default zero point 128, exact.

``rewrite`` checks every rewritten weight against the fp32 weights the builder started from (the GGUF
dequantized by transformers) and fails on any difference.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

BLOCK = 32
Q4_1_BYTES = 20  # fp16 d, fp16 m, 16 bytes of nibbles
Q8_0_BYTES = 34  # fp16 d, 32 int8
MAX_WEIGHT_DIFF = 1e-6

_LAYER = re.compile(r"^model\.layers\.(\d+)\.(attn|mlp)\.(\w+)\.MatMul\.weight_")
# Q4_1 projections whose activations stay fp32 (MatMulNBits accuracy_level 1) instead of the CPU's int8
# per block: the q/k/v projections of every layer and all of the first layers. Next-token agreement with
# fp32 97.3 % -> 98.1 % (llama.cpp 97.7 %) for ~4 % of decode (see build_demo_models.py).
FLOAT_ACTIVATION_PROJECTIONS = frozenset({"qkv_proj"})
FLOAT_ACTIVATION_LAYERS = 4
FLOAT_ACTIVATIONS = 1


def float_activations(prefix: str, bits: int) -> bool:
    """Whether the rewritten node for builder prefix `prefix` keeps fp32 activations. 8-bit nodes never do:
    at accuracy level 1 they dequantize their weights on every call."""
    match = _LAYER.match(prefix)
    if bits != 4 or match is None:
        return False
    return match.group(3) in FLOAT_ACTIVATION_PROJECTIONS or int(match.group(1)) < FLOAT_ACTIVATION_LAYERS


class WeightsError(RuntimeError):
    """The GGUF's weights cannot be placed exactly into the ONNX model."""


@dataclass(frozen=True)
class Packed:
    """One MatMulNBits weight: B [N, K/32, bytes], scales [N, K/32], zero points, optional correction."""

    bits: int
    data: np.ndarray
    scales: np.ndarray
    zero_points: np.ndarray
    correction: np.ndarray | None  # [K/32, N] fp32, Q4_1 only
    dequantized: np.ndarray  # [N, K] fp32, what the ONNX node plus correction computes with


def _blocks(raw: np.ndarray, rows: int, block_bytes: int) -> np.ndarray:
    data = np.ascontiguousarray(raw).view(np.uint8).reshape(rows, -1)
    if data.shape[1] % block_bytes:
        raise WeightsError(f"row of {data.shape[1]} bytes is not whole blocks of {block_bytes}")
    return data.reshape(rows, -1, block_bytes)


def pack_q4_1(raw: np.ndarray, rows: int) -> Packed:
    blocks = _blocks(raw, rows, Q4_1_BYTES)
    d = blocks[:, :, 0:2].copy().view(np.float16)[:, :, 0].astype(np.float32)
    m = blocks[:, :, 2:4].copy().view(np.float16)[:, :, 0].astype(np.float32)
    nibbles = blocks[:, :, 4:]
    q = np.concatenate([nibbles & 0x0F, nibbles >> 4], axis=2)  # ggml: low nibbles are elements 0..15
    data = (q[:, :, 0::2] | (q[:, :, 1::2] << 4)).astype(np.uint8)  # MatMulNBits: element 2i low, 2i+1 high
    n_blocks = d.shape[1]
    zero_points = np.full((rows, (n_blocks + 1) // 2), 0x88, dtype=np.uint8)
    correction = (8.0 * d + m).astype(np.float32)
    dequantized = d[:, :, None] * (q.astype(np.float32) - 8.0) + correction[:, :, None]
    return Packed(4, data, d, zero_points, np.ascontiguousarray(correction.T), dequantized.reshape(rows, -1))


def pack_q8_0(raw: np.ndarray, rows: int) -> Packed:
    blocks = _blocks(raw, rows, Q8_0_BYTES)
    d = blocks[:, :, 0:2].copy().view(np.float16)[:, :, 0].astype(np.float32)
    q = blocks[:, :, 2:].copy().view(np.int8)
    data = (q.astype(np.int16) + 128).astype(np.uint8)
    zero_points = np.full(d.shape, 128, dtype=np.uint8)
    dequantized = d[:, :, None] * q.astype(np.float32)
    return Packed(8, data, d, zero_points, None, dequantized.reshape(rows, -1))


def unpermute_rows(rows: int, heads: int) -> np.ndarray:
    """llama.cpp stores Q/K rows permuted for its rotary layout; transformers undoes it on load (and so the
    builder's graph expects the Hugging Face order). Returns GGUF row indices in Hugging Face order."""
    index = np.arange(rows)
    half = rows // heads // 2
    return index.reshape(heads, half, 2).swapaxes(2, 1).reshape(rows)


def concat(parts: list[Packed]) -> Packed:
    corrections = [p.correction for p in parts]
    return Packed(
        parts[0].bits,
        np.concatenate([p.data for p in parts]),
        np.concatenate([p.scales for p in parts]),
        np.concatenate([p.zero_points for p in parts]),
        None if any(c is None for c in corrections) else np.concatenate(corrections, axis=1),  # type: ignore[arg-type]
        np.concatenate([p.dequantized for p in parts]),
    )


def take_rows(packed: Packed, order: np.ndarray) -> Packed:
    return Packed(
        packed.bits,
        packed.data[order],
        packed.scales[order],
        packed.zero_points[order],
        None if packed.correction is None else packed.correction[:, order],
        packed.dequantized[order],
    )


class GgufWeights:
    """The GGUF's quantized linear weights by ONNX initializer prefix (builder naming)."""

    def __init__(self, path: Path, heads: int, kv_heads: int) -> None:
        import gguf

        self.reader = gguf.GGUFReader(str(path))
        self.tensors = {t.name: t for t in self.reader.tensors}
        self.heads = heads
        self.kv_heads = kv_heads

    def tensor(self, name: str) -> Packed:
        tensor = self.tensors.get(name)
        if tensor is None:
            raise WeightsError(f"the GGUF has no tensor {name!r}")
        rows = int(tensor.shape[1])  # ggml shape is [K, N]: K contiguous
        kind = tensor.tensor_type.name
        if kind == "Q4_1":
            return pack_q4_1(tensor.data, rows)
        if kind == "Q8_0":
            return pack_q8_0(tensor.data, rows)
        raise WeightsError(f"GGUF tensor {name} is {kind}; only Q4_1 and Q8_0 are placed exactly")

    def for_prefix(self, prefix: str) -> Packed:
        """`prefix` is the builder's initializer prefix, e.g. ``model.layers.3.attn.qkv_proj.MatMul.weight_``."""
        if prefix == "lm_head.MatMul.weight_":
            return self.tensor("output.weight" if "output.weight" in self.tensors else "token_embd.weight")
        match = _LAYER.match(prefix)
        if match is None:
            raise WeightsError(f"no GGUF tensor is known for the ONNX weight {prefix}*")
        layer, proj = match.group(1), match.group(3)
        blk = f"blk.{layer}."
        if proj == "qkv_proj":
            q = self.tensor(blk + "attn_q.weight")
            k = self.tensor(blk + "attn_k.weight")
            v = self.tensor(blk + "attn_v.weight")
            q = take_rows(q, unpermute_rows(q.scales.shape[0], self.heads))
            k = take_rows(k, unpermute_rows(k.scales.shape[0], self.kv_heads))
            return concat([q, k, v])
        names = {"o_proj": "attn_output", "gate_proj": "ffn_gate", "up_proj": "ffn_up", "down_proj": "ffn_down"}
        if proj not in names:
            raise WeightsError(f"no GGUF tensor is known for the ONNX weight {prefix}*")
        packed = self.tensor(blk + names[proj] + ".weight")
        if proj in {"q_proj", "k_proj"}:  # unfused attention (not built today)
            packed = take_rows(packed, unpermute_rows(packed.scales.shape[0], self.heads))
        return packed


def reference_weight(reference: Mapping[str, np.ndarray], prefix: str) -> np.ndarray:
    """The fp32 Hugging Face weight [N, K] for a builder prefix."""
    if prefix == "lm_head.MatMul.weight_":
        return reference.get("lm_head.weight", reference["model.embed_tokens.weight"])
    match = _LAYER.match(prefix)
    assert match is not None
    layer, group, proj = match.groups()
    base = f"model.layers.{layer}.{'self_attn' if group == 'attn' else 'mlp'}."
    if proj == "qkv_proj":
        return np.concatenate([reference[base + f"{p}_proj.weight"] for p in "qkv"])
    return reference[base + f"{proj}.weight"]


def rewrite(
    model_path: Path, gguf: GgufWeights, reference: Mapping[str, np.ndarray], log: Callable[[str], None]
) -> dict[str, Any]:
    """Replace every MatMulNBits weight of `model_path` (and the quantized embedding sharing the LM head's)
    by the GGUF's exact blocks; Q4_1 nodes get their fp32 block-sum correction. Saves in place."""
    import onnx
    from onnx import helper, numpy_helper

    model = onnx.load(str(model_path))
    graph = model.graph
    inits = {init.name: init for init in graph.initializer}
    replaced: dict[str, onnx.TensorProto] = {}
    nodes: list[onnx.NodeProto] = []
    block_sums: dict[str, str] = {}
    shapes: dict[int, str] = {}
    new_inits: list[onnx.TensorProto] = []
    worst = 0.0
    counts = {4: 0, 8: 0}

    # gate and up read the same input: one node of twice the width, then a Split (fewer, larger kernels
    # and one offset product instead of two: decode is bound by per-node overhead at this size).
    ups = {n.input[0]: n for n in graph.node if n.op_type == "MatMulNBits" and "/mlp/up_proj/" in n.name}
    fused_up: dict[str, Any] = {}
    for n in graph.node:
        if n.op_type == "MatMulNBits" and "/mlp/gate_proj/" in n.name and n.input[0] in ups:
            fused_up[n.name] = ups[n.input[0]]
    skipped = {up.name for up in fused_up.values()}

    def checked(prefix: str) -> tuple[Packed, np.ndarray]:
        packed = gguf.for_prefix(prefix)
        expected = np.asarray(reference_weight(reference, prefix), dtype=np.float32)
        if expected.shape != packed.dequantized.shape:
            raise WeightsError(f"{prefix}: GGUF weight {packed.dequantized.shape}, model weight {expected.shape}")
        diff = float(np.max(np.abs(expected - packed.dequantized)))
        if diff > MAX_WEIGHT_DIFF:
            raise WeightsError(f"{prefix}: the GGUF's blocks differ from the fp32 weights by up to {diff:g}")
        counts[packed.bits] += 1
        return packed, expected

    def prefix_of(weight_name: str) -> str:
        return weight_name[: weight_name.rindex("weight_") + len("weight_")]

    for node in graph.node:
        if node.op_type != "MatMulNBits":
            nodes.append(node)
            continue
        if node.name in skipped:
            continue
        split_into: list[str] = []
        sizes: list[int] = []
        prefix = prefix_of(node.input[1])
        packed, expected = checked(prefix)
        if node.name in fused_up:
            up = fused_up[node.name]
            up_packed, up_expected = checked(prefix_of(up.input[1]))
            if up_packed.bits != packed.bits:
                raise WeightsError(f"{prefix}: gate and up projections are stored with different types")
            split_into = [node.output[0], up.output[0]]
            sizes = [expected.shape[0], up_expected.shape[0]]
            packed, expected = concat([packed, up_packed]), np.concatenate([expected, up_expected])
            prefix = prefix.replace(".gate_proj.", ".gate_up_proj.")
            node.name = node.name.replace("/gate_proj/", "/gate_up_proj/")
            node.output[0] = f"{node.output[0]}/gate_up"
            for attr in node.attribute:
                if attr.name == "N":
                    attr.i = expected.shape[0]
        worst = max(worst, float(np.max(np.abs(expected - packed.dequantized))))
        k = expected.shape[1]
        names = (f"{prefix}Q{packed.bits}G{BLOCK}", f"{prefix}scale", f"{prefix}zp")
        for name, array in zip(names, (packed.data, packed.scales, packed.zero_points), strict=True):
            replaced[name] = numpy_helper.from_array(np.ascontiguousarray(array), name)
        for old in node.input[1:4]:
            replaced.setdefault(old, inits[old])  # kept only if still used (the embedding's Reshape)
        del node.input[1:]
        # Without a zero-point input MatMulNBits uses 2^(bits-1), exactly the one written: the kernel then
        # skips a per-block load and multiply (~4 % faster decode). The tensor stays for the embedding lookup.
        node.input.extend(names[:2])
        for attr in node.attribute:
            if attr.name == "bits":
                attr.i = packed.bits
            if attr.name == "accuracy_level" and float_activations(prefix, packed.bits):
                attr.i = FLOAT_ACTIVATIONS
        node.name = re.sub(r"_Q\d$", f"_Q{packed.bits}", node.name)
        if packed.correction is None:
            if split_into:
                raise WeightsError(f"{prefix}: only Q4_1 gate and up projections are fused")
            nodes.append(node)
            continue
        source, target = node.input[0], node.output[0]
        if source not in block_sums:
            # Reshape (a view) + ReduceSum: ~3 % faster decode than a MatMul with a block-indicator matrix.
            if not shapes:
                new_inits.append(numpy_helper.from_array(np.array([-1], np.int64), "/gguf/last_axis"))
            if k not in shapes:
                shapes[k] = f"/gguf/blocks_of_{k}"
                new_inits.append(numpy_helper.from_array(np.array([0, 0, k // BLOCK, BLOCK], np.int64), shapes[k]))
            block_sums[source] = f"{source}/block_sum"
            nodes.append(
                helper.make_node("Reshape", [source, shapes[k]], [f"{source}/blocks"], name=f"{node.name}/Blocks")
            )
            nodes.append(
                helper.make_node(
                    "ReduceSum",
                    [f"{source}/blocks", "/gguf/last_axis"],
                    [block_sums[source]],
                    name=f"{node.name}/BlockSum",
                    keepdims=0,
                )
            )
        corr_name = f"{prefix}block_offset"
        new_inits.append(numpy_helper.from_array(packed.correction, corr_name))
        node.output[0] = f"{target}/int4"
        nodes.append(node)
        nodes.append(
            helper.make_node(
                "MatMul", [block_sums[source], corr_name], [f"{target}/offset"], name=f"{node.name}/Offset"
            )
        )
        nodes.append(
            helper.make_node("Add", [f"{target}/int4", f"{target}/offset"], [target], name=f"{node.name}/AddOffset")
        )
        if split_into:
            halves = f"{prefix}split"
            new_inits.append(numpy_helper.from_array(np.array(sizes, np.int64), halves))
            nodes.append(helper.make_node("Split", [target, halves], split_into, name=f"{node.name}/Split", axis=-1))

    # The quantized embedding lookup reads the LM head's weights (tied): point it at the new ones.
    for node in nodes:
        if node.op_type == "GatherBlockQuantized":
            _retarget_embedding(node, nodes, replaced)
    used = {name for node in nodes for name in node.input}
    kept = [init for init in graph.initializer if init.name not in replaced and init.name in used]
    kept += [init for name, init in replaced.items() if name in used and init.name == name]
    del graph.node[:]
    graph.node.extend(nodes)
    del graph.initializer[:]
    graph.initializer.extend(kept + new_inits)
    floats = sum(
        1 for n in nodes if n.op_type == "MatMulNBits"
        for a in n.attribute if a.name == "accuracy_level" and a.i == FLOAT_ACTIVATIONS
    )  # fmt: skip
    data_name = model_path.name + ".data"
    (model_path.parent / data_name).unlink(missing_ok=True)
    onnx.save(model, str(model_path), save_as_external_data=True, all_tensors_to_one_file=True, location=data_name)
    (model_path.parent / data_name).chmod(0o644)  # onnx writes it owner-only; the builder's files are 0644
    log(f"  placed the GGUF's weights exactly: {counts[4]} Q4_1 and {counts[8]} Q8_0 projections, max diff {worst:g}"
        f"; {floats} with fp32 activations")  # fmt: skip
    return {"q4_1_projections": counts[4], "q8_0_projections": counts[8], "max_weight_diff": worst,
            "fp32_activation_projections": floats}  # fmt: skip


def _retarget_embedding(gather: Any, nodes: list[Any], replaced: Mapping[str, Any]) -> None:
    producer = {out: node for node in nodes for out in node.output}
    data = gather.input[0]
    source = producer.get(data)
    if source is not None and source.op_type == "Reshape":
        source.input[0] = "lm_head.MatMul.weight_Q8G32"
    elif data != "lm_head.MatMul.weight_Q8G32":
        raise WeightsError(f"the embedding lookup reads {data!r}, not the LM head's weights")
    gather.input[2] = "lm_head.MatMul.weight_scale"
    if len(gather.input) > 3:
        gather.input[3] = "lm_head.MatMul.weight_zp"
    if "lm_head.MatMul.weight_Q8G32" not in replaced:
        raise WeightsError("the LM head was not rewritten, so the embedding cannot share its weights")

"""The chat recipe's exact placement of GGUF blocks into MatMulNBits (assets/recipes/chat_gguf_weights.py)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest

gguf = pytest.importorskip("gguf")
onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

MODULE = Path(__file__).resolve().parents[2] / "assets" / "recipes" / "chat_gguf_weights.py"
K, N_DOWN, N_VOCAB = 96, 64, 40


def load_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("chat_gguf_weights", MODULE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is created
    spec.loader.exec_module(module)
    return module


def builder_like_model(path: Path) -> None:
    """One projection and the LM head as the genai builder names them, with placeholder weights."""
    nodes, inits = [], []
    for prefix, node_name, n, bits, output in (
        ("model.layers.0.mlp.down_proj.MatMul.weight_", "/model/layers.0/mlp/down_proj/MatMul_Q8", N_DOWN, 8, "y"),
        ("lm_head.MatMul.weight_", "/lm_head/MatMul_Q4", N_VOCAB, 4, "logits"),
        ("model.layers.0.mlp.gate_proj.MatMul.weight_", "/model/layers.0/mlp/gate_proj/MatMul_Q4", N_DOWN, 4, "gate"),
        ("model.layers.0.mlp.up_proj.MatMul.weight_", "/model/layers.0/mlp/up_proj/MatMul_Q4", N_DOWN, 4, "up"),
    ):
        blocks = K // 32
        names = [f"{prefix}Q{bits}G32", f"{prefix}scale", f"{prefix}zp"]
        inits += [
            numpy_helper.from_array(np.zeros((n, blocks, 32 * bits // 8), np.uint8), names[0]),
            numpy_helper.from_array(np.ones((n, blocks), np.float32), names[1]),
            numpy_helper.from_array(np.zeros((n, blocks if bits == 8 else (blocks + 1) // 2), np.uint8), names[2]),
        ]
        nodes.append(
            helper.make_node(
                "MatMulNBits",
                ["x", *names],
                [output],
                name=node_name,
                domain="com.microsoft",
                K=K,
                N=n,
                bits=bits,
                block_size=32,
                accuracy_level=1,
            )
        )
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, K])],
        [
            helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 1, N_DOWN]),
            helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, 1, N_VOCAB]),
            helper.make_tensor_value_info("gate", TensorProto.FLOAT, [1, 1, N_DOWN]),
            helper.make_tensor_value_info("up", TensorProto.FLOAT, [1, 1, N_DOWN]),
        ],
        inits,
    )
    opsets = [helper.make_opsetid("", 21), helper.make_opsetid("com.microsoft", 1)]
    model = helper.make_model(graph, opset_imports=opsets)
    onnx.save(model, str(path))


@pytest.fixture()
def quantized(tmp_path: Path) -> tuple[Path, dict[str, np.ndarray]]:
    rng = np.random.default_rng(7)
    down = rng.normal(0.1, 0.05, (N_DOWN, K)).astype(np.float32)  # offset rows: m is far from -8d
    gate = rng.normal(-0.1, 0.05, (N_DOWN, K)).astype(np.float32)
    up = rng.normal(0.0, 0.05, (N_DOWN, K)).astype(np.float32)
    embed = rng.normal(0.0, 0.05, (N_VOCAB, K)).astype(np.float32)
    writer = gguf.GGUFWriter(str(tmp_path / "tiny.gguf"), "llama")
    reference = {}
    for name, key, weights, kind in (
        ("blk.0.ffn_down.weight", "model.layers.0.mlp.down_proj.weight", down, gguf.GGMLQuantizationType.Q4_1),
        ("token_embd.weight", "model.embed_tokens.weight", embed, gguf.GGMLQuantizationType.Q8_0),
        ("blk.0.ffn_gate.weight", "model.layers.0.mlp.gate_proj.weight", gate, gguf.GGMLQuantizationType.Q4_1),
        ("blk.0.ffn_up.weight", "model.layers.0.mlp.up_proj.weight", up, gguf.GGMLQuantizationType.Q4_1),
    ):
        raw = gguf.quants.quantize(weights, kind)
        writer.add_tensor(name, raw, raw_dtype=kind)
        reference[key] = gguf.quants.dequantize(raw, kind).astype(np.float32)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return tmp_path / "tiny.gguf", reference


def rewritten_builder_like(
    tmp_path: Path, quantized: tuple[Path, dict[str, np.ndarray]], accuracy_level: int | None = None
) -> tuple[Path, dict[str, Any]]:
    """The builder-like model (with `accuracy_level` on every node, if given) rewritten; its path and report."""
    exact = load_module()
    gguf_path, reference = quantized
    model_path = tmp_path / "model.onnx"
    builder_like_model(model_path)
    if accuracy_level is not None:
        model = onnx.load(str(model_path))
        for node in model.graph.node:
            for attr in node.attribute:
                if attr.name == "accuracy_level":
                    attr.i = accuracy_level
        onnx.save(model, str(model_path))
    report = exact.rewrite(model_path, exact.GgufWeights(gguf_path, 1, 1), reference, lambda message: None)
    return model_path, report


def matmul_attribute(model_path: Path, name: str) -> dict[str, int]:
    """Each MatMulNBits node's integer attribute `name`, by node name."""
    return {n.name: next(a.i for a in n.attribute if a.name == name)
            for n in onnx.load(str(model_path)).graph.node if n.op_type == "MatMulNBits"}  # fmt: skip


def test_rewritten_nodes_compute_with_the_gguf_weights_exactly(
    tmp_path: Path, quantized: tuple[Path, dict[str, np.ndarray]]
) -> None:
    _, reference = quantized
    model_path, report = rewritten_builder_like(tmp_path, quantized)
    assert report == {
        "q4_1_projections": 3,
        "q8_0_projections": 1,
        "max_weight_diff": 0.0,
        "fp32_activation_projections": 3,  # the builder-like graph asks for level 1 everywhere
    }

    assert matmul_attribute(model_path, "bits") == {  # gate and up, reading the same input, are one node
        "/model/layers.0/mlp/down_proj/MatMul_Q4": 4,
        "/lm_head/MatMul_Q8": 8,
        "/model/layers.0/mlp/gate_up_proj/MatMul_Q4": 4,
    }
    x = np.random.default_rng(1).normal(0, 1, (1, 1, K)).astype(np.float32)
    session = ort.InferenceSession(str(model_path), providers=["CPUExecutionProvider"])
    y, logits, gate, up = session.run(["y", "logits", "gate", "up"], {"x": x})
    np.testing.assert_allclose(y, x @ reference["model.layers.0.mlp.down_proj.weight"].T, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(logits, x @ reference["model.embed_tokens.weight"].T, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(gate, x @ reference["model.layers.0.mlp.gate_proj.weight"].T, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(up, x @ reference["model.layers.0.mlp.up_proj.weight"].T, rtol=1e-5, atol=1e-5)


def test_fp32_activations_go_to_qkv_and_the_first_layers_only() -> None:
    exact = load_module()
    assert exact.float_activations("model.layers.0.mlp.down_proj.MatMul.weight_", 4)
    assert exact.float_activations("model.layers.3.mlp.gate_up_proj.MatMul.weight_", 4)
    assert exact.float_activations("model.layers.29.attn.qkv_proj.MatMul.weight_", 4)
    assert not exact.float_activations("model.layers.4.mlp.down_proj.MatMul.weight_", 4)
    assert not exact.float_activations("model.layers.12.attn.o_proj.MatMul.weight_", 4)
    assert not exact.float_activations("model.layers.0.mlp.down_proj.MatMul.weight_", 8)  # would dequantize
    assert not exact.float_activations("lm_head.MatMul.weight_", 8)


def test_rewritten_nodes_take_the_chosen_accuracy_level(
    tmp_path: Path, quantized: tuple[Path, dict[str, np.ndarray]]
) -> None:
    _, reference = quantized
    model_path, report = rewritten_builder_like(tmp_path, quantized, accuracy_level=4)  # the builder's CPU default
    assert report["fp32_activation_projections"] == 2
    # Layer 0's Q4_1 projections in fp32; the 8-bit LM head keeps int8 activations.
    assert matmul_attribute(model_path, "accuracy_level") == {
        "/model/layers.0/mlp/down_proj/MatMul_Q4": 1,
        "/lm_head/MatMul_Q8": 4,
        "/model/layers.0/mlp/gate_up_proj/MatMul_Q4": 1,
    }
    x = np.random.default_rng(1).normal(0, 1, (1, 1, K)).astype(np.float32)
    session = ort.InferenceSession(str(model_path), providers=["CPUExecutionProvider"])
    (y,) = session.run(["y"], {"x": x})
    np.testing.assert_allclose(y, x @ reference["model.layers.0.mlp.down_proj.weight"].T, rtol=1e-5, atol=1e-5)


def test_weights_that_differ_from_the_fp32_model_are_refused(
    tmp_path: Path, quantized: tuple[Path, dict[str, np.ndarray]]
) -> None:
    exact = load_module()
    gguf_path, reference = quantized
    model_path = tmp_path / "model.onnx"
    builder_like_model(model_path)
    reference["model.layers.0.mlp.down_proj.weight"] = reference["model.layers.0.mlp.down_proj.weight"] + 1e-3
    with pytest.raises(exact.WeightsError, match="down_proj.*differ from the fp32 weights"):
        exact.rewrite(model_path, exact.GgufWeights(gguf_path, 1, 1), reference, lambda message: None)


def test_llama_cpp_rotary_row_order_is_undone() -> None:
    exact = load_module()
    # Two heads of 4 rows: llama.cpp interleaves each head's halves (0 2 1 3); Hugging Face keeps them.
    order = exact.unpermute_rows(8, 2)
    assert order.tolist() == [0, 2, 1, 3, 4, 6, 5, 7]

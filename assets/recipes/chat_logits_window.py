"""Give the chat model's LM head a window: the logits of the last positions, not only of the last one.

The builder's `prune_lm_head=true` computes the LM head for the last position only (Gather index -1): the only
row plain generation reads, and the prompt's first token comes ~35 % sooner than with every position's logits.
But a graph whose logits have one row cannot verify speculative drafts: prompt-lookup decoding
(onnxruntime-genai's n-gram speculation) runs the model on the last token plus up to 16 drafted ones and reads
one row per token, and onnxruntime-genai refuses a model whose logits output is [batch, 1, vocab].

`add_window(model_path, rows)` replaces the pruning Gather + Unsqueeze with a Slice of the last `rows`
positions (all of them when there are fewer) and pads the LM head's output at the front with zeros back to
[batch, sequence_length, vocab]. So the last `rows` rows are exactly the unpruned model's (each row of the LM
head depends only on its own position), a draft verification of up to rows - 1 drafts reads real logits, and a
prompt still pays the LM head for `rows` positions at most (plus writing zeros for the rest: onnxruntime-genai
allocates logits for every input position of a model whose logits are not [batch, 1, vocab]).
"""

from __future__ import annotations

from pathlib import Path

PRUNE_GATHER = "/lm_head/prune/Gather"
PRUNE_UNSQUEEZE = "/lm_head/prune/Unsqueeze"
# onnxruntime-genai verifies at most 16 drafted tokens a step (its max_draft_tokens ceiling) plus the last token.
WINDOW_ROWS = 17


class WindowError(RuntimeError):
    """The graph does not have the builder's pruned LM head this step rewrites."""


def add_window(model_path: Path, rows: int = WINDOW_ROWS) -> dict[str, int]:
    """Rewrite the ONNX decoder at `model_path` in place (its external weights are not touched)."""
    import onnx
    from onnx import TensorProto, helper

    model = onnx.load(str(model_path), load_external_data=False)
    graph = model.graph
    nodes = {node.name: node for node in graph.node}
    gather, unsqueeze = nodes.get(PRUNE_GATHER), nodes.get(PRUNE_UNSQUEEZE)
    if gather is None or unsqueeze is None or gather.op_type != "Gather" or unsqueeze.op_type != "Unsqueeze":
        raise WindowError(f"{model_path} has no pruned LM head ({PRUNE_GATHER} + {PRUNE_UNSQUEEZE})")
    hidden, selected = gather.input[0], unsqueeze.output[0]
    producer = next((node for node in graph.node if "logits" in node.output), None)
    if producer is None:
        raise WindowError(f"{model_path} has no node producing 'logits'")
    producer.output[list(producer.output).index("logits")] = "/lm_head/window/logits"

    const = helper.make_tensor
    graph.initializer.extend([
        const("/lm_head/window/starts", TensorProto.INT64, [1], [-rows]),
        const("/lm_head/window/ends", TensorProto.INT64, [1], [2**63 - 1]),
        const("/lm_head/window/axes", TensorProto.INT64, [1], [1]),
        const("/lm_head/window/one", TensorProto.INT64, [1], [1]),
        const("/lm_head/window/zeros_before", TensorProto.INT64, [1], [0]),
        const("/lm_head/window/zeros_after", TensorProto.INT64, [4], [0, 0, 0, 0]),
    ])  # fmt: skip
    position = list(graph.node).index(gather)
    window = [
        helper.make_node("Slice", [hidden, "/lm_head/window/starts", "/lm_head/window/ends", "/lm_head/window/axes"],
                         [selected], name="/lm_head/window/Slice"),
    ]  # fmt: skip
    for node in (gather, unsqueeze):
        graph.node.remove(node)
    for offset, node in enumerate(window):
        graph.node.insert(position + offset, node)
    graph.node.extend([
        helper.make_node("Shape", [hidden], ["/lm_head/window/hidden_shape"], name="/lm_head/window/HiddenShape"),
        helper.make_node("Gather", ["/lm_head/window/hidden_shape", "/lm_head/window/one"],
                         ["/lm_head/window/positions"], name="/lm_head/window/Positions", axis=0),
        helper.make_node("Shape", ["/lm_head/window/logits"], ["/lm_head/window/logits_shape"],
                         name="/lm_head/window/LogitsShape"),
        helper.make_node("Gather", ["/lm_head/window/logits_shape", "/lm_head/window/one"],
                         ["/lm_head/window/rows"], name="/lm_head/window/Rows", axis=0),
        helper.make_node("Sub", ["/lm_head/window/positions", "/lm_head/window/rows"], ["/lm_head/window/missing"],
                         name="/lm_head/window/Missing"),
        helper.make_node("Concat", ["/lm_head/window/zeros_before", "/lm_head/window/missing",
                                    "/lm_head/window/zeros_after"], ["/lm_head/window/pads"],
                         name="/lm_head/window/Pads", axis=0),
        helper.make_node("Pad", ["/lm_head/window/logits", "/lm_head/window/pads"], ["logits"],
                         name="/lm_head/window/Pad", mode="constant"),
    ])  # fmt: skip
    # The LM head's intermediate shapes said one row; onnxruntime infers them again.
    between = {selected, "/lm_head/window/logits", *(o for n in graph.node if n.name.startswith("/lm_head/")
                                                     for o in n.output)}  # fmt: skip
    for info in [v for v in graph.value_info if v.name in between]:
        graph.value_info.remove(info)
    output = next(o for o in graph.output if o.name == "logits")
    dim = output.type.tensor_type.shape.dim[1]
    dim.Clear()
    dim.dim_param = "sequence_length"
    onnx.save(model, str(model_path))
    return {"rows": rows}

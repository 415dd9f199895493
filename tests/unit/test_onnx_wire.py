"""engines.models.onnx_wire reads what the safety check needs from an ONNX file without the onnx package.

Checked against the onnx package's own parse (protobuf's rules for merged fields, unknown enum values and
packed integers included) on models that use every place a tensor or an operator domain can hide, and
against malformed bytes: truncations, flipped bytes, hand-made wire-format abuse and deep nesting must end
in DecodeError or in the same answer protobuf gives, never in another exception or a hang.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper, numpy_helper

from engines.errors import ModelError
from engines.models import onnx_wire
from engines.models.safety import inspect_onnx

REPO = Path(__file__).resolve().parents[2]

# ---- a reference walk with the onnx package (the same places, the same order) ----------------------------------


def reference(model: onnx.ModelProto) -> tuple[set[str], set[str], list[tuple[object, ...]]]:
    domains: set[str] = set()
    tensors: list[tuple[object, ...]] = []

    def tensor(t: onnx.TensorProto) -> None:
        if t.data_location == TensorProto.EXTERNAL:
            tensors.append(_key_of(t.name, t.data_type, list(t.dims), [(e.key, e.value) for e in t.external_data]))

    def sparse(s: onnx.SparseTensorProto) -> None:
        tensor(s.values)
        tensor(s.indices)

    def attribute(a: onnx.AttributeProto) -> list[onnx.GraphProto]:
        if a.HasField("t"):
            tensor(a.t)
        for t in a.tensors:
            tensor(t)
        if a.HasField("sparse_tensor"):
            sparse(a.sparse_tensor)
        for s in a.sparse_tensors:
            sparse(s)
        return ([a.g] if a.HasField("g") else []) + list(a.graphs)

    def node(n: onnx.NodeProto) -> list[onnx.GraphProto]:
        domains.add(n.domain)
        return [g for a in n.attribute for g in attribute(a)]

    def graph(g: onnx.GraphProto) -> None:
        for t in g.initializer:
            tensor(t)
        for s in g.sparse_initializer:
            sparse(s)
        for inner in [x for n in g.node for x in node(n)]:
            graph(inner)

    graph(model.graph)
    for info in model.training_info:
        graph(info.initialization)
        graph(info.algorithm)
    for f in model.functions:
        inner = [x for n in f.node for x in node(n)] + [x for a in f.attribute_proto for x in attribute(a)]
        for g in inner:
            graph(g)
    return domains, {f.domain for f in model.functions}, tensors


def _key_of(name: str | bytes, data_type: int, dims: list[int], entries: list[tuple[str, str]]) -> tuple[object, ...]:
    # protobuf hands a proto2 string that is not UTF-8 back as bytes; the reader replaces what it cannot decode
    # in a name (names are only shown) and refuses it anywhere else
    text = name.decode("utf-8", "replace") if isinstance(name, bytes) else name
    return (text, data_type, tuple(dims), tuple(entries))


def mine(data: bytes) -> tuple[set[str], set[str], list[tuple[object, ...]]]:
    s = onnx_wire.read_structure(data)
    return s.node_domains, s.function_domains, [
        _key_of(t.name, t.data_type, t.dims, t.external_data) for t in s.external_tensors
    ]


# ---- models that use every place -------------------------------------------------------------------------------


def _external(name: str, location: str, shape: tuple[int, ...] = (4,), dtype: type = np.float32) -> onnx.TensorProto:
    t = numpy_helper.from_array(np.zeros(shape, dtype=dtype), name)
    t.ClearField("raw_data")
    t.data_location = TensorProto.EXTERNAL
    for key, value in (("location", location), ("offset", "0"), ("length", str(int(np.prod(shape)) * 4))):
        entry = t.external_data.add()
        entry.key, entry.value = key, value
    return t


def _value(name: str) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, [4])


def everywhere() -> onnx.ModelProto:
    """External tensors and domains in each place ONNX allows them."""
    inner = helper.make_graph(
        [helper.make_node("Constant", [], ["k"], value=_external("in_branch", "branch.bin"), domain="ai.onnx")],
        "then",
        [],
        [_value("k")],
        [_external("branch_init", "../up.bin")],
    )
    deeper = helper.make_graph(
        [helper.make_node("If", ["c"], ["z"], then_branch=inner, else_branch=inner)], "else", [], [_value("z")]
    )
    sparse = helper.make_sparse_tensor(
        _external("sp_values", "sv.bin", (2,)), _external("sp_idx", "/abs", (2,), np.int64), [4]
    )
    attr_sparse = helper.make_sparse_tensor(
        _external("as_values", "asv.bin", (1,)), _external("as_idx", "asi", (1,), np.int64), [4]
    )
    nodes = [
        helper.make_node("If", ["c"], ["y"], then_branch=inner, else_branch=deeper),
        helper.make_node("Constant", [], ["s"], sparse_value=attr_sparse),
        helper.make_node("Custom", ["y"], ["o"], domain="com.example.customops", blob=[_external("t_list", "tl.bin")]),
        helper.make_node("Fn", ["o"], ["p"], domain="local.fns"),
    ]
    graph = helper.make_graph(
        nodes, "main", [_value("c")], [_value("p")], [_external("W", "w.bin")], sparse_initializer=[sparse]
    )
    fn = helper.make_function(
        "local.fns", "Fn", ["a"], ["b"],
        [helper.make_node("Evil", ["a"], ["b"], domain="com.evil.fn", value=_external("fn_const", "fn.bin"))],
        [helper.make_opsetid("", 17)],
    )  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], functions=[fn])
    training = onnx.TrainingInfoProto()
    training.algorithm.CopyFrom(
        helper.make_graph([helper.make_node("Step", [], ["u"], domain="com.train.ops")], "algo", [], [_value("u")])
    )
    model.training_info.append(training)
    return model


def test_the_reader_finds_what_onnx_finds_everywhere() -> None:
    model = everywhere()
    data = model.SerializeToString()
    assert mine(data) == reference(model)
    s = onnx_wire.read_structure(data)
    names = [t.name for t in s.external_tensors]
    assert names[:2] == ["W", "sp_values"]  # a graph's own tensors before those of the graphs inside it
    assert {"branch_init", "in_branch", "as_values", "as_idx", "sp_idx", "t_list", "fn_const"} <= set(names)
    assert {"com.example.customops", "com.evil.fn", "com.train.ops", "local.fns"} <= s.node_domains
    assert s.function_domains == {"local.fns"} and s.opset_imports == [("", 17)] and s.ir_version == model.ir_version


def _demo_models() -> list[Path]:
    return sorted((REPO / "assets" / "models").glob("*/model.onnx"))


@pytest.mark.parametrize("path", _demo_models(), ids=lambda p: p.parent.name)
def test_the_demo_models_read_the_same_as_with_onnx(path: Path) -> None:
    model = onnx.load(str(path), load_external_data=False)
    assert mine(path.read_bytes()) == reference(model)
    assert onnx_wire.read_file(path).nodes == len(model.graph.node)


def test_a_real_exported_classifier_reads_the_same(tmp_path: Path) -> None:
    from tests.unit.tiny_models import colour_classifier

    model_path = colour_classifier(tmp_path / "m") / "model.onnx"
    data = model_path.read_bytes()
    assert mine(data) == reference(onnx.load_from_string(data))


@pytest.mark.parametrize("data_type", [v for k, v in TensorProto.DataType.items() if k not in ("UNDEFINED", "STRING")])
def test_the_byte_size_of_every_type_is_onnxs(data_type: int) -> None:
    array = np.zeros((3, 5), dtype=helper.tensor_dtype_to_np_dtype(data_type))
    expected = len(numpy_helper.from_array(array).raw_data)
    assert onnx_wire.Tensor(data_type=data_type, dims=[3, 5]).byte_size() == expected
    assert onnx_wire.Tensor(data_type=TensorProto.STRING, dims=[3]).byte_size() is None
    assert onnx_wire.Tensor(data_type=999, dims=[3]).byte_size() is None


# ---- protobuf's rules, on hand-made wire bytes -----------------------------------------------------------------


def varint(value: int) -> bytes:
    value &= (1 << 64) - 1
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def field(number: int, payload: bytes | int, wire: int = 2) -> bytes:
    tag = varint(number << 3 | wire)
    if wire == 0:
        assert isinstance(payload, int)
        return tag + varint(payload)
    assert isinstance(payload, bytes)
    return tag + varint(len(payload)) + payload


def _constant_model(attribute: bytes) -> bytes:
    """A ModelProto with one Constant node carrying `attribute` (raw AttributeProto bytes)."""
    node = field(4, b"Constant") + field(5, attribute)
    return field(1, 9, wire=0) + field(7, field(1, node)) + field(8, field(2, 17, wire=0))


def test_a_tensor_split_over_two_occurrences_is_merged_as_protobuf_does() -> None:
    # First occurrence: the location, stored inline; second: only "the data is external". Merged, the
    # tensor is external and reads '../evil.bin': reading the occurrences apart would miss it.
    first = field(8, b"T") + field(13, field(1, b"location") + field(2, b"../evil.bin")) + field(14, 0, wire=0)
    second = field(14, 1, wire=0) + field(1, 4, wire=0)
    data = _constant_model(field(1, b"value") + field(5, first) + field(5, second))
    model = onnx.load_from_string(data)
    assert mine(data) == reference(model)
    (tensor,) = onnx_wire.read_structure(data).external_tensors
    assert tensor.external_data == [("location", "../evil.bin")] and tensor.dims == [4]


def test_an_undefined_enum_value_leaves_the_location_as_it_was() -> None:
    location = field(13, field(1, b"location") + field(2, b"x"))
    tensor = field(8, b"T") + field(14, 1, wire=0) + field(14, 7, wire=0) + location
    data = _constant_model(field(1, b"value") + field(5, tensor))
    model = onnx.load_from_string(data)
    assert model.graph.node[0].attribute[0].t.data_location == TensorProto.EXTERNAL  # proto2: 7 is ignored
    assert mine(data) == reference(model) and len(onnx_wire.read_structure(data).external_tensors) == 1


def test_packed_and_unpacked_dims_and_negative_values_read_as_protobuf_does(tmp_path: Path) -> None:
    packed = field(1, varint(2) + varint(3))
    location = field(13, field(1, b"location") + field(2, b"w.bin"))
    tensor = packed + field(1, -1, wire=0) + field(2, 1, wire=0) + field(8, b"T") + field(14, 1, wire=0) + location
    data = _constant_model(field(1, b"value") + field(5, tensor))
    model = onnx.load_from_string(data)
    assert list(model.graph.node[0].attribute[0].t.dims) == [2, 3, -1]
    assert mine(data) == reference(model)
    with pytest.raises(ModelError, match="negative dimension"):
        _inspect_bytes(data, tmp_path / "m")


def test_two_graph_fields_are_one_merged_graph() -> None:
    model = everywhere()
    extra = helper.make_graph([helper.make_node("Other", [], ["q"], domain="com.second")], "", [], [])
    data = model.SerializeToString() + field(7, extra.SerializeToString())
    merged = onnx.load_from_string(data)
    assert "com.second" in {n.domain for n in merged.graph.node}
    assert mine(data) == reference(merged)


def _inspect_bytes(data: bytes, folder: Path) -> onnx_wire.Structure:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "w.bin").write_bytes(b"\0" * 64)
    (folder / "model.onnx").write_bytes(data)
    inspect_onnx(folder / "model.onnx")
    return onnx_wire.read_file(folder / "model.onnx")


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"", "empty file"),
        (b"\x08", "truncated varint"),
        (b"\x08" + b"\xff" * 11, "varint longer than 10 bytes"),
        (b"\x3a\x05ab", "runs past its message"),
        (b"\x3a\xff\xff\xff\xff\x0f", "runs past its message"),
        (b"\x00\x01", "field number 0"),
        (b"\x0b\x0c", "wire type 3"),
        (b"\x09\x01\x02", "truncated fixed-size field"),
        (b"\x08\x09", "no graph"),
        (field(7, field(1, field(7, b"\xff\xfe"))), "not UTF-8"),
        (b"MZ\x90\x00 this is a Windows program, not a model " * 50, "wire type"),
    ],
)
def test_malformed_bytes_are_a_decode_error(tmp_path: Path, data: bytes, message: str) -> None:
    path = tmp_path / "model.onnx"
    path.write_bytes(data)
    with pytest.raises(onnx_wire.DecodeError, match=message):
        onnx_wire.read_file(path)
    with pytest.raises(ModelError, match=r"is not a valid ONNX model \(DecodeError\)"):
        inspect_onnx(path)


def _nested(levels: int) -> bytes:
    """A chain of If nodes, each holding the next graph in its then_branch, written as raw wire bytes."""
    graph = field(1, field(4, b"Identity") + field(7, b"com.deep"))
    for _ in range(levels):
        graph = field(1, field(4, b"If") + field(5, field(1, b"then_branch") + field(6, graph)))
    return field(1, 9, wire=0) + field(7, graph)


def test_deep_nesting_is_bounded_like_protobufs() -> None:
    shallow = _nested(30)
    assert "com.deep" in onnx_wire.read_structure(shallow).node_domains
    assert mine(shallow) == reference(onnx.load_from_string(shallow))
    deep = _nested(40)
    with pytest.raises(Exception, match="MaxDepth|depth"):
        onnx.load_from_string(deep)
    with pytest.raises(onnx_wire.DecodeError, match="nested deeper than 100"):
        onnx_wire.read_structure(deep)
    with pytest.raises(onnx_wire.DecodeError, match="nested deeper than 100"):
        onnx_wire.read_structure(_nested(5000))  # far past Python's own recursion limit: still a clean error


# ---- fuzzing: whatever the bytes, a DecodeError or protobuf's answer ------------------------------------------

SEEDS = [
    everywhere().SerializeToString(),
    _nested(3),
    _constant_model(field(1, b"value") + field(5, field(14, 1, wire=0))),
]


def _agrees_or_refuses(data: bytes) -> None:
    try:
        got = mine(data)
    except onnx_wire.DecodeError:
        return  # refused: never less strict than loading it
    try:
        model = onnx.load_from_string(data)
    except Exception:  # protobuf refuses bytes this reader accepts: ONNX Runtime cannot open them either
        return
    assert got == reference(model)


@settings(max_examples=300, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(SEEDS), st.data())
def test_truncated_and_mutated_models_are_refused_or_read_as_protobuf_reads_them(
    seed: bytes, data: st.DataObject
) -> None:
    cut = data.draw(st.integers(0, len(seed)))
    mutated = bytearray(seed[:cut] if data.draw(st.booleans()) else seed)
    for _ in range(data.draw(st.integers(0, 4))):
        if mutated:
            mutated[data.draw(st.integers(0, len(mutated) - 1))] = data.draw(st.integers(0, 255))
    _agrees_or_refuses(bytes(mutated))


def test_every_prefix_of_a_model_is_refused_or_read_as_protobuf_reads_it() -> None:
    seed = SEEDS[0]
    for cut in range(len(seed) + 1):
        _agrees_or_refuses(seed[:cut])


@settings(max_examples=200, deadline=None, derandomize=True)
@given(st.binary(max_size=512))
def test_random_bytes_never_raise_anything_but_a_decode_error(data: bytes) -> None:
    _agrees_or_refuses(data)


def test_the_check_imports_neither_onnx_nor_numpy(tmp_path: Path) -> None:
    folder = tmp_path / "m"
    folder.mkdir()
    branch = helper.make_graph(
        [helper.make_node("Constant", [], ["k"], value=_external("in_branch", "branch.bin"))], "then", [], [_value("k")]
    )
    graph = helper.make_graph(
        [helper.make_node("If", ["c"], ["y"], then_branch=branch, else_branch=branch)],
        "main", [_value("c")], [_value("y")], [_external("W", "w.bin")],
    )  # fmt: skip
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), folder / "model.onnx")
    for name in ("w.bin", "branch.bin"):
        (folder / name).write_bytes(b"\0" * 16)
    probe = (
        "import sys\n"
        "from engines.models.safety import inspect_onnx\n"
        f"files = inspect_onnx({str(folder / 'model.onnx')!r})\n"
        "print(len(files.external_files), *(m for m in ('onnx', 'numpy', 'ml_dtypes', 'google') if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", probe], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["2"]


# ---- the safety check on what the reader adds: function bodies, training graphs, sparse indices ---------------


def _save(model: onnx.ModelProto, folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    onnx.save(model, folder / "model.onnx")
    return folder / "model.onnx"


def _plain_graph(initializers: list[onnx.TensorProto] | None = None, **kw: object) -> onnx.GraphProto:
    return helper.make_graph(
        [helper.make_node("Fn", ["x"], ["y"], domain="local.fns")], "g", [_value("x")], [_value("y")],
        initializers or [], **kw,  # type: ignore[arg-type]
    )  # fmt: skip


def test_a_custom_operator_inside_a_local_function_is_refused(tmp_path: Path) -> None:
    body = [helper.make_node("Evil", ["a"], ["b"], domain="com.evil.ops")]
    fn = helper.make_function("local.fns", "Fn", ["a"], ["b"], body, [helper.make_opsetid("", 17)])
    model = helper.make_model(_plain_graph(), opset_imports=[helper.make_opsetid("", 17)], functions=[fn])
    with pytest.raises(ModelError, match=r"uses custom operators \(com\.evil\.ops\)"):
        inspect_onnx(_save(model, tmp_path / "m"))
    fn.node[0].domain = ""  # a function made of standard operators is the model's own: accepted
    model = helper.make_model(_plain_graph(), opset_imports=[helper.make_opsetid("", 17)], functions=[fn])
    assert inspect_onnx(_save(model, tmp_path / "ok")).custom_domains == ()


def test_a_custom_operator_in_a_training_graph_is_refused(tmp_path: Path) -> None:
    fn = helper.make_function("local.fns", "Fn", ["a"], ["b"], [helper.make_node("Relu", ["a"], ["b"])], [])
    model = helper.make_model(_plain_graph(), opset_imports=[helper.make_opsetid("", 17)], functions=[fn])
    training = model.training_info.add()
    training.algorithm.CopyFrom(
        helper.make_graph([helper.make_node("Step", [], ["u"], domain="com.train.ops")], "a", [], [_value("u")])
    )
    with pytest.raises(ModelError, match=r"com\.train\.ops"):
        inspect_onnx(_save(model, tmp_path / "m"))


def test_sparse_indices_stored_outside_the_folder_are_refused(tmp_path: Path) -> None:
    (tmp_path / "outside.bin").write_bytes(b"\0" * 64)
    folder = tmp_path / "m"
    folder.mkdir()
    (folder / "v.bin").write_bytes(b"\0" * 64)
    sparse = helper.make_sparse_tensor(
        _external("values", "v.bin", (2,)), _external("indices", "../outside.bin", (2,), np.int64), [4]
    )
    fn = helper.make_function("local.fns", "Fn", ["a"], ["b"], [helper.make_node("Relu", ["a"], ["b"])], [])
    model = helper.make_model(
        _plain_graph(sparse_initializer=[sparse]), opset_imports=[helper.make_opsetid("", 17)], functions=[fn]
    )
    with pytest.raises(ModelError, match=r"tensor 'indices' points outside the model's folder"):
        inspect_onnx(_save(model, folder))

"""A bounded reader of the parts of an ONNX file the safety checks need, straight from protobuf's wire format.

`read_structure(data)` walks ModelProto without the `onnx` package and without touching tensor payloads
(raw_data and the packed value fields are skipped by their length, so an mmap'd 2 GB file costs only the
pages its structure lies on). It returns what ONNX Runtime would act on before running anything: every
operator domain used by a node (in the main graph, every nested graph of an attribute, every local
function and training graph), the local functions' domains, the opset imports, and every tensor stored
outside the file, with its type, shape and external-data entries.

It follows protobuf's own rules where a hostile file could exploit a difference: a singular message
field that appears twice is merged (parsed as the concatenation of its occurrences), a scalar's last value
wins, an enum value the schema does not define leaves the field as it was, and repeated integers may be
packed or not. Anything malformed (a truncated field, a varint over 10 bytes, a length past the end, a
group, field number 0, messages nested deeper than 100 (protobuf's own limit, counted over the messages
read here: ONNX Runtime cannot parse such a file either), a string that is not UTF-8, no graph) raises
DecodeError. Work is linear in the file's size, recursion bounded by that depth.
"""

from __future__ import annotations

import mmap
import os
from dataclasses import dataclass, field
from pathlib import Path

# Protobuf's default recursion limit, with the ModelProto at depth 1.
MAX_DEPTH = 100
EXTERNAL = 1  # TensorProto.DataLocation.EXTERNAL
STRING = 8  # TensorProto.DataType.STRING
# Bits per element of each TensorProto.DataType with a fixed size (sub-byte types are packed).
BITS = {
    1: 32, 2: 8, 3: 8, 4: 16, 5: 16, 6: 32, 7: 64, 9: 8, 10: 16, 11: 64, 12: 32, 13: 64, 14: 64, 15: 128,
    16: 16, 17: 8, 18: 8, 19: 8, 20: 8, 21: 4, 22: 4, 23: 4, 24: 8, 25: 2, 26: 2, 27: 6, 28: 6,
}  # fmt: skip

_VARINT, _FIXED64, _LEN, _FIXED32 = 0, 1, 2, 5


class DecodeError(ValueError):
    """The bytes are not a well-formed ONNX ModelProto."""


@dataclass
class Tensor:
    """A tensor as the safety check sees it (the parts of TensorProto it needs)."""

    name: str = ""
    data_type: int = 0
    dims: list[int] = field(default_factory=list)
    data_location: int = 0
    external_data: list[tuple[str, str]] = field(default_factory=list)

    def byte_size(self) -> int | None:
        """Bytes its type and shape take (None: no fixed size, e.g. strings or an unknown type)."""
        bits = BITS.get(self.data_type)
        if bits is None:
            return None
        count = 1
        for dim in self.dims:
            count *= dim
        return (count * bits + 7) // 8


@dataclass
class Structure:
    """What `read_structure` found."""

    ir_version: int = 0
    opset_imports: list[tuple[str, int]] = field(default_factory=list)
    node_domains: set[str] = field(default_factory=set)
    function_domains: set[str] = field(default_factory=set)
    external_tensors: list[Tensor] = field(default_factory=list)
    graphs: int = 0
    nodes: int = 0
    has_graph: bool = False


class _Reader:
    def __init__(self, data: bytes | mmap.mmap) -> None:
        self.data = data
        self.out = Structure()

    # ---- wire format ----

    def _varint(self, pos: int, end: int) -> tuple[int, int]:
        data = self.data
        result = shift = 0
        for _ in range(10):
            if pos >= end:
                raise DecodeError("truncated varint")
            byte = data[pos]
            pos += 1
            result |= (byte & 0x7F) << shift
            if byte < 0x80:
                return result & 0xFFFFFFFFFFFFFFFF, pos
            shift += 7
        raise DecodeError("varint longer than 10 bytes")

    def fields(self, start: int, end: int) -> list[tuple[int, int, int, int]]:
        """(field number, wire type, value or payload start, payload end) of each field in [start, end)."""
        data, varint = self.data, self._varint
        out = []
        pos = start
        while pos < end:
            tag = data[pos]  # one-byte tags and lengths are the common case: read them inline
            if tag < 0x80:
                pos += 1
            else:
                tag, pos = varint(pos, end)
            number, wire = tag >> 3, tag & 7
            if number == 0:
                raise DecodeError("field number 0")
            if wire == _LEN:
                if pos >= end:
                    raise DecodeError("truncated length")
                length = data[pos]
                if length < 0x80:
                    pos += 1
                else:
                    length, pos = varint(pos, end)
                if length > end - pos:
                    raise DecodeError("length-delimited field runs past its message")
                out.append((number, wire, pos, pos + length))
                pos += length
            elif wire == _VARINT:
                if pos < end and data[pos] < 0x80:
                    value = data[pos]
                    pos += 1
                else:
                    value, pos = varint(pos, end)
                out.append((number, wire, value, pos))
            elif wire in (_FIXED64, _FIXED32):
                size = 8 if wire == _FIXED64 else 4
                if size > end - pos:
                    raise DecodeError("truncated fixed-size field")
                out.append((number, wire, pos, pos + size))
                pos += size
            else:
                raise DecodeError(f"wire type {wire} (groups are not used by ONNX)")
        return out

    def text(self, start: int, end: int) -> str:
        try:
            return self.data[start:end].decode("utf-8")
        except UnicodeDecodeError as exc:
            raise DecodeError("a string field is not UTF-8") from exc

    def ints(self, wire: int, a: int, b: int, bits: int) -> list[int]:
        """A repeated integer field's values (one unpacked varint, or a packed run)."""
        if wire == _VARINT:
            raw = [a]
        elif wire == _LEN:
            raw = []
            pos = a
            while pos < b:
                value, pos = self._varint(pos, b)
                raw.append(value)
        else:
            return []  # a wire type the field does not have: protobuf keeps it as an unknown field
        return [_signed(v, bits) for v in raw]

    @staticmethod
    def check_depth(depth: int) -> None:
        if depth > MAX_DEPTH:
            raise DecodeError(f"messages nested deeper than {MAX_DEPTH}")

    # ---- ONNX messages ----

    def model(self) -> Structure:
        graphs: list[tuple[int, int]] = []
        later: list[tuple[str, int, int]] = []
        for number, wire, a, b in self.fields(0, len(self.data)):
            if number == 1 and wire == _VARINT:
                self.out.ir_version = _signed(a, 64)
            elif number == 7 and wire == _LEN:
                graphs.append((a, b))
            elif number == 8 and wire == _LEN:
                self.out.opset_imports.append(self.opset(a, b))
            elif number in (20, 25) and wire == _LEN:
                later.append(("training" if number == 20 else "function", a, b))
        if not graphs:
            raise DecodeError("no graph")
        self.out.has_graph = True
        self.graph(graphs, 2)  # a singular field seen twice is merged; the model itself is depth 1
        for kind, a, b in later:
            if kind == "training":
                self.training_info(a, b, 2)
            else:
                self.function(a, b, 2)
        return self.out

    def opset(self, a: int, b: int) -> tuple[str, int]:
        domain, version = "", 0
        for number, wire, x, y in self.fields(a, b):
            if number == 1 and wire == _LEN:
                domain = self.text(x, y)
            elif number == 2 and wire == _VARINT:
                version = _signed(x, 64)
        return domain, version

    def training_info(self, a: int, b: int, depth: int) -> None:
        self.check_depth(depth)
        parts: dict[int, list[tuple[int, int]]] = {1: [], 2: []}  # initialization, algorithm
        for number, wire, x, y in self.fields(a, b):
            if number in parts and wire == _LEN:
                parts[number].append((x, y))
        for spans in parts.values():
            if spans:
                self.graph(spans, depth + 1)

    def function(self, a: int, b: int, depth: int) -> None:
        self.check_depth(depth)
        nested: list[tuple[list[tuple[int, int]], int]] = []
        domain = ""
        for number, wire, x, y in self.fields(a, b):
            if number == 7 and wire == _LEN:
                nested += self.node(x, y, depth + 1)
            elif number == 10 and wire == _LEN:
                domain = self.text(x, y)
            elif number == 11 and wire == _LEN:  # attribute defaults
                nested += self.attribute(x, y, depth + 1)
        self.out.function_domains.add(domain)
        for spans, at in nested:
            self.graph(spans, at)

    def graph(self, spans: list[tuple[int, int]], depth: int) -> None:
        """A graph's own tensors (initializers, sparse ones, its nodes' attributes), then its nested graphs in
        order: each graph's tensors come before those of the graphs inside it."""
        self.check_depth(depth)
        self.out.graphs += 1
        nodes: list[tuple[int, int]] = []
        initializers: list[tuple[int, int]] = []
        sparse: list[tuple[int, int]] = []
        for a, b in spans:
            for number, wire, x, y in self.fields(a, b):
                if wire == _LEN:
                    if number == 1:
                        nodes.append((x, y))
                    elif number == 5:
                        initializers.append((x, y))
                    elif number == 15:
                        sparse.append((x, y))
        for span in initializers:
            self.tensor([span], depth + 1)
        for span in sparse:
            self.sparse_tensor([span], depth + 1)
        nested: list[tuple[list[tuple[int, int]], int]] = []
        for x, y in nodes:
            nested += self.node(x, y, depth + 1)
        for inner, at in nested:
            self.graph(inner, at)

    def node(self, a: int, b: int, depth: int) -> list[tuple[list[tuple[int, int]], int]]:
        """Reads a node's domain and its attributes' tensors; returns the graphs its attributes hold."""
        self.check_depth(depth)
        self.out.nodes += 1
        domain = ""
        nested: list[tuple[list[tuple[int, int]], int]] = []
        for number, wire, x, y in self.fields(a, b):
            if number == 7 and wire == _LEN:
                domain = self.text(x, y)
            elif number == 5 and wire == _LEN:
                nested += self.attribute(x, y, depth + 1)
        self.out.node_domains.add(domain)
        return nested

    def attribute(self, a: int, b: int, depth: int) -> list[tuple[list[tuple[int, int]], int]]:
        """Reads an attribute's tensors (t, tensors, sparse_tensor, sparse_tensors); returns its graphs."""
        self.check_depth(depth)
        parts: dict[int, list[tuple[int, int]]] = {5: [], 6: [], 10: [], 11: [], 22: [], 23: []}
        for number, wire, x, y in self.fields(a, b):
            if number in parts and wire == _LEN:
                parts[number].append((x, y))
        if parts[5]:  # t: singular, so its occurrences are merged
            self.tensor(parts[5], depth + 1)
        for span in parts[10]:
            self.tensor([span], depth + 1)
        if parts[22]:
            self.sparse_tensor(parts[22], depth + 1)
        for span in parts[23]:
            self.sparse_tensor([span], depth + 1)
        graphs = [(parts[6], depth + 1)] if parts[6] else []
        return graphs + [([span], depth + 1) for span in parts[11]]

    def sparse_tensor(self, spans: list[tuple[int, int]], depth: int) -> None:
        self.check_depth(depth)
        parts: dict[int, list[tuple[int, int]]] = {1: [], 2: []}  # values, indices
        for a, b in spans:
            for number, wire, x, y in self.fields(a, b):
                if number in parts and wire == _LEN:
                    parts[number].append((x, y))
        for tensor_spans in parts.values():
            if tensor_spans:
                self.tensor(tensor_spans, depth + 1)

    def tensor(self, spans: list[tuple[int, int]], depth: int) -> None:
        self.check_depth(depth)
        tensor = Tensor()
        for a, b in spans:
            for number, wire, x, y in self.fields(a, b):
                if number == 1:
                    tensor.dims.extend(self.ints(wire, x, y, 64))
                elif number == 2 and wire == _VARINT:
                    tensor.data_type = _signed(x, 32)
                elif number == 8 and wire == _LEN:
                    tensor.name = self.data[x:y].decode("utf-8", "replace")
                elif number == 13 and wire == _LEN:
                    self.check_depth(depth + 1)
                    tensor.external_data.append(self.entry(x, y))
                elif number == 14 and wire == _VARINT and x in (0, EXTERNAL):  # an undefined enum value is ignored
                    tensor.data_location = x
        if tensor.data_location == EXTERNAL:
            self.out.external_tensors.append(tensor)

    def entry(self, a: int, b: int) -> tuple[str, str]:
        key = value = ""
        for number, wire, x, y in self.fields(a, b):
            if number == 1 and wire == _LEN:
                key = self.text(x, y)
            elif number == 2 and wire == _LEN:
                value = self.text(x, y)
        return key, value


def _signed(value: int, bits: int) -> int:
    value &= (1 << bits) - 1
    return value - (1 << bits) if value >> (bits - 1) else value


def read_structure(data: bytes | mmap.mmap) -> Structure:
    """The structure of a serialized ModelProto (raises DecodeError when it is not one)."""
    return _Reader(data).model()


def read_file(path: str | os.PathLike[str]) -> Structure:
    """The structure of an ONNX file, mapped rather than read: the payloads it skips are never loaded."""
    with Path(path).open("rb") as fh:
        if os.fstat(fh.fileno()).st_size == 0:
            raise DecodeError("empty file")
        with mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as mapped:
            return read_structure(mapped)

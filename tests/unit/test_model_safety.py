"""Untrusted ONNX files are checked before any native load: external data, sizes, custom operators."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from engines.errors import ModelError
from engines.models import onnx_wire
from engines.models.paths import is_within, resolve_inside
from engines.models.safety import inspect_onnx
from engines.types import DeviceChoice
from engines.vision.classifier import ImageClassifier
from tests.unit.tiny_models import colour_classifier


def _external_model(folder: Path, location: str, data_size: int = 4096) -> Path:
    """A model whose one initializer lives in an external file named `location`."""
    folder.mkdir(parents=True, exist_ok=True)
    weights = numpy_helper.from_array(np.ones(data_size // 4, dtype=np.float32), "w")
    weights.ClearField("raw_data")
    weights.data_location = TensorProto.EXTERNAL
    for key, value in {"location": location, "offset": "0", "length": str(data_size)}.items():
        entry = weights.external_data.add()
        entry.key, entry.value = key, value
    graph = helper.make_graph(
        [helper.make_node("Add", ["x", "w"], ["y"])],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [data_size // 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [data_size // 4])],
        [weights],
    )
    path = folder / "model.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


def test_external_data_inside_the_folder_is_accepted(tmp_path: Path) -> None:
    model = _external_model(tmp_path / "m", "weights.bin")
    (tmp_path / "m" / "weights.bin").write_bytes(b"\0" * 4096)
    files = inspect_onnx(model)
    assert files.external_files == (tmp_path / "m" / "weights.bin",)
    assert files.total_bytes == model.stat().st_size + 4096


@pytest.mark.parametrize(
    ("location", "expected"),
    [
        ("../outside.bin", "points outside the model's folder"),
        ("sub/../../outside.bin", "points outside the model's folder"),
        ("/etc/passwd", "absolute path"),
        ("C:\\Windows\\system.ini", "absolute path"),
        ("..\\outside.bin", "points outside the model's folder"),
    ],
)
def test_external_data_escaping_the_folder_is_refused(tmp_path: Path, location: str, expected: str) -> None:
    (tmp_path / "outside.bin").write_bytes(b"\0" * 4096)
    model = _external_model(tmp_path / "m", location)
    with pytest.raises(ModelError) as caught:
        inspect_onnx(model)
    assert expected in caught.value.message
    assert "unsafe" in caught.value.hint


def test_a_symlink_out_of_the_folder_is_refused(tmp_path: Path) -> None:
    secret = tmp_path / "secret.bin"
    secret.write_bytes(b"\0" * 4096)
    model = _external_model(tmp_path / "m", "weights.bin")
    os.symlink(secret, tmp_path / "m" / "weights.bin")
    with pytest.raises(ModelError, match="link to a file outside"):
        inspect_onnx(model)


def test_missing_and_truncated_external_data(tmp_path: Path) -> None:
    model = _external_model(tmp_path / "m", "weights.bin")
    with pytest.raises(ModelError, match="is missing"):
        inspect_onnx(model)
    (tmp_path / "m" / "weights.bin").write_bytes(b"\0" * 100)
    with pytest.raises(ModelError, match="truncated"):
        inspect_onnx(model)


def test_a_model_far_larger_than_declared_is_refused(tmp_path: Path) -> None:
    folder = colour_classifier(tmp_path / "m")
    size = (folder / "model.onnx").stat().st_size
    inspect_onnx(folder / "model.onnx", declared_bytes=size)
    with pytest.raises(ModelError, match="manifest declares"):
        inspect_onnx(folder / "model.onnx", declared_bytes=size // 10)


def test_custom_operator_domains_are_refused(tmp_path: Path) -> None:
    graph = helper.make_graph(
        [helper.make_node("Evil", ["x"], ["y"], domain="com.example.customops")],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])],
    )
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.example.customops", 1)]
    )
    path = tmp_path / "custom.onnx"
    onnx.save(model, path)
    with pytest.raises(ModelError, match=r"custom operators \(com.example.customops\)"):
        inspect_onnx(path)


def test_the_classifier_checks_before_loading(tmp_path: Path) -> None:
    folder = colour_classifier(tmp_path / "m")
    manifest = (
        (folder / "manifest.json").read_text().replace('{"path": "model.onnx"}', '{"path": "model.onnx", "size": 10}')
    )
    (folder / "manifest.json").write_text(manifest)
    with pytest.raises(ModelError, match="manifest declares"):
        ImageClassifier.from_folder(folder, DeviceChoice.parse("cpu"))
    escaping = (folder / "manifest.json").read_text().replace('"path": "model.onnx", "size": 10', '"path": "../x.onnx"')
    (folder / "manifest.json").write_text(escaping)
    with pytest.raises(ModelError, match="points outside"):
        ImageClassifier.from_folder(folder, DeviceChoice.parse("cpu"))




def test_resolve_inside_accepts_nested_files_and_refuses_every_way_out(tmp_path: Path) -> None:
    root = tmp_path / "model"
    (root / "a").mkdir(parents=True)
    (root / "a" / "b.bin").write_bytes(b"x")
    assert resolve_inside(root, "a/b.bin") == (root / "a" / "b.bin").resolve()
    assert resolve_inside(root, "a\\b.bin", must_exist=True) == (root / "a" / "b.bin").resolve()
    (tmp_path / "elsewhere.bin").write_bytes(b"x")
    os.symlink(tmp_path / "elsewhere.bin", root / "link.bin")
    refused = {
        "": "empty",
        "a\x00b": "NUL",
        "/etc/passwd": "absolute path",
        "C:\\Windows\\win.ini": "absolute path",
        "C:win.ini": "absolute path",
        "\\\\server\\share\\x": "absolute path",
        "\\Windows\\win.ini": "absolute path",
        "../x": "'..'",
        "a/../../x": "'..'",
        "..\\x": "'..'",
        ".": "the model folder itself",
        "link.bin": "is a link to a file outside",
    }
    for name, words in refused.items():
        with pytest.raises(ModelError, match=words):
            resolve_inside(root, name)
    with pytest.raises(ModelError, match="is missing"):
        resolve_inside(root, "a/none.bin", must_exist=True)
    assert is_within(root / "a" / "b.bin", root) and is_within(root, root) and is_within(root / "a", root)
    assert not is_within(root / "link.bin", root) and not is_within(root.parent, root)
    assert not is_within(root / ".." / root.name / ".." / "x", root)


def test_a_file_that_passed_is_not_read_again_until_it_or_its_folder_changes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = _external_model(tmp_path / "m", "weights.bin")
    weights = tmp_path / "m" / "weights.bin"
    weights.write_bytes(b"\0" * 4096)
    loads: list[object] = []
    real = onnx_wire.read_file

    def counting(path: Path) -> onnx_wire.Structure:
        loads.append(path)
        return real(path)

    monkeypatch.setattr(onnx_wire, "read_file", counting)
    first = inspect_onnx(model)
    assert inspect_onnx(model) == first and len(loads) == 1  # opening a classifier checks twice
    weights.write_bytes(b"\0" * 100)  # its external data truncated in place
    with pytest.raises(ModelError, match="truncated"):
        inspect_onnx(model)
    weights.write_bytes(b"\0" * 4096)
    inspect_onnx(model)
    # Replaced by a model that escapes its folder (a new file: new inode and folder mtime).
    (tmp_path / "outside.bin").write_bytes(b"\0" * 4096)
    _external_model(tmp_path / "other", "../outside.bin")
    os.replace(tmp_path / "other" / "model.onnx", model)
    with pytest.raises(ModelError, match="points outside the model's folder"):
        inspect_onnx(model)


def test_library_entries_and_trusted_roots_follow_the_one_inside_the_folder_rule(tmp_path: Path) -> None:
    from engines.models import trial
    from engines.models.lookup import locate_model

    library, elsewhere = tmp_path / "library", tmp_path / "elsewhere"
    (library / "net" / "sub").mkdir(parents=True)
    (elsewhere / "net").mkdir(parents=True)
    try:
        (library / "out").symlink_to(elsewhere / "net", target_is_directory=True)
        (elsewhere / "in").symlink_to(library / "net", target_is_directory=True)
    except OSError:
        pytest.fail("this test needs symbolic links; the filesystem refused to create one")
    entry = {path: locate_model(path, [library]).in_library for path in (
        library / "net", library / "net" / "sub", elsewhere / "net", library / "out", elsewhere / "in", library)}
    assert entry == {library / "net": True, library / "net" / "sub": False, elsewhere / "net": False,
                     library / "out": False, elsewhere / "in": True, library: False}  # fmt: skip

    saved = dict(trial._state)
    try:
        trial.configure(trusted=[library])
        assert trial.is_trusted(library) and trial.is_trusted(library / "net" / "sub")
        assert trial.is_trusted(elsewhere / "in"), "a link into a trusted root is that root's folder"
        assert not trial.is_trusted(library / "out") and not trial.is_trusted(elsewhere / "net")
    finally:
        trial._state.update(saved)

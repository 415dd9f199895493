"""Untrusted model folders, end to end through the CLI: each is refused with its own message, in one line,
before ONNX Runtime or onnxruntime-genai sees the model (the `native_guard` traps prove it), and an
import that is refused leaves nothing in the library."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path

import onnx
import pytest
from onnx import TensorProto, helper
from PIL import Image

from app import paths
from app.cli import run
from tests.reliability.conftest import NativeGuard, Recorder
from tests.unit.tiny_models import classifier_section, colour_classifier, edit_manifest

CATEGORY = "Untrusted model files"
Mutation = Callable[[Path, Path], None]  # (model folder, a folder outside it)


def _cli(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    """Exit code and what the CLI said on stderr (an import's progress lines left out)."""
    code = run(args)
    lines = [line for line in capsys.readouterr().err.splitlines() if not line.startswith("Importing ")]
    return code, "\n".join(lines).strip()


def _externalize(model_file: Path, tensor: str, location: str, data_file: Path) -> None:
    """Move initializer `tensor` of `model_file` to external data at `location`, bytes in `data_file`."""
    model = onnx.load(str(model_file), load_external_data=False)
    for graph_tensor in model.graph.initializer:
        if graph_tensor.name != tensor:
            continue
        raw = onnx.numpy_helper.to_array(graph_tensor).tobytes()
        data_file.parent.mkdir(parents=True, exist_ok=True)
        data_file.write_bytes(raw)
        graph_tensor.ClearField("float_data")
        graph_tensor.ClearField("raw_data")
        graph_tensor.data_location = TensorProto.EXTERNAL
        del graph_tensor.external_data[:]
        for key, value in {"location": location, "offset": "0", "length": str(len(raw))}.items():
            entry = graph_tensor.external_data.add()
            entry.key, entry.value = key, value
    onnx.save(model, str(model_file))




def _custom_op_model(path: Path) -> None:
    graph = helper.make_graph(
        [helper.make_node("Evil", ["pixels"], ["scores"], domain="com.example.customops")],
        "g",
        [helper.make_tensor_value_info("pixels", TensorProto.FLOAT, ["N", 3, 8, 8])],
        [helper.make_tensor_value_info("scores", TensorProto.FLOAT, ["N", 4])],
    )
    opsets = [helper.make_opsetid("", 17), helper.make_opsetid("com.example.customops", 1)]
    onnx.save(helper.make_model(graph, opset_imports=opsets), str(path))


# --- classify --model EVIL_DIR ----------------------------------------------------------------------

SECRET = "root:x:0:0:secret-line-that-must-never-be-shown"


def _secret(outside: Path) -> Path:
    outside.mkdir(parents=True, exist_ok=True)
    secret = outside / "secret.txt"
    secret.write_text(f"{SECRET}\nsecond\nthird\nfourth\n", encoding="utf-8")
    return secret


def _ext_parent(folder: Path, outside: Path) -> None:
    _externalize(folder / "model.onnx", "W", "../outside/weights.bin", outside / "weights.bin")


def _ext_absolute(folder: Path, outside: Path) -> None:
    _externalize(folder / "model.onnx", "W", str(outside / "weights.bin"), outside / "weights.bin")


def _ext_windows(folder: Path, outside: Path) -> None:
    _externalize(folder / "model.onnx", "W", "C:\\Windows\\System32\\weights.bin", outside / "weights.bin")


def _ext_symlink(folder: Path, outside: Path) -> None:
    _externalize(folder / "model.onnx", "W", "weights.bin", outside / "weights.bin")
    os.symlink(outside / "weights.bin", folder / "weights.bin")


def _ext_truncated(folder: Path, outside: Path) -> None:
    _externalize(folder / "model.onnx", "W", "weights.bin", folder / "weights.bin")
    data = (folder / "weights.bin").read_bytes()
    (folder / "weights.bin").write_bytes(data[: len(data) // 2])


def _model_symlink(folder: Path, outside: Path) -> None:
    outside.mkdir(parents=True, exist_ok=True)
    shutil.move(str(folder / "model.onnx"), str(outside / "model.onnx"))
    os.symlink(outside / "model.onnx", folder / "model.onnx")


def _manifest_model_outside(folder: Path, outside: Path) -> None:
    outside.mkdir(parents=True, exist_ok=True)
    shutil.copy2(folder / "model.onnx", outside / "model.onnx")
    edit_manifest(folder, lambda m: m.update(files=[{"path": "../outside/model.onnx"}, {"path": "labels.txt"}]))


def _larger_than_declared(folder: Path, outside: Path) -> None:
    edit_manifest(folder, lambda m: m.update(files=[{"path": "model.onnx", "size": 40}, {"path": "labels.txt"}]))


def _custom_ops(folder: Path, outside: Path) -> None:
    _custom_op_model(folder / "model.onnx")


def _labels_parent(folder: Path, outside: Path) -> None:
    _secret(outside)
    edit_manifest(folder, lambda m: classifier_section(m).update(labels="../outside/secret.txt"))


def _labels_absolute(folder: Path, outside: Path) -> None:
    secret = _secret(outside)
    edit_manifest(folder, lambda m: classifier_section(m).update(labels=str(secret)))


def _not_onnx(folder: Path, outside: Path) -> None:
    (folder / "model.onnx").write_bytes(b"MZ\x90\x00 this is a Windows program, not a model " * 50)


def _manifest_not_json(folder: Path, outside: Path) -> None:
    (folder / "manifest.json").write_text('{"schema": 1, "classifier": ', encoding="utf-8")


def _no_manifest(folder: Path, outside: Path) -> None:
    (folder / "manifest.json").unlink()


def _subgraph_external(folder: Path, outside: Path) -> None:
    """The escaping tensor hides in a branch of an If node."""
    inner_w = onnx.numpy_helper.from_array(__import__("numpy").ones(4, dtype="float32"), "inner")
    inner_w.ClearField("raw_data")
    inner_w.data_location = TensorProto.EXTERNAL
    for key, value in {"location": "../outside/weights.bin", "offset": "0", "length": "16"}.items():
        entry = inner_w.external_data.add()
        entry.key, entry.value = key, value
    (outside / "weights.bin").parent.mkdir(parents=True, exist_ok=True)
    (outside / "weights.bin").write_bytes(b"\0" * 16)
    branch = helper.make_graph(
        [helper.make_node("Identity", ["inner"], ["out"])],
        "branch",
        [],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, [4])],
        [inner_w],
    )
    model = onnx.load(str(folder / "model.onnx"))
    cond = helper.make_tensor("cond", TensorProto.BOOL, [], [True])
    model.graph.initializer.append(cond)
    model.graph.node.append(helper.make_node("If", ["cond"], ["branch_out"], then_branch=branch, else_branch=branch))
    onnx.save(model, str(folder / "model.onnx"))


def _edit_external(folder: Path, edit: Callable[[onnx.TensorProto], None]) -> None:
    _externalize(folder / "model.onnx", "W", "weights.bin", folder / "weights.bin")
    model = onnx.load(str(folder / "model.onnx"), load_external_data=False)
    edit(next(t for t in model.graph.initializer if t.name == "W"))
    onnx.save(model, str(folder / "model.onnx"))


def _set_external(tensor: onnx.TensorProto, key: str, value: str | None) -> None:
    kept = [(e.key, e.value) for e in tensor.external_data if e.key != key]
    del tensor.external_data[:]
    for k, v in kept + ([(key, value)] if value is not None else []):
        entry = tensor.external_data.add()
        entry.key, entry.value = k, v


def _ext_no_length_huge_shape(folder: Path, outside: Path) -> None:
    def edit(tensor: onnx.TensorProto) -> None:
        _set_external(tensor, "length", None)
        del tensor.dims[:]
        tensor.dims.extend([1 << 20, 1 << 14])  # 64 GiB of floats, from a 48-byte file

    _edit_external(folder, edit)


def _ext_no_length_past_end(folder: Path, outside: Path) -> None:
    _edit_external(folder, lambda t: (_set_external(t, "length", None), _set_external(t, "offset", "40")))


def _ext_offset_not_a_number(folder: Path, outside: Path) -> None:
    _edit_external(folder, lambda t: _set_external(t, "offset", "abc"))


def _ext_length_not_the_shape(folder: Path, outside: Path) -> None:
    _edit_external(folder, lambda t: _set_external(t, "length", "8"))


CLASSIFY_CASES: list[tuple[str, Mutation, str]] = [
    ("external data '../outside/weights.bin'", _ext_parent, "points outside the model's folder"),
    ("external data at an absolute path", _ext_absolute, "points to an absolute path"),
    ("external data at a Windows absolute path", _ext_windows, "points to an absolute path"),
    ("external data through a symlink out of the folder", _ext_symlink, "is a link to a file outside"),
    ("external data in a branch of an If node, outside the folder", _subgraph_external, "points outside"),
    ("external data file shorter than the model says", _ext_truncated, "truncated"),
    ("model.onnx is a symlink out of the folder", _model_symlink, "is a link to a file outside"),
    ("manifest names '../outside/model.onnx'", _manifest_model_outside, "points outside the model's folder"),
    ("model.onnx far larger than its manifest declares", _larger_than_declared, "but its manifest declares 40"),
    ("custom operator domain (needs a native library)", _custom_ops, "uses custom operators"),
    ("labels file '../outside/secret.txt'", _labels_parent, "The labels file named by the manifest"),
    ("labels file at an absolute path", _labels_absolute, "points to an absolute path"),
    ("model.onnx is not an ONNX file", _not_onnx, "is not a valid ONNX model"),
    ("manifest.json is not JSON", _manifest_not_json, "is not valid"),
    ("no manifest.json", _no_manifest, "has no manifest.json"),
    ("external data without a length, shape of 64 GiB", _ext_no_length_huge_shape, "but weights.bin has only 48 bytes"),
    ("external data without a length, offset near the end", _ext_no_length_past_end, "reaches byte 88"),
    ("external data offset 'abc'", _ext_offset_not_a_number, "that is not a byte count ('abc')"),
    ("external data length that does not match the shape", _ext_length_not_the_shape, "its shape needs 48"),
]


@pytest.fixture
def photo(tmp_path: Path) -> Path:
    path = tmp_path / "red.png"
    Image.new("RGB", (32, 32), (240, 0, 0)).save(path)
    return path


@pytest.mark.parametrize(("name", "mutate", "words"), CLASSIFY_CASES, ids=[c[0] for c in CLASSIFY_CASES])
def test_classify_refuses_an_untrusted_classifier_before_loading_it(
    name: str,
    mutate: Mutation,
    words: str,
    tmp_path: Path,
    photo: Path,
    native_guard: NativeGuard,
    capsys: pytest.CaptureFixture[str],
    reliability: Recorder,
) -> None:
    folder = colour_classifier(tmp_path / "evil")
    mutate(folder, tmp_path / "outside")
    code, err = _cli(["classify", str(photo), "--model", str(folder), "--device", "cpu"], capsys)
    reliability.record(CATEGORY, f"classify --model: {name}", "refused before ONNX Runtime opens it", err)
    assert code == 2, err
    assert words in err
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    assert SECRET not in err
    assert native_guard.calls == []


def test_the_traps_are_on_the_classifier_path(
    tmp_path: Path, photo: Path, native_guard: NativeGuard, capsys: pytest.CaptureFixture[str]
) -> None:
    """Control: a clean folder does reach InferenceSession, so the traps above can see a native load."""
    folder = colour_classifier(tmp_path / "clean")
    code, _ = _cli(["classify", str(photo), "--model", str(folder), "--device", "cpu"], capsys)
    assert code != 0 and any(c.startswith("onnxruntime.InferenceSession") for c in native_guard.calls)


# --- chat --model EVIL_DIR --------------------------------------------------------------------------


def _config(folder: Path) -> dict[str, object]:
    return dict(json.loads((folder / "genai_config.json").read_text(encoding="utf-8")))


def _set_config(folder: Path, edit: Callable[[dict[str, object]], None]) -> None:
    config = _config(folder)
    edit(config)
    (folder / "genai_config.json").write_text(json.dumps(config), encoding="utf-8")


def _decoder(config: dict[str, object]) -> dict[str, object]:
    model = config["model"]
    assert isinstance(model, dict)
    decoder = model["decoder"]
    assert isinstance(decoder, dict)
    return decoder


def _decoder_file(value: str) -> Mutation:
    def mutate(folder: Path, outside: Path) -> None:
        outside.mkdir(parents=True, exist_ok=True)
        shutil.copy2(folder / "model.onnx", outside / "model.onnx")
        _set_config(folder, lambda c: _decoder(c).update(filename=value.replace("OUTSIDE", str(outside))))

    return mutate


def _decoder_symlink(folder: Path, outside: Path) -> None:
    outside.mkdir(parents=True, exist_ok=True)
    shutil.move(str(folder / "model.onnx"), str(outside / "model.onnx"))
    os.symlink(outside / "model.onnx", folder / "model.onnx")


def _tokenizer_symlink(folder: Path, outside: Path) -> None:
    secret = _secret(outside)
    (folder / "tokenizer.json").unlink()
    os.symlink(secret, folder / "tokenizer.json")


def _template_symlink(folder: Path, outside: Path) -> None:
    secret = _secret(outside)
    (folder / "chat_template.jinja").unlink()
    os.symlink(secret, folder / "chat_template.jinja")


def _config_symlink(folder: Path, outside: Path) -> None:
    outside.mkdir(parents=True, exist_ok=True)
    shutil.move(str(folder / "genai_config.json"), str(outside / "genai_config.json"))
    os.symlink(outside / "genai_config.json", folder / "genai_config.json")


def _custom_ops_library(folder: Path, outside: Path) -> None:
    (outside).mkdir(parents=True, exist_ok=True)
    (outside / "libevil.so").write_bytes(b"\x7fELF")
    _set_config(
        folder,
        lambda c: _decoder(c)["session_options"].update(custom_ops_library=str(outside / "libevil.so")),  # type: ignore[attr-defined]
    )


def _backend_path(folder: Path, outside: Path) -> None:
    options = [{"qnn": {"backend_path": "C:\\Users\\Public\\evil\\QnnHtp.dll"}}]
    _set_config(folder, lambda c: _decoder(c)["session_options"].update(provider_options=options))  # type: ignore[attr-defined]


def _ep_plugin(folder: Path, outside: Path) -> None:
    _set_config(folder, lambda c: c.update(ep_library={"name": "EvilEP", "path": "evil_ep.dll"}))


def _genai_external_outside(folder: Path, outside: Path) -> None:
    outside.mkdir(parents=True, exist_ok=True)
    shutil.move(str(folder / "model.onnx.data"), str(outside / "model.onnx.data"))
    model = onnx.load(str(folder / "model.onnx"), load_external_data=False)
    for tensor in model.graph.initializer:
        for entry in tensor.external_data:
            if entry.key == "location":
                entry.value = "../outside/model.onnx.data"
    onnx.save(model, str(folder / "model.onnx"))


def _genai_custom_ops(folder: Path, outside: Path) -> None:
    _custom_op_model(folder / "model.onnx")


def _config_not_json(folder: Path, outside: Path) -> None:
    (folder / "genai_config.json").write_text("{ 'model': oops", encoding="utf-8")


def _no_template(folder: Path, outside: Path) -> None:
    (folder / "chat_template.jinja").unlink()


def _no_tokenizer(folder: Path, outside: Path) -> None:
    (folder / "tokenizer.json").unlink()


def _nul_in_name(folder: Path, outside: Path) -> None:
    _set_config(folder, lambda c: _decoder(c).update(filename="model.onnx\u0000.txt"))


def _huge_context(folder: Path, outside: Path) -> None:
    _set_config(folder, lambda c: c["model"].update(context_length="all of it"))  # type: ignore[attr-defined]


CHAT_CASES: list[tuple[str, Mutation, str]] = [
    ("decoder filename '../outside/model.onnx'", _decoder_file("../outside/model.onnx"), "with '..'"),
    ("decoder filename '..\\\\outside\\\\model.onnx' (Windows)", _decoder_file("..\\outside\\model.onnx"), "'..'"),
    ("decoder filename at an absolute path", _decoder_file("OUTSIDE/model.onnx"), "points to an absolute path"),
    ("decoder model.onnx is a symlink out of the folder", _decoder_symlink, "outside the model's folder"),
    ("decoder external data outside the folder", _genai_external_outside, "points outside the model's folder"),
    ("decoder uses a custom operator domain", _genai_custom_ops, "uses custom operators"),
    ("tokenizer.json is a symlink to a secret file", _tokenizer_symlink, "outside the model's folder"),
    ("chat_template.jinja is a symlink to a secret file", _template_symlink, "outside the model's folder"),
    ("genai_config.json is a symlink out of the folder", _config_symlink, "outside the model's folder"),
    ("config names a custom_ops_library", _custom_ops_library, "asks to load a native library"),
    ("config names a QNN backend_path DLL", _backend_path, "names a device backend library"),
    ("config names an EP plugin library", _ep_plugin, "asks to load a native library"),
    ("file name with a NUL character", _nul_in_name, "NUL character"),
    ("genai_config.json is not JSON", _config_not_json, "is not valid JSON"),
    ("context_length is not a number", _huge_context, "no valid model.context_length"),
    ("no chat template", _no_template, "has no chat template"),
    ("no tokenizer.json", _no_tokenizer, "has no tokenizer.json"),
]


@pytest.fixture
def genai_copy(tiny_llm: Path, tmp_path: Path) -> Path:
    folder = tmp_path / "evil-llm"
    shutil.copytree(tiny_llm, folder)
    return folder


@pytest.mark.parametrize(("name", "mutate", "words"), CHAT_CASES, ids=[c[0] for c in CHAT_CASES])
def test_chat_refuses_an_untrusted_genai_folder_before_loading_it(
    name: str,
    mutate: Mutation,
    words: str,
    genai_copy: Path,
    tmp_path: Path,
    native_guard: NativeGuard,
    capsys: pytest.CaptureFixture[str],
    reliability: Recorder,
) -> None:
    mutate(genai_copy, tmp_path / "outside")
    code, err = _cli(["chat", "--model", str(genai_copy), "--prompt", "hi", "--device", "cpu"], capsys)
    reliability.record(CATEGORY, f"chat --model: {name}", "refused before onnxruntime-genai reads it", err)
    assert code == 2, err
    assert words in err
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    assert SECRET not in err
    assert native_guard.calls == []


def test_chat_given_a_file_instead_of_a_folder(
    tmp_path: Path, native_guard: NativeGuard, capsys: pytest.CaptureFixture[str], reliability: Recorder
) -> None:
    file = tmp_path / "model.onnx"
    file.write_bytes(b"\0" * 64)
    code, err = _cli(["chat", "--model", str(file), "--prompt", "hi"], capsys)
    reliability.record(CATEGORY, "chat --model: a file instead of a folder", "refused", err)
    assert code == 2 and "is a file, not a model folder" in err and native_guard.calls == []


def test_the_traps_are_on_the_chat_path(
    genai_copy: Path, native_guard: NativeGuard, capsys: pytest.CaptureFixture[str]
) -> None:
    """Control: the clean folder passes validation and reaches og.Config, where the traps are."""
    code, _ = _cli(["chat", "--model", str(genai_copy), "--prompt", "hi", "--device", "cpu"], capsys)
    assert code == 2 and native_guard.calls and native_guard.calls[0].startswith("onnxruntime_genai.Config")


# --- models import EVIL ------------------------------------------------------------------------------


def _ships_library(name: str) -> Mutation:
    def mutate(folder: Path, outside: Path) -> None:
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_bytes(b"\x7fELF not really")

    return mutate


def _extra_symlink(folder: Path, outside: Path) -> None:
    secret = _secret(outside)
    os.symlink(secret, folder / "README.md")


def _classifier_manifest_library(folder: Path, outside: Path) -> None:
    edit_manifest(folder, lambda m: classifier_section(m).update(custom_ops_library="evil.dll"))


IMPORT_FOLDER_CASES: list[tuple[str, str, Mutation, str]] = [
    ("genai folder whose decoder is '../outside/model.onnx'", "genai", _decoder_file("../outside/model.onnx"), "'..'"),
    ("genai folder that ships a .so", "genai", _ships_library("libcustom_ops.so"), "contains a native library"),
    ("genai folder that ships a .dll in a subfolder", "genai", _ships_library("bin/evil.dll"), "native library"),
    ("genai folder with a symlink to a secret file", "genai", _extra_symlink, "outside the model's folder"),
    ("genai folder whose config names a library", "genai", _custom_ops_library, "asks to load a native library"),
    ("genai folder with a QNN backend_path", "genai", _backend_path, "names a device backend library"),
    ("classifier folder whose manifest names a library", "classifier", _classifier_manifest_library, "native library"),
    ("classifier folder with labels outside the folder", "classifier", _labels_parent, "points outside"),
    ("classifier folder with external data outside", "classifier", _ext_parent, "points outside the model's folder"),
    ("classifier folder with a custom operator", "classifier", _custom_ops, "uses custom operators"),
    ("classifier folder that ships a .pyd", "classifier", _ships_library("helper.pyd"), "native library"),
]


def _nothing_imported() -> list[str]:
    folder = paths.user_models_dir()
    return sorted(p.name for p in folder.iterdir()) if folder.is_dir() else []


@pytest.mark.parametrize(
    ("name", "kind", "mutate", "words"), IMPORT_FOLDER_CASES, ids=[c[0] for c in IMPORT_FOLDER_CASES]
)
def test_import_refuses_an_untrusted_folder_and_adds_nothing(
    name: str,
    kind: str,
    mutate: Mutation,
    words: str,
    tiny_llm: Path,
    tmp_path: Path,
    native_guard: NativeGuard,
    capsys: pytest.CaptureFixture[str],
    reliability: Recorder,
) -> None:
    if kind == "genai":
        folder = tmp_path / "evil"
        shutil.copytree(tiny_llm, folder)
    else:
        folder = colour_classifier(tmp_path / "evil")
    mutate(folder, tmp_path / "outside")
    code, err = _cli(["models", "import", str(folder)], capsys)
    reliability.record(CATEGORY, f"models import: {name}", "refused; nothing added to the library", err)
    assert code == 2, err
    assert words in err
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    assert native_guard.calls == []
    assert _nothing_imported() == []


IMPORT_FILE_CASES: list[tuple[str, Mutation, str]] = [
    ("classifier .onnx with external data '../outside/weights.bin'", _ext_parent, "points outside the model's folder"),
    ("classifier .onnx with external data through a symlink", _ext_symlink, "is a link to a file outside"),
    ("classifier .onnx with a custom operator", _custom_ops, "uses custom operators"),
    ("classifier .onnx that is not ONNX", _not_onnx, "is not a valid ONNX model"),
]


@pytest.mark.parametrize(("name", "mutate", "words"), IMPORT_FILE_CASES, ids=[c[0] for c in IMPORT_FILE_CASES])
def test_import_refuses_an_untrusted_onnx_file_and_adds_nothing(
    name: str,
    mutate: Mutation,
    words: str,
    tmp_path: Path,
    native_guard: NativeGuard,
    capsys: pytest.CaptureFixture[str],
    reliability: Recorder,
) -> None:
    folder = colour_classifier(tmp_path / "evil", manifest=False)
    mutate(folder, tmp_path / "outside")
    code, err = _cli(["models", "import", str(folder / "model.onnx"), "--labels", str(folder / "labels.txt")], capsys)
    reliability.record(CATEGORY, f"models import: {name}", "refused; nothing added to the library", err)
    assert code == 2, err
    assert words in err
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    assert native_guard.calls == []
    assert _nothing_imported() == []


def test_the_traps_are_on_the_import_path(
    tmp_path: Path, native_guard: NativeGuard, capsys: pytest.CaptureFixture[str]
) -> None:
    """Control: a clean classifier import gets as far as opening the model on the CPU."""
    folder = colour_classifier(tmp_path / "clean")
    code, _ = _cli(["models", "import", str(folder)], capsys)
    assert code != 0 and any(c.startswith("onnxruntime.InferenceSession") for c in native_guard.calls)
    assert _nothing_imported() == []


# --- a model for a newer runtime ---------------------------------------------------------------------


@pytest.mark.parametrize(("what", "words"), [("opset 99", "(opset 99)"), ("IR version 99", "(IR version 99)")])
def test_a_model_for_a_newer_runtime_says_so(
    what: str, words: str, tmp_path: Path, photo: Path, capsys: pytest.CaptureFixture[str], reliability: Recorder
) -> None:
    folder = colour_classifier(tmp_path / "newer")
    model = onnx.load(str(folder / "model.onnx"))
    if what.startswith("opset"):
        model.opset_import[0].version = 99
    else:
        model.ir_version = 99
    onnx.save(model, str(folder / "model.onnx"))
    code, err = _cli(["classify", str(photo), "--model", str(folder), "--device", "cpu"], capsys)
    err = err.splitlines()[-1] if err else err
    reliability.record(CATEGORY, f"classify --model: a model stamped {what}", "'needs a newer ONNX Runtime'", err)
    assert code == 2, err
    assert "needs a newer ONNX Runtime" in err and words in err and "could not be read" not in err

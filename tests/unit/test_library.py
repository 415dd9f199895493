"""The model library: listing, verification, removal, validated atomic imports, fit hints; no network."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from engines.errors import CancelledError, InputContractError, ModelError, StorageError, StudioError
from engines.models.fit import FITS, MAY_BE_SLOW, WONT_FIT, estimate_fit, kv_cache_bytes
from engines.models.import_manifest import ClassifierOptions, ImportDetails
from engines.models.importer import import_model
from engines.models.library import (
    ModelFile,
    clean_leftovers,
    find_model,
    folder_digest,
    read_entry,
    remove_model,
    scan_library,
    verify_model,
)
from engines.models.manifest import file_entry, list_model_files, read_manifest, sha256_file
from engines.types import CancelToken
from tests.unit.netguard import NetworkAccessError, loopback_only
from tests.unit.tiny_models import colour_classifier

REPO = Path(__file__).resolve().parents[2]
GB = 1_000_000_000


@pytest.fixture(autouse=True)
def no_network() -> Iterator[list[str]]:
    """Every test here runs with the network guard on: nothing may connect beyond loopback."""
    with loopback_only() as blocked:
        yield blocked
    assert not blocked, f"network access attempted: {blocked}"


def _seal(folder: Path, **extra: Any) -> Path:
    """Give a folder a complete manifest (sizes and hashes) on top of what it has."""
    path = folder / "manifest.json"
    data = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {"schema": 1}
    data.update(extra)
    data["files"] = [file_entry(folder, rel) for rel in list_model_files(folder)]
    path.write_text(json.dumps(data), encoding="utf-8")
    return folder


@pytest.fixture
def bundled(tmp_path: Path) -> Path:
    root = tmp_path / "bundled"
    colour = colour_classifier(root / "colours")
    _seal(colour, licence="Apache-2.0", devices=["cpu", "gpu", "npu"], display_name="Colours")
    return root


@pytest.fixture
def user(tmp_path: Path) -> Path:
    path = tmp_path / "user-models"
    path.mkdir()
    return path


def _library_is_empty(user: Path) -> bool:
    return not any(user.iterdir()) or all(p.name == ".downloads" for p in user.iterdir())


def _onnx_source(tmp_path: Path, **kwargs: Any) -> Path:
    src = colour_classifier(tmp_path / "src", manifest=False, **kwargs)
    return src / "model.onnx"


# --------------------------------------------------------------------------------------------
# Listing, verification, removal
# --------------------------------------------------------------------------------------------


def test_scan_lists_bundled_and_user_models_with_manifest_facts(bundled: Path, user: Path, tmp_path: Path) -> None:
    model = _onnx_source(tmp_path)
    import_model(model, user, bundled_dir=bundled,
                 classifier=ClassifierOptions(labels=model.parent / "labels.txt"), details=ImportDetails(name="mine"))
    entries = scan_library(bundled, user)
    assert [(e.name, e.origin) for e in entries] == [("colours", "bundled"), ("mine", "yours")]
    colours = entries[0]
    manifest = read_manifest(bundled / "colours")
    files = tuple(ModelFile(f.path, f.size or 0, f.sha256 or "") for f in manifest.files)
    on_disk = sum(p.stat().st_size for p in (bundled / "colours").iterdir() if p.name != "manifest.json")
    assert colours.size_bytes == sum(f.size for f in files) == on_disk
    assert colours.sha256 == folder_digest(files) and len(colours.sha256) == 64
    assert colours.devices == ("cpu", "gpu", "npu") and colours.licence == "Apache-2.0"
    assert colours.display_name == "Colours" and colours.bundled and colours.usable
    # Same bytes, same digest: the imported copy of the same model has the bundled model's digest.
    assert entries[1].sha256 == colours.sha256


def test_a_folder_with_a_broken_manifest_is_listed_with_its_problem(bundled: Path, user: Path) -> None:
    (user / "broken").mkdir()
    (user / "broken" / "model.onnx").write_bytes(b"x" * 10)
    (user / "broken" / "manifest.json").write_text("{not json", encoding="utf-8")
    (user / ".import-half-done").mkdir()  # work in progress is never listed
    entries = {e.name: e for e in scan_library(bundled, user)}
    assert set(entries) == {"colours", "broken"}
    assert not entries["broken"].usable and "not valid JSON" in entries["broken"].problem
    assert entries["broken"].size_bytes == 10 + len("{not json")


def test_listing_notices_a_missing_or_resized_file_without_rehashing(bundled: Path) -> None:
    (bundled / "colours" / "labels.txt").write_text("only one\n", encoding="utf-8")
    entry = read_entry(bundled / "colours", bundled=True)
    assert not entry.usable and "labels.txt: size" in entry.problem


def test_verify_rehashes_and_reports_each_change(bundled: Path) -> None:
    folder = bundled / "colours"
    assert verify_model(folder).ok
    data = bytearray((folder / "model.onnx").read_bytes())
    data[-1] ^= 0xFF  # same size, different content: only a re-hash can see it
    (folder / "model.onnx").write_bytes(bytes(data))
    (folder / "notes.txt").write_text("added later", encoding="utf-8")
    report = verify_model(folder)
    assert not report.ok
    assert "model.onnx: contents changed (sha256 mismatch)" in report.problems
    assert any(p.startswith("notes.txt: not in the manifest") for p in report.problems)
    assert report.files_checked == 2
    assert read_entry(folder, bundled=True).usable  # the cheap listing check cannot see it; verify can


def test_remove_refuses_bundled_models_and_removes_yours(bundled: Path, user: Path, tmp_path: Path) -> None:
    with pytest.raises(ModelError, match="bundled demo model; bundled models are read-only"):
        remove_model("colours", bundled, user)
    assert (bundled / "colours" / "model.onnx").is_file()
    with pytest.raises(ModelError, match="no model named 'ghost'"):
        remove_model("ghost", bundled, user)
    with pytest.raises(ModelError, match="not a valid model name"):
        remove_model("../colours", bundled, user)
    model = _onnx_source(tmp_path)
    import_model(model, user, classifier=ClassifierOptions(labels=model.parent / "labels.txt"),
                 details=ImportDetails(name="mine"))
    remove_model("mine", bundled, user)
    assert list(user.iterdir()) == []


def test_find_model_prefers_the_users_library(bundled: Path, user: Path) -> None:
    assert find_model("colours", bundled, user).bundled
    with pytest.raises(ModelError, match=r"no model named 'nope'.*models: colours"):
        find_model("nope", bundled, user)


def test_clean_leftovers_removes_only_stale_work_folders(user: Path) -> None:
    old, fresh, model = user / ".import-a-1", user / ".import-b-2", user / "keep"
    for folder in (old, fresh, model):
        folder.mkdir()
    past = time.time() - 7 * 3600
    os.utime(old, (past, past))
    (user / ".removing-x-1").mkdir()
    removed = {p.name for p in clean_leftovers(user)}
    assert removed == {".import-a-1", ".removing-x-1"}
    assert fresh.is_dir() and model.is_dir()


# --------------------------------------------------------------------------------------------
# Importing classifiers
# --------------------------------------------------------------------------------------------


def test_import_onnx_classifier_writes_a_verified_manifest_and_it_classifies(user: Path, tmp_path: Path) -> None:
    from PIL import Image

    from engines.types import DeviceChoice
    from engines.vision.classifier import ImageClassifier

    model = _onnx_source(tmp_path)
    options = ClassifierOptions(labels=model.parent / "labels.txt", mean=(0, 0, 0), std=(255, 255, 255))
    seen: list[tuple[int, int]] = []
    entry = import_model(model, user, classifier=options, details=ImportDetails(licence="MIT"),
                         progress=lambda done, total: seen.append((done, total)))
    assert entry.name == "model" and entry.kind == "image-classifier" and entry.licence == "MIT"
    assert entry.precision == "fp32" and entry.devices == ("cpu", "gpu", "npu")
    manifest = read_manifest(user / "model")
    spec = manifest.classifier
    assert spec is not None and manifest.num_classes == 4
    assert spec["input"] == "pixels" and spec["output"] == "scores" and spec["num_classes"] == 4
    assert spec["input_size"] == [8, 8] and spec["layout"] == "NCHW"  # read from the model's input shape
    assert spec["output_kind"] == "logits"
    assert {f.path: f.sha256 for f in manifest.files} == {
        "model.onnx": sha256_file(model), "labels.txt": sha256_file(model.parent / "labels.txt")}
    assert seen[-1][0] == seen[-1][1] == entry.size_bytes
    assert verify_model(user / "model").ok
    Image.new("RGB", (20, 16), (0, 0, 230)).save(tmp_path / "blue.png")
    classifier = ImageClassifier.from_folder(user / "model", DeviceChoice.parse("cpu"))
    assert classifier.classify(tmp_path / "blue.png").top[0].label == "blue"


def _external_data_classifier(folder: Path, location: str = "weights.bin") -> Path:
    onnx_path = colour_classifier(folder, manifest=False) / "model.onnx"
    model = onnx.load(str(onnx_path))
    onnx.save(model, str(onnx_path), save_as_external_data=True, all_tensors_to_one_file=True,
              location=location, size_threshold=0)
    return onnx_path


def test_import_copies_external_data_from_the_model_folder(user: Path, tmp_path: Path) -> None:
    model = _external_data_classifier(tmp_path / "ext")
    entry = import_model(model, user, classifier=ClassifierOptions(labels=model.parent / "labels.txt"))
    assert {f.path for f in entry.files} == {"model.onnx", "weights.bin", "labels.txt"}
    assert (user / "model" / "weights.bin").read_bytes() == (model.parent / "weights.bin").read_bytes()


def _retarget_external_data(model_path: Path, location: str) -> None:
    model = onnx.load(str(model_path), load_external_data=False)
    for tensor in model.graph.initializer:
        for entry in tensor.external_data:
            if entry.key == "location":
                entry.value = location
    onnx.save(model, str(model_path))


def _custom_op_model(folder: Path) -> Path:
    folder.mkdir(parents=True)
    node = helper.make_node("Magic", ["pixels"], ["scores"], domain="com.example.custom")
    graph = helper.make_graph(
        [node], "custom",
        [helper.make_tensor_value_info("pixels", TensorProto.FLOAT, ["N", 3, 8, 8])],
        [helper.make_tensor_value_info("scores", TensorProto.FLOAT, ["N", 4])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17),
                                                    helper.make_opsetid("com.example.custom", 1)])
    onnx.save(model, str(folder / "model.onnx"))
    (folder / "labels.txt").write_text("a\nb\nc\nd\n", encoding="utf-8")
    return folder / "model.onnx"


def _dynamic_size_model(folder: Path) -> Path:
    folder.mkdir(parents=True)
    w = numpy_helper.from_array(np.ones((3, 4), dtype=np.float32), "W")
    nodes = [helper.make_node("GlobalAveragePool", ["pixels"], ["p"]), helper.make_node("Flatten", ["p"], ["f"]),
             helper.make_node("MatMul", ["f", "W"], ["scores"])]
    graph = helper.make_graph(nodes, "dyn", [helper.make_tensor_value_info("pixels", TensorProto.FLOAT,
                                                                          ["N", 3, "H", "W"])],
                              [helper.make_tensor_value_info("scores", TensorProto.FLOAT, ["N", 4])], [w])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(folder / "model.onnx"))
    (folder / "labels.txt").write_text("a\nb\nc\nd\n", encoding="utf-8")
    return folder / "model.onnx"


def test_dynamic_image_size_needs_size_and_then_imports(user: Path, tmp_path: Path) -> None:
    model = _dynamic_size_model(tmp_path / "dyn")
    labels = model.parent / "labels.txt"
    with pytest.raises(ModelError, match="dynamic image size.*--size"):
        import_model(model, user, classifier=ClassifierOptions(labels=labels))
    entry = import_model(model, user, classifier=ClassifierOptions(labels=labels, input_size=(32, 32)))
    assert (read_manifest(entry.folder).classifier or {}).get("input_size") == [32, 32]


BROKEN_CLASSIFIERS = {
    "labels that do not match the outputs": "No output has 3 classes",
    "an empty labels file": "is empty",
    "a missing labels file": "Labels file not found",
    "a size that contradicts the model": "the manifest says",
    "external data outside the folder": "outside the model's folder",
    "external data that is missing": "is missing",
    "a custom operator domain": r"custom operators \(com\.example\.custom\)",
    "a file that is not ONNX": "not a valid ONNX model",
    "a text file given as the model": "neither a model folder nor an .onnx file",
    "no labels option": "needs its class names",
}


@pytest.mark.parametrize("case", list(BROKEN_CLASSIFIERS))
def test_broken_classifier_imports_each_fail_with_their_own_error(case: str, user: Path, tmp_path: Path) -> None:
    model = _onnx_source(tmp_path)
    labels = model.parent / "labels.txt"
    options: ClassifierOptions | None = ClassifierOptions(labels=labels)
    if case == "labels that do not match the outputs":
        labels.write_text("one\ntwo\nthree\n", encoding="utf-8")
    elif case == "an empty labels file":
        labels.write_text("\n\n", encoding="utf-8")
    elif case == "a missing labels file":
        options = ClassifierOptions(labels=tmp_path / "nope.txt")
    elif case == "a size that contradicts the model":
        options = ClassifierOptions(labels=labels, input_size=(224, 224))
    elif case == "external data outside the folder":
        model = _external_data_classifier(tmp_path / "ext")
        shutil.copy(model.parent / "weights.bin", tmp_path / "outside.bin")
        _retarget_external_data(model, "../outside.bin")
        options = ClassifierOptions(labels=model.parent / "labels.txt")
    elif case == "external data that is missing":
        model = _external_data_classifier(tmp_path / "ext")
        (model.parent / "weights.bin").unlink()
        options = ClassifierOptions(labels=model.parent / "labels.txt")
    elif case == "a custom operator domain":
        model = _custom_op_model(tmp_path / "custom")
        options = ClassifierOptions(labels=model.parent / "labels.txt")
    elif case == "a file that is not ONNX":
        model.write_bytes(b"this is not a protobuf" * 10)
    elif case == "a text file given as the model":
        model = labels
    elif case == "no labels option":
        options = None
    expected = BROKEN_CLASSIFIERS[case]
    with pytest.raises((ModelError, InputContractError), match=expected):
        import_model(model, user, classifier=options)
    assert _library_is_empty(user), f"{case}: something was left in the library: {list(user.iterdir())}"


def test_import_classifier_folder_with_manifest(bundled: Path, user: Path, tmp_path: Path) -> None:
    copy = shutil.copytree(bundled / "colours", tmp_path / "colours-copy")
    entry = import_model(copy, user, bundled_dir=bundled, details=ImportDetails(name="colours-2"))
    assert entry.licence == "Apache-2.0" and entry.display_name == "Colours"
    assert (read_manifest(entry.folder).classifier or {}).get("input") == "pixels"
    manifest = json.loads((copy / "manifest.json").read_text())
    manifest["classifier"]["custom_ops_library"] = "evil.so"
    (copy / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(ModelError, match="native library"):
        import_model(copy, user, details=ImportDetails(name="colours-3"))


def test_names_are_checked_against_the_bundled_and_your_models(bundled: Path, user: Path, tmp_path: Path) -> None:
    model = _onnx_source(tmp_path)
    options = ClassifierOptions(labels=model.parent / "labels.txt")
    with pytest.raises(ModelError, match="name of a bundled demo model"):
        import_model(model, user, bundled_dir=bundled, classifier=options, details=ImportDetails(name="colours"))
    import_model(model, user, classifier=options)
    with pytest.raises(ModelError, match="already in your library"):
        import_model(model, user, classifier=options)
    with pytest.raises(ModelError, match="not a valid model name"):
        import_model(model, user, classifier=options, details=ImportDetails(name="a/b"))


def test_a_cancelled_import_leaves_nothing_behind(user: Path, tmp_path: Path) -> None:
    model = _external_data_classifier(tmp_path / "ext")
    big = model.parent / "weights.bin"
    big.write_bytes(big.read_bytes() + b"\0" * (3 << 20))  # > 1 chunk, still valid (trailing bytes unused)
    token = CancelToken()

    def progress(done: int, total: int) -> None:
        token.cancel()

    with pytest.raises(CancelledError, match="nothing was added"):
        import_model(model, user, classifier=ClassifierOptions(labels=model.parent / "labels.txt"),
                     progress=progress, cancel=token)
    assert list(user.iterdir()) == []


def test_a_full_disk_is_refused_before_copying(user: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    model = _onnx_source(tmp_path)
    monkeypatch.setattr(shutil, "disk_usage", lambda _p: shutil._ntuple_diskusage(10 * GB, 10 * GB - 1000, 1000))  # type: ignore[attr-defined]
    with pytest.raises(StorageError, match="Not enough disk space for this import"):
        import_model(model, user, classifier=ClassifierOptions(labels=model.parent / "labels.txt"))
    assert list(user.iterdir()) == []


def test_a_failure_after_copying_removes_the_staging_folder(
    user: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import engines.models.library as library

    model = _onnx_source(tmp_path)

    def fail(*_args: Any, **_kwargs: Any) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(library, "write_manifest", fail)
    with pytest.raises(OSError):
        import_model(model, user, classifier=ClassifierOptions(labels=model.parent / "labels.txt"))
    assert list(user.iterdir()) == []


# --------------------------------------------------------------------------------------------
# Importing genai folders
# --------------------------------------------------------------------------------------------


@pytest.fixture
def genai_copy(tiny_llm: Path, tmp_path: Path) -> Path:
    return shutil.copytree(tiny_llm, tmp_path / "tiny-chat")


def test_import_genai_folder_records_chat_facts(genai_copy: Path, user: Path) -> None:
    (genai_copy / "README.md").write_text("---\nlicense: apache-2.0\n---\n# Tiny\n", encoding="utf-8")
    (genai_copy / ".cache").mkdir()
    (genai_copy / ".cache" / "junk.lock").write_text("x")
    entry = import_model(genai_copy, user)
    assert entry.kind == "genai-llm" and entry.name == "tiny-chat" and entry.licence == "apache-2.0"
    assert entry.precision == "fp32" and entry.devices == ("cpu",) and entry.context_length == 256
    manifest = read_manifest(entry.folder)
    assert manifest.kv_cache_dtype == "float32" and manifest.context_length == 256
    assert manifest.chat is not None and manifest.chat["chat_template"] == "chat_template.jinja"
    assert {f.path for f in entry.files} == {
        "README.md", "chat_template.jinja", "genai_config.json", "model.onnx", "model.onnx.data",
        "tokenizer.json", "tokenizer_config.json"}
    assert verify_model(entry.folder).ok


def _edit_config(folder: Path, change: Any) -> None:
    path = folder / "genai_config.json"
    config = json.loads(path.read_text(encoding="utf-8"))
    change(config)
    path.write_text(json.dumps(config), encoding="utf-8")


def _break(case: str, folder: Path, tmp_path: Path) -> None:
    decoder = lambda c: c["model"]["decoder"]  # noqa: E731
    if case == "no genai_config.json":
        (folder / "genai_config.json").unlink()
    elif case == "config is not JSON":
        (folder / "genai_config.json").write_text("{oops", encoding="utf-8")
    elif case == "no tokenizer.json":
        (folder / "tokenizer.json").unlink()
    elif case == "no chat template":
        (folder / "chat_template.jinja").unlink()
    elif case == "decoder file missing":
        (folder / "model.onnx").unlink()
    elif case == "external data missing":
        (folder / "model.onnx.data").unlink()
    elif case == "decoder path with ..":
        shutil.copy(folder / "model.onnx", tmp_path / "model.onnx")
        _edit_config(folder, lambda c: decoder(c).update(filename="../model.onnx"))
    elif case == "absolute decoder path":
        _edit_config(folder, lambda c: decoder(c).update(filename=str((folder / "model.onnx").resolve())))
    elif case == "symlink out of the folder":
        outside = tmp_path / "elsewhere.data"
        shutil.move(folder / "model.onnx.data", outside)
        (folder / "model.onnx.data").symlink_to(outside)
    elif case == "config names a custom-op library":
        _edit_config(folder, lambda c: decoder(c)["session_options"].update(custom_ops_library="libevil.so"))
    elif case == "config names an EP backend library by path":
        _edit_config(folder, lambda c: decoder(c)["session_options"].update(
            provider_options=[{"qnn": {"backend_path": "/tmp/libQnnHtp.so"}}]))
    elif case == "a native library in the folder":
        (folder / "custom_ops.dll").write_bytes(b"MZ")
    elif case == "the path is a file":
        pass


BROKEN_GENAI = {
    "no genai_config.json": "not a model folder",
    "config is not JSON": "not valid JSON",
    "no tokenizer.json": "has no tokenizer.json",
    "no chat template": "no chat template",
    "decoder file missing": r"is missing \(model.onnx\)",
    "external data missing": "missing",
    "decoder path with ..": "'\\.\\.'",
    "absolute decoder path": "absolute path",
    "symlink out of the folder": "outside the model",
    "config names a custom-op library": "native library",
    "config names an EP backend library by path": "backend library",
    "a native library in the folder": "contains a native library",
    "the path is a file": "neither a model folder nor an .onnx file",
}


@pytest.mark.parametrize("case", list(BROKEN_GENAI))
def test_broken_genai_folders_each_fail_with_their_own_error(
    case: str, genai_copy: Path, user: Path, tmp_path: Path
) -> None:
    _break(case, genai_copy, tmp_path)
    source = genai_copy / "tokenizer_config.json" if case == "the path is a file" else genai_copy
    with pytest.raises(StudioError, match=BROKEN_GENAI[case]):
        import_model(source, user)
    assert list(user.iterdir()) == [], f"{case}: something was left in the library"


def test_links_inside_the_folder_are_copied_as_files(genai_copy: Path, user: Path) -> None:
    shutil.move(genai_copy / "chat_template.jinja", genai_copy / "template-real.jinja")
    (genai_copy / "chat_template.jinja").symlink_to("template-real.jinja")
    entry = import_model(genai_copy, user)
    copied = entry.folder / "chat_template.jinja"
    assert copied.is_file() and not copied.is_symlink()


# --------------------------------------------------------------------------------------------
# Fit hints
# --------------------------------------------------------------------------------------------


def _genai_like(folder: Path, weights: int, *, layers: int = 32, kv_heads: int = 8, head: int = 128,
                context: int = 4096, max_length: int = 4096, kv: str | None = None) -> Path:
    folder.mkdir(parents=True)
    config = {"model": {"context_length": context, "decoder": {
        "filename": "model.onnx", "num_hidden_layers": layers, "num_key_value_heads": kv_heads,
        "num_attention_heads": 32, "head_size": head, "hidden_size": 4096}},
        "search": {"max_length": max_length}}
    (folder / "genai_config.json").write_text(json.dumps(config), encoding="utf-8")
    files = [{"path": "genai_config.json", "size": 10, "sha256": "0" * 64},
             {"path": "model.onnx.data", "size": weights, "sha256": "0" * 64}]
    manifest: dict[str, Any] = {"schema": 1, "name": folder.name, "kind": "genai-llm", "files": files}
    if kv:
        manifest["chat"] = {"kv_cache_dtype": kv}
    (folder / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    return folder


def test_kv_cache_is_layers_heads_head_size_two_context_bytes() -> None:
    config = {"model": {"decoder": {"num_hidden_layers": 32, "num_key_value_heads": 8, "head_size": 128}}}
    size, detail = kv_cache_bytes(config, 4096, 2)
    assert size == 32 * 8 * 128 * 2 * 4096 * 2 == 536_870_912
    assert detail == "32 layers x 8 KV heads x 128 head size x 2 x 4096 tokens x 2 B"
    no_head_size = {"model": {"decoder": {"num_hidden_layers": 2, "num_attention_heads": 4, "hidden_size": 64}}}
    assert kv_cache_bytes(no_head_size, 10, 4)[0] == 2 * 4 * 16 * 2 * 10 * 4  # kv heads default to heads


def test_fit_verdicts_with_the_numbers(tmp_path: Path) -> None:
    folder = _genai_like(tmp_path / "phi", weights=2 * GB, kv="float16")
    hint = estimate_fit(folder, memory=(16 * GB, 32 * GB))
    assert hint.kv_cache_bytes == 536_870_912 and hint.weights_bytes == 2 * GB and hint.context == 4096
    assert hint.verdict == FITS
    assert hint.message().startswith("Fits: needs ~2.8 GB (weights 2.0 GB, KV cache 536.9 MB for 4,096 tokens, "
                                    "working memory ~268.4 MB); 16.0 GB of 32.0 GB RAM free.")
    assert estimate_fit(folder, memory=(3 * GB, 8 * GB)).verdict == MAY_BE_SLOW  # > 80 % of free, < installed
    wont = estimate_fit(folder, memory=(1 * GB, 2 * GB))
    assert wont.verdict == WONT_FIT and "Won't fit" in wont.message() and "1.0 GB of 2.0 GB RAM free" in wont.message()


def test_fit_uses_the_chosen_context_capped_by_the_model(tmp_path: Path) -> None:
    folder = _genai_like(tmp_path / "m", weights=GB, context=8192, max_length=2048)
    assert estimate_fit(folder, memory=(64 * GB, 64 * GB)).context == 2048  # the config's max_length
    assert estimate_fit(folder, 4096, memory=(64 * GB, 64 * GB)).context == 4096
    capped = estimate_fit(folder, 1_000_000, memory=(64 * GB, 64 * GB))
    assert capped.context == 8192
    assert capped.kv_cache_bytes == 32 * 8 * 128 * 2 * 8192 * 4  # no recorded type: CPU build, fp32 cache


def test_fit_for_the_demo_chat_model_numbers(tiny_llm: Path) -> None:
    hint = estimate_fit(tiny_llm, memory=(8 * GB, 16 * GB))  # not imported: sizes from the files on disk
    assert hint.kv_cache_bytes == 2 * 2 * 16 * 2 * 256 * 4
    assert hint.weights_bytes == sum(p.stat().st_size for p in tiny_llm.glob("model.onnx*"))
    assert hint.verdict == FITS


# --------------------------------------------------------------------------------------------
# No network
# --------------------------------------------------------------------------------------------


def test_the_guard_blocks_the_internet_and_allows_loopback(no_network: list[str]) -> None:
    import socket

    with socket.socket() as s, pytest.raises(NetworkAccessError):
        s.connect(("203.0.113.7", 443))
    with pytest.raises(NetworkAccessError):
        socket.getaddrinfo("huggingface.co", 443)
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    with server, socket.create_connection(server.getsockname(), timeout=5):
        pass
    assert no_network == ["connect ('203.0.113.7', 443)", "lookup 'huggingface.co'"]
    no_network.clear()  # the attempts above were the point of this test


def test_the_guard_records_attempts_even_when_the_error_is_swallowed() -> None:
    import socket

    # the code under test might swallow the error: the record stays
    with loopback_only() as blocked, contextlib.suppress(Exception):
        socket.create_connection(("198.51.100.1", 80), timeout=1)
    assert len(blocked) == 1 and "198.51.100.1" in blocked[0]


GUARDED_CLI = """
import sys
sys.path.insert(0, {repo!r})
from tests.unit.netguard import install
blocked = install()
import engines.models.downloads, engines.models.library, engines.models.importer
assert "huggingface_hub" not in sys.modules, "importing the engines loaded huggingface_hub"
from app.cli import run
codes = [run(["models", "list"]), run(["models", "catalog"]), run(["models", "verify"]),
         run(["models", "download", "qwen2.5-0.5b-instruct-cpu-int4"])]
print("codes", codes, "blocked", blocked)
sys.exit(0 if codes == [0, 0, 0, 2] and not blocked else 1)
"""


def test_default_paths_touch_no_network(tmp_path: Path) -> None:
    """Import, list, catalog, verify and a forbidden download, in a fresh process with the guard
    installed before anything is imported."""
    env = {**os.environ, "NPU_STUDIO_HOME": str(tmp_path / "home")}
    env.pop("HF_ENDPOINT", None)
    result = subprocess.run([sys.executable, "-c", GUARDED_CLI.format(repo=str(REPO))], capture_output=True,
                            text=True, env=env, cwd=tmp_path, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "codes [0, 0, 0, 2] blocked []" in result.stdout
    assert "Downloads are turned off" in result.stderr

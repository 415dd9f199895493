"""Model folder manifests: hashing, entries, atomic writes and verification against real files."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

import pytest

from engines.errors import ModelError
from engines.models.manifest import (
    MANIFEST_NAME,
    SCHEMA_VERSION,
    Manifest,
    ManifestFile,
    file_entry,
    has_manifest,
    list_model_files,
    manifest_path,
    read_manifest,
    sha256_file,
    verify_files,
    write_manifest,
)
from engines.models.paths import resolve_inside


def _make_model(root: Path) -> dict[str, Any]:
    (root / "sub").mkdir(parents=True)
    (root / "model.onnx").write_bytes(b"\x08\x07fake-onnx-bytes" * 1000)
    (root / "labels.txt").write_text("tench\ngoldfish\n", encoding="utf-8")
    (root / "sub" / "extra.bin").write_bytes(bytes(range(256)))
    files = [file_entry(root, rel) for rel in list_model_files(root)]
    return {"schema": SCHEMA_VERSION, "name": "demo", "files": files}


def _written(root: Path, document: dict[str, Any]) -> Manifest:
    """`document` as the folder's manifest, read back through the one reader."""
    write_manifest(root, document)
    return read_manifest(root, require_schema=False)


def test_sha256_matches_hashlib_across_chunk_boundary(tmp_path: Path) -> None:
    data = os.urandom((1 << 20) + 123)
    path = tmp_path / "blob.bin"
    path.write_bytes(data)
    assert sha256_file(path) == hashlib.sha256(data).hexdigest()


def test_file_entry_records_size_hash_and_posix_path(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "b.txt").write_bytes(b"hello")
    entry = file_entry(tmp_path, "a/b.txt")
    assert entry == {"path": "a/b.txt", "size": 5, "sha256": hashlib.sha256(b"hello").hexdigest()}


def test_file_entry_of_missing_file_is_a_model_error(tmp_path: Path) -> None:
    with pytest.raises(ModelError, match=r"not a file"):
        file_entry(tmp_path, "nope.onnx")


def test_list_model_files_skips_the_manifest(tmp_path: Path) -> None:
    manifest = _make_model(tmp_path)
    write_manifest(tmp_path, manifest)
    assert list_model_files(tmp_path) == ["labels.txt", "model.onnx", "sub/extra.bin"]


def test_matching_folder_has_no_problems(tmp_path: Path) -> None:
    manifest = _make_model(tmp_path)
    assert verify_files(_written(tmp_path, manifest)) == []


def test_size_change_is_reported(tmp_path: Path) -> None:
    manifest = _make_model(tmp_path)
    with open(tmp_path / "labels.txt", "a", encoding="utf-8") as handle:
        handle.write("extra line\n")
    problems = verify_files(_written(tmp_path, manifest))
    assert len(problems) == 1
    assert problems[0].startswith("labels.txt: size")


def test_same_size_content_change_is_caught_only_by_hash(tmp_path: Path) -> None:
    manifest = _make_model(tmp_path)
    path = tmp_path / "model.onnx"
    data = bytearray(path.read_bytes())
    data[100] ^= 0xFF
    path.write_bytes(bytes(data))
    assert verify_files(_written(tmp_path, manifest)) == ["model.onnx: contents changed (sha256 mismatch)"]
    assert verify_files(_written(tmp_path, manifest), check_hashes=False) == []


def test_missing_file_is_reported(tmp_path: Path) -> None:
    manifest = _make_model(tmp_path)
    (tmp_path / "sub" / "extra.bin").unlink()
    assert verify_files(_written(tmp_path, manifest)) == ["sub/extra.bin: missing"]


@pytest.mark.parametrize(
    "bad_path",
    ["../outside.txt", "sub/../../outside.txt", "/etc/passwd", "C:/Windows/win.ini", "..\\outside.txt", ""],
)
def test_paths_escaping_the_folder_are_rejected(tmp_path: Path, bad_path: str) -> None:
    model = tmp_path / "model"
    model.mkdir()
    outside = tmp_path / "outside.txt"
    outside.write_bytes(b"secret")
    manifest = {
        "schema": SCHEMA_VERSION,
        "files": [{"path": bad_path, "size": 6, "sha256": hashlib.sha256(b"secret").hexdigest()}],
    }
    problems = verify_files(_written(model, manifest))
    assert len(problems) == 1
    assert "outside the model folder" in problems[0] or "no path" in problems[0]
    with pytest.raises(ModelError):
        resolve_inside(model, bad_path)


def test_symlink_leaving_the_folder_is_rejected(tmp_path: Path) -> None:
    model = tmp_path / "model"
    model.mkdir()
    outside = tmp_path / "outside.txt"
    outside.write_bytes(b"secret")
    try:
        (model / "link.txt").symlink_to(outside)
    except OSError:
        pytest.fail("this test needs symbolic links; the filesystem refused to create one")
    manifest = {
        "schema": SCHEMA_VERSION,
        "files": [{"path": "link.txt", "size": 6, "sha256": hashlib.sha256(b"secret").hexdigest()}],
    }
    assert verify_files(_written(model, manifest)) == ["link.txt: path points outside the model folder"]


def test_malformed_entries_are_problems_not_exceptions(tmp_path: Path) -> None:
    (tmp_path / "a.bin").write_bytes(b"x")
    good = file_entry(tmp_path, "a.bin")
    manifest: dict[str, Any] = {
        "files": [
            "not-an-object",
            {"size": 1, "sha256": good["sha256"]},
            {"path": "a.bin", "size": "1", "sha256": good["sha256"]},
            {"path": "b.bin", "size": 1, "sha256": "abc"},
            good,
        ]
    }
    problems = verify_files(_written(tmp_path, manifest))
    assert problems == [
        "files[0] is not an object",
        "files[1] has no path",
        "a.bin: size is missing or invalid",
        "b.bin: sha256 is missing or invalid",
        "a.bin: listed twice",
    ]
    assert verify_files(_written(tmp_path, {"files": []})) == ["the manifest lists no files"]
    assert verify_files(_written(tmp_path, {})) == ["the manifest has no 'files' list"]


def test_write_then_load_round_trips_and_leaves_no_temp_files(tmp_path: Path) -> None:
    manifest = _make_model(tmp_path)
    manifest["display_name"] = "Démo ✓"
    write_manifest(tmp_path, manifest)
    assert read_manifest(tmp_path).document == manifest
    assert read_manifest(tmp_path).title == "Démo ✓"
    manifest["name"] = "renamed"
    write_manifest(tmp_path, manifest)
    assert read_manifest(tmp_path).name == "renamed"
    leftovers = [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")]
    assert leftovers == []


def test_read_manifest_errors_are_specific(tmp_path: Path) -> None:
    with pytest.raises(ModelError, match=r"No manifest\.json"):
        read_manifest(tmp_path)
    (tmp_path / MANIFEST_NAME).write_text("{not json", encoding="utf-8")
    with pytest.raises(ModelError, match="not valid JSON"):
        read_manifest(tmp_path)
    (tmp_path / MANIFEST_NAME).write_text("[1, 2]", encoding="utf-8")
    with pytest.raises(ModelError, match="JSON object"):
        read_manifest(tmp_path)
    (tmp_path / MANIFEST_NAME).write_text(json.dumps({"schema": 99, "files": []}), encoding="utf-8")
    with pytest.raises(ModelError, match="schema 99"):
        read_manifest(tmp_path)
    (tmp_path / MANIFEST_NAME).write_text(json.dumps({"schema": SCHEMA_VERSION}), encoding="utf-8")
    with pytest.raises(ModelError, match="no 'files' list"):
        read_manifest(tmp_path)


def test_the_type_reads_each_field_and_wrong_types_read_as_absent(tmp_path: Path) -> None:
    assert not has_manifest(tmp_path) and manifest_path(tmp_path) == tmp_path / MANIFEST_NAME
    (tmp_path / MANIFEST_NAME).mkdir()
    assert not has_manifest(tmp_path), "a folder named manifest.json is no manifest"
    (tmp_path / MANIFEST_NAME).rmdir()
    manifest = _written(tmp_path, {
        "schema": SCHEMA_VERSION, "name": "net-qdq", "display_name": "Net", "kind": "image-classifier",
        "precision": "qdq-a8w8", "devices": ["npu", 3, "cpu"], "licence": "MIT", "licence_notes": "see card",
        "classifier": {"num_classes": 10}, "source": {"derived_from": "net", "repo_id": "org/net"},
        "quantization": {"activations": "uint16"},
        "verification": {"top1_agreement_with_float": {"agree": 9, "total": 10}},
        "reference": {"folder": "/models/net"},
        "files": [{"path": "model.onnx", "size": 5, "sha256": "ab", "mtime_ns": 7, "ino": 3}, {"size": 1}, "x",
                  {"path": "labels.txt", "size": "5", "sha256": 1}],
    })  # fmt: skip
    assert has_manifest(tmp_path)
    assert (manifest.schema, manifest.model_name, manifest.title) == (SCHEMA_VERSION, "net-qdq", "Net")
    assert manifest.devices == ("npu", "cpu") and manifest.licence_notes == "see card"
    assert manifest.quantized and manifest.derived_from == "net" and manifest.origin == "org/net"
    assert manifest.num_classes == 10 and manifest.activation_bits == 16 and manifest.top1_agreement == 0.9
    assert manifest.reference == Path("/models/net") and manifest.classifier_problem() == ""
    assert manifest.files == (ManifestFile("model.onnx", 5, "ab", 7, None, 3), ManifestFile("labels.txt", None, None))
    assert manifest.model_entry().path == "model.onnx"
    assert (manifest.labels_file, manifest.input_name, manifest.output_kind) == ("labels.txt", None, "logits")
    named = _written(tmp_path, {"classifier": {"labels": 5, "input": "pixels", "output": ["x"],
                                               "output_kind": "probabilities"}})  # fmt: skip
    assert (named.labels_file, named.input_name, named.output_name) == (5, "pixels", ["x"])
    assert named.output_kind == "probabilities", "a name as written: resolve_inside and the model judge it"

    odd = _written(tmp_path, {"name": ["x"], "display_name": 5, "devices": "npu", "classifier": [1], "chat": 3,
                              "source": "here", "reference": {"folder": "  "}})  # fmt: skip
    assert (odd.name, odd.model_name, odd.title) == ("", tmp_path.name, tmp_path.name)
    assert odd.devices == () and odd.classifier is None and odd.chat is None and odd.source == {}
    assert odd.reference is None and odd.context_length is None and odd.kv_cache_dtype == ""
    assert odd.classifier_problem() == "its classifier section is a list, not an object"
    assert odd.model_entry() == ManifestFile("model.onnx", None, None) and odd.top1_agreement == 0.0
    assert _written(tmp_path, {}).classifier_problem() == "it has no classifier section"


def test_a_document_read_elsewhere_is_typed_the_same_way(tmp_path: Path) -> None:
    document = {"schema": SCHEMA_VERSION, "kind": "genai-llm", "chat": {"context_length": 256,
                "kv_cache_dtype": "float16"}, "files": []}  # fmt: skip
    parsed = Manifest.parse(tmp_path, document)
    assert parsed == _written(tmp_path, document)
    assert parsed.context_length == 256 and parsed.kv_cache_dtype == "float16" and parsed.activation_bits == 8

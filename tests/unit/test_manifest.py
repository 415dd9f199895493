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
    file_entry,
    list_model_files,
    load_manifest,
    resolve_inside,
    sha256_file,
    verify_files,
    write_manifest,
)


def _make_model(root: Path) -> dict[str, Any]:
    (root / "sub").mkdir(parents=True)
    (root / "model.onnx").write_bytes(b"\x08\x07fake-onnx-bytes" * 1000)
    (root / "labels.txt").write_text("tench\ngoldfish\n", encoding="utf-8")
    (root / "sub" / "extra.bin").write_bytes(bytes(range(256)))
    files = [file_entry(root, rel) for rel in list_model_files(root)]
    return {"schema": SCHEMA_VERSION, "name": "demo", "files": files}


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
    assert verify_files(tmp_path, manifest) == []


def test_size_change_is_reported(tmp_path: Path) -> None:
    manifest = _make_model(tmp_path)
    with open(tmp_path / "labels.txt", "a", encoding="utf-8") as handle:
        handle.write("extra line\n")
    problems = verify_files(tmp_path, manifest)
    assert len(problems) == 1
    assert problems[0].startswith("labels.txt: size")


def test_same_size_content_change_is_caught_only_by_hash(tmp_path: Path) -> None:
    manifest = _make_model(tmp_path)
    path = tmp_path / "model.onnx"
    data = bytearray(path.read_bytes())
    data[100] ^= 0xFF
    path.write_bytes(bytes(data))
    assert verify_files(tmp_path, manifest) == ["model.onnx: contents changed (sha256 mismatch)"]
    assert verify_files(tmp_path, manifest, check_hashes=False) == []


def test_missing_file_is_reported(tmp_path: Path) -> None:
    manifest = _make_model(tmp_path)
    (tmp_path / "sub" / "extra.bin").unlink()
    assert verify_files(tmp_path, manifest) == ["sub/extra.bin: missing"]


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
    problems = verify_files(model, manifest)
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
    assert verify_files(model, manifest) == ["link.txt: path points outside the model folder"]


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
    problems = verify_files(tmp_path, manifest)
    assert problems == [
        "files[0] is not an object",
        "files[1] has no path",
        "a.bin: size is missing or invalid",
        "b.bin: sha256 is missing or invalid",
        "a.bin: listed twice",
    ]
    assert verify_files(tmp_path, {"files": []}) == ["the manifest lists no files"]
    assert verify_files(tmp_path, {}) == ["the manifest has no 'files' list"]


def test_write_then_load_round_trips_and_leaves_no_temp_files(tmp_path: Path) -> None:
    manifest = _make_model(tmp_path)
    manifest["display_name"] = "Démo ✓"
    write_manifest(tmp_path, manifest)
    assert load_manifest(tmp_path) == manifest
    manifest["name"] = "renamed"
    write_manifest(tmp_path, manifest)
    assert load_manifest(tmp_path)["name"] == "renamed"
    leftovers = [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")]
    assert leftovers == []


def test_load_manifest_errors_are_specific(tmp_path: Path) -> None:
    with pytest.raises(ModelError, match=r"No manifest\.json"):
        load_manifest(tmp_path)
    (tmp_path / MANIFEST_NAME).write_text("{not json", encoding="utf-8")
    with pytest.raises(ModelError, match="not valid JSON"):
        load_manifest(tmp_path)
    (tmp_path / MANIFEST_NAME).write_text("[1, 2]", encoding="utf-8")
    with pytest.raises(ModelError, match="JSON object"):
        load_manifest(tmp_path)
    (tmp_path / MANIFEST_NAME).write_text(json.dumps({"schema": 99, "files": []}), encoding="utf-8")
    with pytest.raises(ModelError, match="schema 99"):
        load_manifest(tmp_path)
    (tmp_path / MANIFEST_NAME).write_text(json.dumps({"schema": SCHEMA_VERSION}), encoding="utf-8")
    with pytest.raises(ModelError, match="no 'files' list"):
        load_manifest(tmp_path)

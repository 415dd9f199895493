"""The compiled-model (EPContext) cache: miss, hit, stale, corrupt, key changes, list and clear.

QNN cannot run here, so a fake onnxruntime at the runtime boundary stands in for it: its ModelCompiler
writes a fake context model stamped with the "QNN SDK" that made it, and its InferenceSession refuses a
context model from another SDK with the real QNN 5000 message. The CPU path runs for real.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest

from engines.errors import SessionCreationError
from engines.runtime import registration
from engines.runtime.compiled_cache import (
    CONTEXT_MODEL_NAME,
    SIDECAR_NAME,
    CacheKey,
    CompiledModelCache,
    options_that_matter,
)
from engines.runtime.sessions import SessionSettings, create_session
from engines.types import DeviceChoice
from tests.unit.fake_qnn import QNN, STALE_5000, FakeQnnOrt
from tests.unit.tiny_models import tiny_onnx


@pytest.fixture
def fake(fake_runtime: Callable[[FakeQnnOrt], FakeQnnOrt]) -> FakeQnnOrt:
    return fake_runtime(FakeQnnOrt())


@pytest.fixture
def model(tmp_path: Path) -> Path:
    return tiny_onnx(tmp_path / "models" / "classifier.onnx")


@pytest.fixture
def cache(tmp_path: Path) -> CompiledModelCache:
    return CompiledModelCache(tmp_path / "compiled")


NPU = DeviceChoice.parse("npu", strict=True)
QDQ = SessionSettings(quantized_model=True)


def open_npu(model: Path, cache: CompiledModelCache, progress: list[str] | None = None) -> Any:
    return create_session(model, NPU, QDQ, cache=cache, on_progress=None if progress is None else progress.append)


def test_first_load_compiles_writes_an_entry_with_its_sidecar_and_uses_the_context_model(
    fake: FakeQnnOrt, model: Path, cache: CompiledModelCache
) -> None:
    progress: list[str] = []
    verified = open_npu(model, cache, progress)

    assert verified.cache is not None and verified.cache.status == "miss"
    assert len(fake.compiles) == 1
    compile_call = fake.compiles[0]
    assert compile_call["source"] == str(model)
    assert compile_call["flags"] == 1, "a compile that takes no node must fail, not write an empty context"
    assert compile_call["embed_compiled_data_into_model"] is False
    assert compile_call["options"].devices[0].ep_name == QNN
    [entry] = cache.entries()
    assert fake.loads == [str(entry.context_model)], "the session runs the compiled context model"
    assert entry.model_name == "classifier.onnx" and entry.ep == QNN
    assert entry.ep_version == "onnxruntime-qnn 2.7.0; ep 2.7.0; QNN SDK 2.51.0"
    assert entry.driver_version == "30.0.140.1000"
    # backend_path and htp_performance_mode do not change the compiled graph: not part of the key.
    assert entry.options == {"session.graph_optimization": "all"}
    sidecar = json.loads((entry.folder / SIDECAR_NAME).read_text())
    assert sidecar["key"]["model_sha256"] == hashlib.sha256(model.read_bytes()).hexdigest()
    assert sidecar["context_model_size"] == entry.context_model.stat().st_size
    assert sidecar["files"]["model_ctx_qnn.bin"] == 256
    assert sidecar["created"] > 0 and sidecar["source_size"] == model.stat().st_size
    assert [p.name for p in cache.root.iterdir()] == [entry.digest], "no temporary folder is left behind"
    assert progress[0].startswith("Compiling classifier.onnx for the NPU (QNN)")
    assert "saved to the cache" in progress[-1]
    assert "Compiled the model" in verified.cache.summary()
    assert verified.placement.primary_ep == QNN


def test_second_load_is_a_hit_and_reports_first_compile_time(
    fake: FakeQnnOrt, model: Path, cache: CompiledModelCache
) -> None:
    open_npu(model, cache)
    progress: list[str] = []
    verified = open_npu(model, cache, progress)

    assert verified.cache is not None and verified.cache.status == "hit"
    assert len(fake.compiles) == 1, "a hit never compiles"
    assert progress == []
    [entry] = cache.entries()
    assert fake.loads[-1] == str(entry.context_model)
    assert verified.cache.first_compile_seconds == entry.compile_seconds
    assert verified.cache.compile_seconds == 0.0
    assert "Loaded the compiled model from the cache" in verified.cache.summary()


def test_a_stale_entry_after_an_sdk_update_is_deleted_and_rebuilt_once_with_a_notice(
    fake: FakeQnnOrt, model: Path, cache: CompiledModelCache
) -> None:
    open_npu(model, cache)
    [old] = cache.entries()
    # The driver refuses the old context binary although nothing in the key changed (the update was
    # invisible to the versions ONNX Runtime reports).
    fake.sdk = "2.52.0"
    fake.qnn_plugin.get_qnn_sdk_version = lambda: "2.51.0"

    verified = open_npu(model, cache)

    assert verified.cache is not None and verified.cache.status == "rebuilt"
    notice = verified.cache.notices[0]
    assert "no longer loads" in notice and "QNN error 5000" in notice and "compiled again" in notice
    assert len(fake.compiles) == 2
    [new] = cache.entries()
    assert new.digest == old.digest and new.context_model.read_bytes().startswith(b"EPCTX:2.52.0:")
    assert fake.loads[-1] == str(new.context_model)


def test_rebuild_happens_only_once_then_the_plain_model_runs(
    fake: FakeQnnOrt, model: Path, cache: CompiledModelCache
) -> None:
    open_npu(model, cache)
    fake.reject_all_contexts = True

    verified = open_npu(model, cache)

    assert len(fake.compiles) == 2, "one rebuild, not a loop"
    assert verified.cache is not None and verified.cache.status == "unavailable"
    assert fake.loads[-1] == str(model), "the session falls back to the original model"
    assert any("freshly compiled model did not load" in n for n in verified.cache.notices)
    assert cache.entries() == [], "an entry that does not load is not kept"


@pytest.mark.parametrize("damage", ["truncate", "same-size-garbage", "sidecar", "missing-model", "missing-bin"])
def test_a_corrupt_entry_is_removed_and_recompiled(
    fake: FakeQnnOrt, model: Path, cache: CompiledModelCache, damage: str
) -> None:
    open_npu(model, cache)
    [entry] = cache.entries()
    context = entry.context_model
    if damage == "truncate":
        context.write_bytes(context.read_bytes()[:5])
    elif damage == "same-size-garbage":
        context.write_bytes(b"\xff" * context.stat().st_size)
    elif damage == "sidecar":
        (entry.folder / SIDECAR_NAME).write_text("{not json")
    elif damage == "missing-model":
        context.unlink()
    else:
        (entry.folder / "model_ctx_qnn.bin").unlink()

    verified = open_npu(model, cache)

    assert len(fake.compiles) == 2
    assert verified.cache is not None and verified.cache.status in {"miss", "rebuilt"}
    assert verified.cache.notices, "the user is told the cache entry was damaged"
    [fresh] = cache.entries()
    assert fresh.context_model.read_bytes().startswith(b"EPCTX:2.51.0:")
    assert fake.loads[-1] == str(fresh.context_model)


@pytest.mark.parametrize(
    "bump",
    ["plugin", "sdk", "driver", "model", "compile-option"],
)
def test_a_version_or_input_change_makes_a_new_key(
    fake: FakeQnnOrt, model: Path, cache: CompiledModelCache, bump: str
) -> None:
    first = open_npu(model, cache)
    settings = QDQ
    if bump == "plugin":
        fake.qnn_plugin.__version__ = "2.8.0"
    elif bump == "sdk":
        fake.sdk = "2.52.0"
        fake.qnn_plugin.get_qnn_sdk_version = lambda: "2.52.0"
    elif bump == "driver":
        fake.driver = "30.0.145.0"
    elif bump == "model":
        tiny_onnx(model, tag="v2 (retrained)")
    else:
        settings = SessionSettings(quantized_model=False)  # asks QNN for fp16: another compiled graph

    second = create_session(model, NPU, settings, cache=cache)

    assert second.cache is not None and second.cache.status == "miss"
    assert second.cache.key != first.cache.key
    assert len(fake.compiles) == 2
    assert len(cache.entries()) == 2


def test_runtime_only_options_do_not_change_the_key(fake: FakeQnnOrt, model: Path, cache: CompiledModelCache) -> None:
    first = open_npu(model, cache)
    second = create_session(
        model, NPU, SessionSettings(quantized_model=True, htp_performance_mode="power_saver"), cache=cache
    )
    assert second.cache is not None and first.cache is not None
    assert second.cache.status == "hit" and second.cache.key == first.cache.key
    assert options_that_matter({"backend_path": "x", "soc_model": "60", "htp_arch": "73"}) == (
        ("htp_arch", "73"),
        ("soc_model", "60"),
    )


def test_without_model_compiler_the_context_config_entries_are_used(
    fake: FakeQnnOrt, model: Path, cache: CompiledModelCache
) -> None:
    fake.has_compiler = False
    verified = open_npu(model, cache)
    assert verified.cache is not None and verified.cache.status == "miss"
    [entry] = cache.entries()
    [compiled] = fake.compiles
    assert compiled["source"] == str(model) and Path(compiled["out"]).name == CONTEXT_MODEL_NAME
    assert compiled["config"]["ep.context_enable"] == "1"
    assert compiled["config"]["ep.context_embed_mode"] == "0"
    assert fake.loads == [str(model), str(entry.context_model)]


def test_a_device_that_compiles_nothing_runs_the_plain_model_with_a_notice(
    fake: FakeQnnOrt, model: Path, cache: CompiledModelCache
) -> None:
    fake.compile_error = "[ONNXRuntimeError] : 1 : FAIL : Unable to compile any nodes. Check that the EP supports them."
    verified = create_session(model, DeviceChoice.parse("npu"), QDQ, cache=cache)
    assert verified.cache is not None and verified.cache.status == "unavailable"
    assert "Compiling for the device failed" in verified.cache.notices[0]
    assert fake.loads == [str(model)]
    assert cache.entries() == [] and list(cache.root.iterdir()) == [], "the temporary folder is removed"


def test_an_unwritable_cache_folder_does_not_stop_the_session(fake: FakeQnnOrt, model: Path, tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file where the cache folder should be")
    verified = open_npu(model, CompiledModelCache(blocker / "compiled"))
    assert verified.cache is not None and verified.cache.status == "unavailable"
    assert "cannot be written" in verified.cache.notices[0]
    assert fake.loads == [str(model)]


def test_a_plain_model_that_fails_to_load_still_raises_a_readable_error(
    fake: FakeQnnOrt, tmp_path: Path, cache: CompiledModelCache
) -> None:
    broken = tmp_path / "broken.onnx"
    broken.write_bytes(b"not a model")
    fake.compile_error = "Protobuf parsing failed."
    with pytest.raises(Exception) as info:
        open_npu(broken, cache)
    assert "not a valid ONNX model" in str(info.value)


def test_list_and_clear(fake: FakeQnnOrt, model: Path, cache: CompiledModelCache, tmp_path: Path) -> None:
    other = tiny_onnx(tmp_path / "other.onnx", tag="another model")
    open_npu(model, cache)
    open_npu(other, cache)
    (cache.root / ".tmp-leftover-of-a-crash").mkdir()
    entries = cache.entries()
    assert {e.model_name for e in entries} == {"classifier.onnx", "other.onnx"}
    assert entries[0].created >= entries[1].created, "newest first"
    assert all(e.size_bytes > 256 for e in entries)
    total = cache.total_bytes()

    removed, freed = cache.clear()

    assert removed == 2 and freed == total
    assert list(cache.root.iterdir()) == []
    assert cache.entries() == []
    assert cache.clear() == (0, 0)


def test_key_digest_is_stable_and_covers_every_field() -> None:
    base = CacheKey("a" * 64, QNN, "2.7.0", "1.32.0", "30.0", (("x", "1"),))
    assert base.digest == CacheKey("a" * 64, QNN, "2.7.0", "1.32.0", "30.0", (("x", "1"),)).digest
    variants = [
        CacheKey("b" * 64, QNN, "2.7.0", "1.32.0", "30.0", (("x", "1"),)),
        CacheKey("a" * 64, "OpenVINOExecutionProvider", "2.7.0", "1.32.0", "30.0", (("x", "1"),)),
        CacheKey("a" * 64, QNN, "2.7.1", "1.32.0", "30.0", (("x", "1"),)),
        CacheKey("a" * 64, QNN, "2.7.0", "1.33.0", "30.0", (("x", "1"),)),
        CacheKey("a" * 64, QNN, "2.7.0", "1.32.0", "31.0", (("x", "1"),)),
        CacheKey("a" * 64, QNN, "2.7.0", "1.32.0", "30.0", (("x", "2"),)),
    ]
    assert len({v.digest for v in variants} | {base.digest}) == len(variants) + 1


def _tiny_onnx(path: Path) -> Path:
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"])],
        "tiny",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, path)
    return path


def test_real_cpu_needs_no_cache_and_writes_nothing(tmp_path: Path, cache: CompiledModelCache) -> None:
    registration.reset_registrations()
    model = _tiny_onnx(tmp_path / "tiny.onnx")
    verified = create_session(model, DeviceChoice.parse("cpu"), cache=cache)
    out = verified.session.run(None, {"x": np.array([[-1.0, 2.0, -3.0, 4.0]], dtype=np.float32)})[0]
    assert out.tolist() == [[0.0, 2.0, 0.0, 4.0]]
    assert verified.cache is not None and verified.cache.status == "not-needed"
    assert "nothing to compile" in verified.cache.notices[0]
    assert not cache.root.exists() or list(cache.root.iterdir()) == []


def test_native_errors_from_the_cached_path_are_explained(
    fake: FakeQnnOrt, model: Path, cache: CompiledModelCache
) -> None:
    fake.compile_error = "boom"
    fake.reject_all_contexts = True
    fake.load_error = STALE_5000
    with pytest.raises(SessionCreationError) as info:
        open_npu(model, cache)
    assert "QNN error 5000" in info.value.message


def test_the_cache_command_lists_and_clears(
    fake: FakeQnnOrt, model: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from app import paths
    from app.cli import run

    monkeypatch.setenv("NPU_STUDIO_HOME", str(tmp_path / "home"))
    cache = CompiledModelCache(paths.compiled_cache_dir())
    assert run(["cache"]) == 0
    assert "Empty." in capsys.readouterr().out
    open_npu(model, cache)

    assert run(["cache", "list"]) == 0
    listing = capsys.readouterr().out
    assert "- classifier.onnx for QNNExecutionProvider" in listing
    assert "QNN SDK 2.51.0; ONNX Runtime 1.32.0; driver 30.0.140.1000" in listing
    assert "1 compiled model(s)" in listing
    assert run(["cache", "list", "--json"]) == 0
    [entry] = json.loads(capsys.readouterr().out)["entries"]
    assert entry["model"] == "classifier.onnx" and entry["options"] == {"session.graph_optimization": "all"}

    assert run(["cache", "clear"]) == 0
    assert capsys.readouterr().out.startswith("Removed 1 compiled model(s)")
    assert cache.entries() == []

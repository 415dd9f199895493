"""A genai config cannot make the runtime write, load or spend outside its folder: only the session,
provider and search options on NPU Studio's allow-list may be set, and `chat` and `models import` refuse
the rest with the key named, before onnxruntime-genai sees the folder (the `native_guard` traps)."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from app import paths
from app.cli import run
from tests.reliability.conftest import NativeGuard, Recorder

CATEGORY = "Untrusted model files"
Edit = Callable[[dict[str, Any]], None]


def _session(config: dict[str, Any]) -> dict[str, Any]:
    options: dict[str, Any] = config["model"]["decoder"].setdefault("session_options", {})
    return options


def _set_session(key: str, value: Any) -> Edit:
    return lambda c: _session(c).update({key: value})


def _provider(name: str, options: dict[str, Any]) -> Edit:
    return lambda c: _session(c).update(provider_options=[{name: options}])


def _search(**values: Any) -> Edit:
    return lambda c: c.setdefault("search", {}).update(values)


def _vision_profiling(config: dict[str, Any]) -> None:
    config["model"]["vision"] = {"session_options": {"enable_profiling": "/tmp/prof"}}


REFUSED: list[tuple[str, Edit, str]] = [
    ("session_options.enable_profiling '/any/dir/prefix'", _set_session("enable_profiling", "/any/dir/prefix"),
     "model.decoder.session_options.enable_profiling"),
    ("session_options.ep_context_file_path outside", _set_session("ep_context_file_path", "/tmp/ctx.onnx"),
     "ep_context_file_path"),
    ("session_options.ep_context_enable", _set_session("ep_context_enable", True), "ep_context_enable"),
    ("session_options.config_entries", _set_session("config_entries", {"session.save_model_format": "ORT"}),
     "config_entries"),
    ("session_options.intra_op_num_threads 1000", _set_session("intra_op_num_threads", 1000),
     "intra_op_num_threads = 1000, which is outside"),
    ("session_options.graph_optimization_level 'fastest'", _set_session("graph_optimization_level", "fastest"),
     "graph_optimization_level"),
    ("OpenVINO provider option cache_dir", _provider("OpenVINO", {"cache_dir": "/tmp/ov-cache"}), "cache_dir"),
    ("QNN provider option profiling_file_path", _provider("qnn", {"profiling_file_path": "/tmp/p.csv"}),
     "profiling_file_path"),
    ("QNN htp_performance_mode 'overdrive'", _provider("qnn", {"htp_performance_mode": "overdrive"}),
     "htp_performance_mode"),
    ("an execution provider NPU Studio does not know", _provider("evilep", {}), "is not an execution provider"),
    ("search.num_beams 100000", _search(num_beams=100000), "search.num_beams = 100000"),
    ("search.num_return_sequences above num_beams", _search(num_beams=2, num_return_sequences=4),
     "is more than num_beams"),
    ("an unknown search option", _search(max_time=1e9), "search.max_time"),
    ("enable_profiling in another section's session options", _vision_profiling,
     "model.vision.session_options.enable_profiling"),
]  # fmt: skip


@pytest.fixture
def genai_copy(tiny_llm: Path, tmp_path: Path) -> Path:
    folder = tmp_path / "evil-llm"
    shutil.copytree(tiny_llm, folder)
    return folder


def _edit(folder: Path, edit: Edit) -> None:
    config = json.loads((folder / "genai_config.json").read_text(encoding="utf-8"))
    edit(config)
    (folder / "genai_config.json").write_text(json.dumps(config), encoding="utf-8")


def _cli(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = run(args)
    lines = [line for line in capsys.readouterr().err.splitlines() if not line.startswith("Importing ")]
    return code, "\n".join(lines).strip()


@pytest.mark.parametrize(("name", "edit", "words"), REFUSED, ids=[c[0] for c in REFUSED])
def test_chat_refuses_an_option_off_the_allow_list(
    name: str, edit: Edit, words: str, genai_copy: Path, native_guard: NativeGuard,
    capsys: pytest.CaptureFixture[str], reliability: Recorder,
) -> None:  # fmt: skip
    _edit(genai_copy, edit)
    code, err = _cli(["chat", "--model", str(genai_copy), "--prompt", "hi", "--device", "cpu"], capsys)
    reliability.record(CATEGORY, f"chat --model: config sets {name}", "refused with the key named", err)
    assert code == 2, err
    assert words in err and len(err.splitlines()) == 1
    assert native_guard.calls == []


@pytest.mark.parametrize(("name", "edit", "words"), REFUSED[::3], ids=[c[0] for c in REFUSED[::3]])
def test_models_import_refuses_the_same_options(
    name: str, edit: Edit, words: str, genai_copy: Path, native_guard: NativeGuard,
    capsys: pytest.CaptureFixture[str], reliability: Recorder,
) -> None:  # fmt: skip
    _edit(genai_copy, edit)
    code, err = _cli(["models", "import", str(genai_copy)], capsys)
    reliability.record(CATEGORY, f"models import: config sets {name}", "refused; nothing added to the library", err)
    assert code == 2, err
    assert words in err
    assert not [p for p in paths.user_models_dir().iterdir() if not p.name.startswith(".")]
    assert native_guard.calls == []


def test_options_on_the_allow_list_pass(
    genai_copy: Path, native_guard: NativeGuard, capsys: pytest.CaptureFixture[str], reliability: Recorder
) -> None:
    """Control: tuning options within bounds reach onnxruntime-genai (where the traps are)."""
    _edit(genai_copy, lambda c: _session(c).update(
        intra_op_num_threads=1, enable_mem_pattern=False, graph_optimization_level="ORT_ENABLE_ALL",
        provider_options=[{"qnn": {"htp_performance_mode": "burst", "backend_path": "QnnHtp.dll"}}]))  # fmt: skip
    _edit(genai_copy, _search(num_beams=1, top_k=50, temperature=0.7))
    _, err = _cli(["chat", "--model", str(genai_copy), "--prompt", "hi", "--device", "cpu"], capsys)
    reached = any(call.startswith("onnxruntime_genai.Config") for call in native_guard.calls)
    reliability.record(CATEGORY, "chat --model: config sets only allowed tuning options (threads 1, QNN burst)",
                       "accepted: the folder reaches onnxruntime-genai",
                       f"reached onnxruntime-genai: {reached}")  # fmt: skip
    assert reached, err

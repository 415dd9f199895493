"""The CPU decoder's thread count: one per physical core unless the model folder sets its own."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from engines.chat import threads
from engines.chat.folder import validate_model_folder
from engines.chat.model import ProviderPlan, configure
from engines.types import CPU_EP, cpu_count, physical_cores


class RecordingConfig:
    def __init__(self, path: str) -> None:
        self.path = path
        self.overlays: list[dict[str, Any]] = []
        self.cleared = False

    def overlay(self, text: str) -> None:
        self.overlays.append(json.loads(text))

    def clear_providers(self) -> None:
        self.cleared = True


class RecordingGenai:
    Config = RecordingConfig


def _folder_with(tiny_llm: Path, tmp_path: Path, session_options: dict[str, Any]) -> Path:
    folder = tmp_path / "model"
    shutil.copytree(tiny_llm, folder)
    path = folder / "genai_config.json"
    config = json.loads(path.read_text(encoding="utf-8"))
    config["model"]["decoder"]["session_options"] = session_options
    path.write_text(json.dumps(config), encoding="utf-8")
    return folder


def test_decode_threads_are_the_physical_cores_within_the_affinity() -> None:
    psutil = pytest.importorskip("psutil")
    expected = min(cpu_count(), psutil.cpu_count(logical=False) or cpu_count())
    assert physical_cores() == max(1, expected)


def test_a_folder_without_a_thread_count_decodes_on_every_core(tiny_llm: Path, tmp_path: Path) -> None:
    folder = validate_model_folder(_folder_with(tiny_llm, tmp_path, {"log_id": "x"}))
    config = configure(RecordingGenai, folder, ProviderPlan(requested="cpu", ep=CPU_EP))
    assert config.overlays == [
        {"model": {"decoder": {"session_options": {"intra_op_num_threads": physical_cores()}}}}
    ]


def test_a_folder_that_sets_its_threads_keeps_them(tiny_llm: Path, tmp_path: Path) -> None:
    folder = validate_model_folder(_folder_with(tiny_llm, tmp_path, {"intra_op_num_threads": 1}))
    config = configure(RecordingGenai, folder, ProviderPlan(requested="cpu", ep=CPU_EP))
    assert config.overlays == []


def test_the_overlay_reaches_onnxruntime_genai(tiny_llm: Path) -> None:
    og = pytest.importorskip("onnxruntime_genai")
    config = og.Config(str(tiny_llm))
    config.overlay(threads.threads_overlay(1))  # a malformed overlay raises here
    assert og.Model(config) is not None

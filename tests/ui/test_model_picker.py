"""The model picker: the library's models of one kind, told apart by precision, devices and size."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from engines.models.library import ModelEntry
from ui.common.model_picker import ModelPicker


def _entry(name: str, display: str, kind: str, precision: str, devices: tuple[str, ...], size: int) -> ModelEntry:
    return ModelEntry(
        name, display, kind, Path("/x") / name, True, size, "0" * 64, precision=precision, devices=devices
    )


FLOAT = _entry(
    "efficientnet-lite0", "EfficientNet-Lite0 (ImageNet-1k)", "image-classifier", "fp32", ("cpu", "gpu"), 18_700_000
)
QDQ = _entry(
    "efficientnet-lite0-qdq",
    "EfficientNet-Lite0 (ImageNet-1k), QDQ for the NPU (uint16 activations, uint8 weights)",
    "image-classifier",
    "qdq-a16w8",
    ("npu",),
    5_200_000,
)
LLM = _entry("smollm2", "SmolLM2-135M-Instruct", "genai-llm", "int4", ("cpu",), 102_000_000)


def test_picker_lists_only_its_kind_and_tells_builds_apart(qtbot: Any) -> None:
    picker = ModelPicker("image-classifier")
    qtbot.addWidget(picker)
    picker.set_current("efficientnet-lite0")
    picker.set_entries([FLOAT, QDQ, LLM])
    assert picker.names() == ["efficientnet-lite0", "efficientnet-lite0-qdq"]
    texts = [picker.combo.itemText(i) for i in range(picker.combo.count())]
    assert texts[0] == "EfficientNet-Lite0 · 32-bit float · CPU/GPU"
    assert texts[1] == "EfficientNet-Lite0 · 8-bit quantized · NPU"  # words, not the manifest's qdq-a16w8
    assert len(set(texts)) == 2
    assert picker.combo.currentText() == texts[0]


def test_picking_a_model_emits_its_name_once(qtbot: Any) -> None:
    picker = ModelPicker("image-classifier")
    qtbot.addWidget(picker)
    picker.set_entries([FLOAT, QDQ])
    picker.set_current("efficientnet-lite0")
    chosen: list[str] = []
    picker.model_chosen.connect(chosen.append)
    picker.choose("efficientnet-lite0-qdq")
    picker.choose("efficientnet-lite0-qdq")
    assert chosen == ["efficientnet-lite0-qdq"] and picker.combo.currentData() == "efficientnet-lite0-qdq"
    picker.set_current("efficientnet-lite0")  # the app confirming a choice does not echo a signal
    assert chosen == ["efficientnet-lite0-qdq"]


def test_a_remembered_model_that_is_gone_is_said_so(qtbot: Any) -> None:
    picker = ModelPicker("genai-llm")
    qtbot.addWidget(picker)
    picker.set_current("phi-4-mini")
    picker.set_entries([LLM])
    assert "phi-4-mini (not installed)" in [picker.combo.itemText(i) for i in range(picker.combo.count())]
    assert picker.combo.currentData() == "phi-4-mini"

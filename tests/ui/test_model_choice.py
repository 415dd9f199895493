"""The model each view uses: picked in the view or in Models ("Use in Classify"), remembered."""

from __future__ import annotations

from typing import Any

from PySide6.QtWidgets import QPushButton

from tests.ui.conftest import wait_until


def test_model_picker_round_trip(make_studio: Any, qtbot: Any) -> None:
    from app.storage.settings import load_settings

    studio = make_studio()
    studio.models.refresh()
    picker = studio.classify_view.model_picker
    wait_until(qtbot, lambda: "efficientnet-lite0-qdq" in picker.names(), timeout=30_000)
    assert picker.combo.currentData() == "efficientnet-lite0"
    # Models: select the QDQ build and "Use in Classify"
    models = studio.models_view
    wait_until(qtbot, lambda: models.snapshot is not None, timeout=30_000)
    row = next(
        r for r in range(models.table.rowCount()) if models.table.item(r, 0).data(256) == "efficientnet-lite0-qdq"
    )
    models.table.selectRow(row)
    assert models.use_button.text() == "Use in Classify" and models.use_button.isEnabled()
    models.use_button.click()
    assert studio.settings.classifier == "efficientnet-lite0-qdq"
    assert picker.combo.currentData() == "efficientnet-lite0-qdq"
    assert not models.use_button.isEnabled()  # already in use, and it says so beside the button
    assert models.use_note.isVisibleTo(models) and models.use_note.text() == "Classify uses this model already."
    banner = models.banners.banner("use")  # the click is answered: which view uses it now, and a way there
    assert banner is not None and banner.message == "Classify now uses EfficientNet-Lite0 (ImageNet-1k), QDQ for " \
        "the NPU (uint16 activations, uint8 weights)."
    [go] = [b for b in banner.findChildren(QPushButton) if b.text() == "Open Classify"]
    go.click()
    assert studio.window.current_view() == "classify"
    assert studio.save_settings()
    assert load_settings()[0].classifier == "efficientnet-lite0-qdq"
    # and back, from the Classify view's own picker
    picker.choose("efficientnet-lite0")
    assert studio.settings.classifier == "efficientnet-lite0"
    assert studio.classifier_folder().name == "efficientnet-lite0"

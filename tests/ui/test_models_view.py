"""The Models view on its host, with the real library engine on temporary folders (no network)."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from PySide6.QtGui import QTextDocument

from app.hosts.models import LibraryPlaces, ModelsHost, wire_models_view
from engines.models.manifest import file_entry, list_model_files
from tests.unit.fake_hub import serve, write_catalog
from tests.unit.netguard import loopback_only
from tests.unit.tiny_models import colour_classifier
from ui.models.view import ModelsView

REPO = Path(__file__).resolve().parents[2]
TIMEOUT = 60_000


@pytest.fixture
def places(tmp_path: Path) -> LibraryPlaces:
    bundled = tmp_path / "bundled"
    colours = colour_classifier(bundled / "colours")
    manifest = json.loads((colours / "manifest.json").read_text())
    manifest.update(licence="MIT", devices=["cpu", "npu"])
    manifest["files"] = [file_entry(colours, rel) for rel in list_model_files(colours)]
    (colours / "manifest.json").write_text(json.dumps(manifest))
    user = tmp_path / "user"
    user.mkdir()
    return LibraryPlaces(bundled, user, REPO / "assets" / "catalog.json")


@pytest.fixture
def setup(qtbot: Any, places: LibraryPlaces) -> Iterator[tuple[ModelsView, ModelsHost, dict[str, bool]]]:
    host = ModelsHost(places)
    view = ModelsView(False)
    qtbot.addWidget(view)
    setting = {"allow": False}
    wire_models_view(
        view,
        host,
        downloads_allowed=lambda: setting["allow"],
        on_allow_downloads=lambda allowed: setting.update(allow=allowed),
    )
    with loopback_only() as blocked:
        yield view, host, setting
    assert host.shutdown(), "the models host did not stop"
    assert not blocked, f"network access attempted: {blocked}"


def _refresh(qtbot: Any, view: ModelsView, host: ModelsHost) -> None:
    with qtbot.waitSignal(host.listed, timeout=TIMEOUT):
        host.refresh()


def shown(tooltip: str) -> str:
    """What a tooltip shows (it is rich text whenever Qt thinks it looks like it)."""
    document = QTextDocument()
    document.setHtml(tooltip)
    return document.toPlainText()


def _row(view: ModelsView, name: str) -> int:
    for row in range(view.table.rowCount()):
        if view.table.item(row, 0).text() == name:
            return row
    raise AssertionError(f"{name} not in the table")


def test_lists_models_and_keeps_bundled_ones_read_only(qtbot: Any, setup: Any) -> None:
    view, host, _ = setup
    _refresh(qtbot, view, host)
    row = _row(view, "colours")
    cells = [view.table.item(row, c).text() for c in range(view.table.columnCount())]
    assert cells[1:3] == ["Image classifier", "Bundled (read-only)"]
    assert cells[6] == "CPU, NPU" and cells[7] == "MIT" and cells[8] == "Fits" and cells[9] == "OK"
    assert len(cells[4]) == 12 and shown(view.table.item(row, 4).toolTip()) == host.worker.snapshot().entries[0].sha256
    view.table.selectRow(row)
    assert view.verify_button.isEnabled() and not view.remove_button.isEnabled()
    assert "Fits: needs" in view.details.text()
    assert view.catalog_table.rowCount() >= 6  # the shipped catalog


def test_import_a_folder_then_verify_and_remove_it(
    qtbot: Any, setup: Any, tiny_llm: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    view, host, _ = setup
    _refresh(qtbot, view, host)
    source = shutil.copytree(tiny_llm, tmp_path / "my-chat")
    monkeypatch.setattr(view, "_choose_folder", lambda: str(source))
    with qtbot.waitSignals([host.imported, host.listed], order="strict", timeout=TIMEOUT):
        view.import_folder_button.click()
    assert not view.busy and not view.progress_row.isVisible()
    assert any(m.startswith("Imported my-chat") for m in view.banners.messages())
    row = _row(view, "my-chat")
    assert view.table.item(row, 2).text() == "Yours" and view.table.item(row, 1).text() == "Chat"

    view.table.selectRow(row)
    with qtbot.waitSignal(host.verified, timeout=TIMEOUT):
        view.verify_button.click()
    assert any("my-chat is intact" in m for m in view.banners.messages())

    monkeypatch.setattr(view, "_confirm", lambda _title, _text: True)
    view.table.selectRow(_row(view, "my-chat"))
    with qtbot.waitSignals([host.removed, host.listed], order="strict", timeout=TIMEOUT):
        view.remove_button.click()
    assert [view.table.item(r, 0).text() for r in range(view.table.rowCount())] == ["colours"]


def test_a_broken_import_shows_its_error_in_a_banner(
    qtbot: Any, setup: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    view, host, _ = setup
    (tmp_path / "empty").mkdir()
    monkeypatch.setattr(view, "_choose_folder", lambda: str(tmp_path / "empty"))
    with qtbot.waitSignal(host.failed, timeout=TIMEOUT):
        view.import_folder_button.click()
    assert any("is not a model folder" in m for m in view.banners.messages())
    assert not view.busy


def test_classifier_import_through_the_dialog_fields(
    qtbot: Any, setup: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ui.models.import_dialog import ClassifierImportDialog

    view, host, _ = setup
    model = colour_classifier(tmp_path / "src", manifest=False) / "model.onnx"
    dialog = ClassifierImportDialog(str(model))
    qtbot.addWidget(dialog)
    assert "labels" in dialog.problems()
    dialog.labels.setText(str(model.parent / "labels.txt"))
    dialog.mean.setText("0 0 0")
    dialog.std.setText("255, 255, 255")
    assert dialog.problems() == ""
    options, details = dialog.fields()
    monkeypatch.setattr(view, "_choose_classifier", lambda: (str(model), options, details))
    with qtbot.waitSignal(host.imported, timeout=TIMEOUT) as imported:
        view.import_classifier_button.click()
    assert imported.args[0].kind == "image-classifier" and imported.args[0].name == "model"


def test_downloads_stay_off_until_allowed(qtbot: Any, setup: Any) -> None:
    view, host, setting = setup
    _refresh(qtbot, view, host)
    view.catalog_table.selectRow(0)
    assert not view.download_button.isEnabled() and view.offline_note.isVisibleTo(view)
    view.allow_box.setChecked(True)
    assert setting["allow"] is True
    assert view.download_button.isEnabled() and not view.offline_note.isVisibleTo(view)


@pytest.fixture
def hub_places(tmp_path: Path, tiny_llm: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Any, LibraryPlaces]]:
    import huggingface_hub.constants as hf_constants

    monkeypatch.setattr(hf_constants, "DOWNLOAD_CHUNK_SIZE", 64 * 1024)
    (tmp_path / "user").mkdir()
    with serve(tiny_llm) as (state, endpoint):
        monkeypatch.setenv("HF_ENDPOINT", endpoint)
        yield state, LibraryPlaces(tmp_path / "none", tmp_path / "user", write_catalog(tmp_path))


def _download_setup(qtbot: Any, places: LibraryPlaces) -> tuple[ModelsView, ModelsHost]:
    host = ModelsHost(places)
    view = ModelsView(True)
    qtbot.addWidget(view)
    wire_models_view(
        view, host, downloads_allowed=lambda: view.allow_box.isChecked(), on_allow_downloads=lambda _allowed: None
    )
    _refresh(qtbot, view, host)
    view.catalog_table.selectRow(0)
    return view, host


def test_download_from_the_catalog_with_progress(qtbot: Any, hub_places: Any) -> None:
    _state, places = hub_places
    with loopback_only() as blocked:
        view, host = _download_setup(qtbot, places)
        updates: list[tuple[int, int]] = []
        host.progress.connect(lambda _what, done, total: updates.append((done, total)))
        with qtbot.waitSignals([host.downloaded, host.listed], order="strict", timeout=TIMEOUT):
            view.download_button.click()
        assert host.shutdown()
    assert not blocked
    assert updates and updates[-1][0] == updates[-1][1] > 10_000_000
    assert [view.table.item(r, 0).text() for r in range(view.table.rowCount())] == ["tiny-chat-cpu"]
    assert view.catalog_table.item(0, 6).text() == "Installed"
    assert any(m.startswith("Downloaded Tiny chat (CPU)") for m in view.banners.messages())


def test_cancel_a_download_from_the_view_keeps_it_resumable(qtbot: Any, hub_places: Any) -> None:
    state, places = hub_places
    state.pause = 0.01  # a slow link: the download is still running when Cancel is pressed
    with loopback_only() as blocked:
        view, host = _download_setup(qtbot, places)
        host.progress.connect(lambda _what, done, _total: view.cancel_button.click() if done > 2_000_000 else None)
        with qtbot.waitSignals([host.cancelled, host.listed], order="strict", timeout=TIMEOUT):
            view.download_button.click()
        assert host.shutdown()
    assert not blocked
    assert any("cancelled" in m and "resumes" in m for m in view.banners.messages())
    assert view.catalog_table.item(0, 6).text().startswith("Partial (")
    assert view.table.rowCount() == 0 and not view.busy


def test_use_says_why_it_is_off() -> None:
    from engines.models.library import ModelEntry
    from ui.models.library_state import use_blocker

    def entry(name: str, kind: str, problem: str = "") -> ModelEntry:
        return ModelEntry(name, name, kind, Path("/x") / name, True, 1, "0" * 64, problem=problem)

    assert use_blocker(None, set()) == "Select a model to use it."
    assert use_blocker(entry("a", "image-classifier"), {"a"}) == "Classify uses this model already."
    assert use_blocker(entry("c", "genai-llm"), {"c"}) == "Chat uses this model already."
    assert use_blocker(entry("b", "image-classifier", "model.onnx is missing"), set()) == (
        "It has a problem: see its details."
    )
    assert use_blocker(entry("b", "image-classifier"), {"a"}) == ""

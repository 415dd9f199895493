"""The Settings view in the real app (Studio): settings saved to the file, the theme applied, one
downloads switch shared with the Models view, the compiled-model cache listed and cleared in the
worker, the diagnostics zip exported, and a failed save shown with a working retry."""

from __future__ import annotations

import json
import threading
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from PySide6.QtCore import Qt
from PySide6.QtGui import QPalette
from PySide6.QtWidgets import QApplication

from app import diagnostics, paths
from app.logs import log_file
from app.storage.settings import settings_path
from engines.models.library import format_bytes
from engines.runtime.compiled_cache import CacheKey, CompiledModelCache
from ui.common.theme import DARK, LIGHT, apply_theme
from ui.settings.cache import EMPTY_CACHE

TIMEOUT = 60_000


def saved() -> dict[str, Any]:
    return dict(json.loads(settings_path().read_text(encoding="utf-8")))


def window_colour() -> str:
    app = QApplication.instance()
    assert isinstance(app, QApplication)
    return app.palette().color(QPalette.ColorRole.Window).name()


@pytest.fixture
def studio(make_studio: Any) -> Iterator[Any]:
    made = make_studio()
    yield made
    app = QApplication.instance()
    assert isinstance(app, QApplication)
    apply_theme(app, "system")  # the palette is app-wide: leave it as the next test expects it


def show_settings(studio: Any, qtbot: Any) -> Any:
    """Show the Settings view and wait for its first cache listing (requested when the view is shown)."""
    view = studio.settings_view
    with qtbot.waitSignal(studio.settings_host.cache_listed, timeout=TIMEOUT):
        studio.window.show_view("settings")
    return view


def add_compiled_model(cache: CompiledModelCache, tmp_path: Path, name: str, size: int, ep_version: str) -> str:
    """A cache entry made through the cache's own store(), as the NPU path makes them."""
    source = tmp_path / name
    source.write_bytes(name.encode() * 64)
    key = CacheKey(
        model_sha256=name.encode().hex().ljust(64, "0")[:64],
        ep="QNNExecutionProvider",
        ep_version=ep_version,
        ort_version="1.22.0",
        driver_version="30.0.140.1000",
        options=(("htp_graph_finalization_optimization_mode", "3"),),
    )

    def compile_into(target: Path) -> None:
        target.write_bytes(b"\0" * size)

    return cache.store(key, source, compile_into).digest


def recorder(into: list[Any], answer: bool) -> Any:
    """A stand-in for a dialog or QDesktopServices.openUrl: records what it was asked, answers `answer`."""

    def record(*args: Any) -> bool:
        into.append(args[0])
        return answer

    return record


def folders(cache: CompiledModelCache) -> list[str]:
    return sorted(p.name for p in cache.root.iterdir() if p.is_dir())


# --- settings ------------------------------------------------------------------------------------


def test_the_theme_changes_the_palette_live_and_is_saved(studio: Any, qtbot: Any) -> None:
    view = studio.settings_view
    view.theme_box.setCurrentIndex(view.theme_box.findData("dark"))
    assert window_colour() == DARK.window
    assert saved()["theme"] == "dark" and studio.settings.theme == "dark"
    view.theme_box.setCurrentIndex(view.theme_box.findData("light"))
    assert window_colour() == LIGHT.window
    assert saved()["theme"] == "light"


def test_the_downloads_switch_is_one_state_with_the_models_view(studio: Any) -> None:
    settings_box, models_box = studio.settings_view.allow_box, studio.models_view.allow_box
    assert not settings_box.isChecked() and not models_box.isChecked()
    settings_box.setChecked(True)
    assert models_box.isChecked() and studio.settings.allow_downloads is True
    assert not studio.models_view.offline_note.isVisibleTo(studio.models_view)  # the Models view followed
    assert saved()["allow_downloads"] is True
    models_box.setChecked(False)
    assert not settings_box.isChecked() and studio.settings.allow_downloads is False
    assert saved()["allow_downloads"] is False


def test_the_system_prompt_is_the_chat_panels_and_is_saved(studio: Any, qtbot: Any) -> None:
    view, panel = studio.settings_view, studio.chat_view.panel
    view.prompt_edit.setPlainText("Answer like a pirate.")
    qtbot.waitUntil(lambda: studio.settings.system_prompt == "Answer like a pirate.", timeout=5_000)
    assert panel.prompt() == "Answer like a pirate." and saved()["system_prompt"] == "Answer like a pirate."
    # and the other way: the Chat view's panel edits the same prompt (and its generation settings show here)
    panel.system_prompt.setPlainText("Be brief.")
    panel.max_new_tokens.setValue(64)
    qtbot.waitUntil(lambda: view.prompt_edit.toPlainText() == "Be brief.", timeout=5_000)
    assert "max answer tokens 64" in view.options_label.text()
    view.chat_settings_button.click()
    assert studio.window.current_view() == "chat" and studio.chat_view.header.settings_button.isChecked()


def test_a_prompt_typed_just_before_closing_is_saved(studio: Any, qtbot: Any) -> None:
    studio.show()
    studio.settings_view.prompt_edit.setPlainText("Short answers.")
    studio.window.close()  # within the typing debounce
    assert saved()["system_prompt"] == "Short answers."


def test_the_device_choice_is_the_shared_one(studio: Any, qtbot: Any) -> None:
    picker = studio.settings_view.picker
    picker.combo.setCurrentIndex(picker.combo.findData("cpu"))
    picker.strict.setChecked(True)
    assert studio.choice_model.text == "cpu" and studio.choice_model.strict
    chat_picker = studio.chat_view.header.picker  # the Chat view's picker shows the same choice
    assert chat_picker.combo.currentData() == "cpu" and chat_picker.strict.isChecked()
    assert studio.save_settings()
    assert saved()["device"] == "cpu" and saved()["strict"] is True


def test_a_failed_save_shows_a_banner_keeps_the_change_and_retry_works(
    studio: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import app.storage.settings

    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file where the config folder should be")
    good = settings_path()
    monkeypatch.setattr(app.storage.settings, "settings_path", lambda: blocker / "settings.json")
    view = studio.settings_view
    view.allow_box.setChecked(True)
    assert any(m.startswith("Could not save settings") for m in studio.window.banners.messages())
    assert view.retry_button.isVisibleTo(view) and view.save_label.text().startswith("Not saved yet")
    assert studio.settings.allow_downloads is True and view.allow_box.isChecked()  # nothing is lost

    monkeypatch.setattr(app.storage.settings, "settings_path", lambda: good)  # the disk is writable again
    view.retry_button.click()
    assert json.loads(good.read_text(encoding="utf-8"))["allow_downloads"] is True
    assert not view.retry_button.isVisibleTo(view) and not studio.window.banners.messages()


# --- compiled models -----------------------------------------------------------------------------


def test_an_empty_cache_says_so(studio: Any, qtbot: Any) -> None:
    card = show_settings(studio, qtbot).cache
    assert card.stack.currentIndex() == 1 and card.empty.text() == EMPTY_CACHE
    assert card.table.rowCount() == 0
    assert not card.clear_button.isEnabled() and not card.remove_button.isEnabled()
    assert card.folder_label.path == str(paths.compiled_cache_dir())


def test_compiled_models_are_listed_removed_and_cleared_in_the_worker(
    studio: Any, qtbot: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = CompiledModelCache(paths.compiled_cache_dir())
    first = add_compiled_model(cache, tmp_path, "efficientnet-lite0.onnx", 300_000, "onnxruntime-qnn 1.22.0")
    resnet = add_compiled_model(cache, tmp_path, "resnet50.onnx", 2_000_000, "onnxruntime-qnn 1.22.0; QNN SDK 2.33")
    add_compiled_model(cache, tmp_path, "mobilenet.onnx", 100_000, "onnxruntime-qnn 1.22.0")
    threads: list[str] = []
    original = CompiledModelCache.entries

    def recording_entries(self: CompiledModelCache) -> list[Any]:
        threads.append(threading.current_thread().name)
        return original(self)

    monkeypatch.setattr(CompiledModelCache, "entries", recording_entries)

    view = show_settings(studio, qtbot)
    card = view.cache
    table = card.table
    assert card.stack.currentIndex() == 0 and table.rowCount() == 3
    rows = {table.item(r, 0).text(): [table.item(r, c).text() for c in range(5)] for r in range(3)}
    assert set(rows) == {"efficientnet-lite0.onnx", "resnet50.onnx", "mobilenet.onnx"}
    assert rows["resnet50.onnx"][1] == "QNN"
    versions = "onnxruntime-qnn 1.22.0; QNN SDK 2.33 · ONNX Runtime 1.22.0 · driver 30.0.140.1000"
    assert rows["resnet50.onnx"][2] == versions
    resnet_bytes = sum(p.stat().st_size for p in (cache.root / resnet).iterdir())
    assert resnet_bytes > 2_000_000 and rows["resnet50.onnx"][3] == format_bytes(resnet_bytes)
    assert card.summary.text().startswith("3 compiled models")
    assert card.clear_button.isEnabled() and not card.remove_button.isEnabled()

    monkeypatch.setattr(card, "_confirm", lambda _title, _text: True)
    row = next(r for r in range(3) if table.item(r, 0).text() == "efficientnet-lite0.onnx")
    table.selectRow(row)
    assert card.selected_digests() == [first] and card.remove_button.isEnabled()
    with qtbot.waitSignals(
        [studio.settings_host.cache_removed, studio.settings_host.cache_listed], order="strict", timeout=TIMEOUT
    ):
        card.remove_button.click()
    assert not (cache.root / first).exists()
    assert sorted(table.item(r, 0).text() for r in range(table.rowCount())) == ["mobilenet.onnx", "resnet50.onnx"]
    assert any(m.startswith("Removed 1 compiled model") for m in view.banners.messages())

    declined: list[str] = []
    monkeypatch.setattr(card, "_confirm", recorder(declined, False))
    card.clear_button.click()
    assert declined and len(folders(cache)) == 2  # nothing happens without a yes

    monkeypatch.setattr(card, "_confirm", lambda _title, _text: True)
    with qtbot.waitSignals(
        [studio.settings_host.cache_removed, studio.settings_host.cache_listed], order="strict", timeout=TIMEOUT
    ):
        card.clear_button.click()
    assert folders(cache) == [] and card.stack.currentIndex() == 1
    assert any(m.startswith("Removed 2 compiled models") for m in view.banners.messages())
    main = threading.main_thread().name
    assert threads and all(name != main for name in threads), threads  # the cache was read in the worker


# --- diagnostics and folders ---------------------------------------------------------------------


def test_export_diagnostics_writes_a_zip_where_the_user_chose(
    studio: Any, qtbot: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    card = show_settings(studio, qtbot).diagnostics
    monkeypatch.setattr(card, "_choose_zip", lambda: str(tmp_path / "reports" / "for-the-bug"))  # .zip is added
    shown: list[list[str]] = []
    monkeypatch.setattr(card, "_confirm_export", lambda lines: shown.append(lines) is None)
    progress: list[str] = []
    studio.settings_host.diagnostics_progress.connect(progress.append)
    with qtbot.waitSignal(studio.settings_host.diagnostics_exported, timeout=TIMEOUT) as exported:
        card.export_button.click()
        assert card.busy and not card.export_button.isEnabled()
    target = tmp_path / "reports" / "for-the-bug.zip"
    assert exported.args[0].path == str(target) and target.is_file()
    with zipfile.ZipFile(target) as bundle:
        names = bundle.namelist()
        report = bundle.read("report.txt").decode("utf-8")
    assert {"report.txt", "report.json", "versions.json", "devices.json", "CONTENTS.txt"} <= set(names)
    assert "CPU" in report and "chat check turned off" in report
    assert shown == [diagnostics.contents()]  # what the zip holds was shown before it was written
    assert card.contents_label.text().count("•") == len(diagnostics.contents())
    assert progress and progress[0] == "Looking for devices…"
    assert not card.busy and card.export_button.isEnabled()
    # the label names the file (a whole path is one unbreakable word that a small window would cut);
    # the full path is its tooltip, and "Show" opens its folder
    assert target.name in card.status_label.text() and card.status_label.toolTip() == str(target)
    assert card.show_export_button.isVisibleTo(card)
    opened: list[str] = []
    monkeypatch.setattr("ui.settings.diagnostics.open_in_file_manager", recorder(opened, True))
    card.show_export_button.click()
    assert opened == [str(tmp_path / "reports")]


def test_an_export_that_cannot_be_written_says_why(
    studio: Any, qtbot: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    view = show_settings(studio, qtbot)
    card = view.diagnostics
    monkeypatch.setattr(card, "_choose_zip", lambda: str(blocker / "diagnostics.zip"))
    monkeypatch.setattr(card, "_confirm_export", lambda lines: True)
    with qtbot.waitSignal(studio.settings_host.failed, timeout=TIMEOUT):
        card.export_button.click()
    assert any("could not be written" in m for m in view.banners.messages())
    assert not card.busy and card.export_button.isEnabled() and not card.show_export_button.isVisible()
    assert card.status_label.text() == "The export did not finish (see above)."


def test_folder_buttons_open_the_app_folders_and_the_log_file_is_shown(
    studio: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    view = studio.settings_view
    card = view.diagnostics
    opened: list[str] = []
    monkeypatch.setattr("ui.settings.diagnostics.open_in_file_manager", recorder(opened, True))
    for key in ("data", "logs", "cache"):
        card.folder_buttons[key].click()
    assert opened == [str(p) for p in (paths.data_dir(), paths.log_dir(), paths.cache_dir())]
    assert card.log_file_label.path == log_file() and card.settings_file_label.path == str(settings_path())
    monkeypatch.setattr("ui.settings.diagnostics.open_in_file_manager", lambda _path: False)  # no file manager
    assert not card.open_folder("logs")
    assert any(m.startswith("Could not open") for m in view.banners.messages())


def test_the_export_dialog_lists_the_contents_and_cancel_writes_nothing(
    studio: Any, qtbot: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ui.settings.diagnostics import export_box

    view = show_settings(studio, qtbot)
    card = view.diagnostics
    box = export_box(view, diagnostics.contents())
    assert all(line in box.informativeText() for line in diagnostics.contents())
    assert box.textFormat() == Qt.TextFormat.PlainText
    chosen: list[str] = []
    monkeypatch.setattr(card, "_confirm_export", lambda lines: False)  # the user cancels the dialog
    monkeypatch.setattr(card, "_choose_zip", lambda: chosen.append("asked") or str(tmp_path / "x.zip"))
    card.export_button.click()
    assert chosen == [] and not card.busy and not (tmp_path / "x.zip").exists()


def test_a_long_path_is_shown_whole_and_copied_as_it_is(qtbot: Any) -> None:
    from PySide6.QtWidgets import QVBoxLayout, QWidget

    from ui.common.layout_check import check_layout
    from ui.settings.parts import PathLabel

    path = "/home/someone/" + "a-very-long-folder-name-" * 6 + "/cache/compiled"
    root = QWidget()
    qtbot.addWidget(root)
    label = PathLabel(path)
    QVBoxLayout(root).addWidget(label)
    root.resize(260, 200)
    root.show()
    QApplication.processEvents()
    assert label.text().replace("\u200b", "") == path  # every character shown, none elided
    assert check_layout(root) == []  # wrapped, not cut
    label.copy()
    clipboard = QApplication.clipboard()
    assert clipboard is not None and clipboard.text() == path

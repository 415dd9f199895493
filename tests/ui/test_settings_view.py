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
from PySide6.QtCore import QUrl
from PySide6.QtGui import QPalette
from PySide6.QtWidgets import QApplication

from app import paths
from app.logs import log_file
from app.settings import settings_path
from engines.models.library import format_bytes
from engines.runtime.compiled_cache import CacheKey, CompiledModelCache
from ui.settings_view import EMPTY_CACHE
from ui.theme import DARK, LIGHT, apply_theme

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
    assert studio.window.current_view() == "chat" and studio.chat_view.settings_button.isChecked()


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
    chat_picker = studio.chat_view.picker  # the Chat view's picker shows the same choice
    assert chat_picker.combo.currentData() == "cpu" and chat_picker.strict.isChecked()
    assert studio.save_settings()
    assert saved()["device"] == "cpu" and saved()["strict"] is True


def test_a_failed_save_shows_a_banner_keeps_the_change_and_retry_works(
    studio: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import app.settings

    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file where the config folder should be")
    good = settings_path()
    monkeypatch.setattr(app.settings, "settings_path", lambda: blocker / "settings.json")
    view = studio.settings_view
    view.allow_box.setChecked(True)
    assert any(m.startswith("Could not save settings") for m in studio.window.banners.messages())
    assert view.save_failed and view.retry_button.isVisibleTo(view)
    assert studio.settings.allow_downloads is True and view.allow_box.isChecked()  # nothing is lost

    monkeypatch.setattr(app.settings, "settings_path", lambda: good)  # the disk is writable again
    view.retry_button.click()
    assert json.loads(good.read_text(encoding="utf-8"))["allow_downloads"] is True
    assert not view.save_failed and not studio.window.banners.messages()


# --- compiled models -----------------------------------------------------------------------------


def test_an_empty_cache_says_so(studio: Any, qtbot: Any) -> None:
    view = show_settings(studio, qtbot)
    assert view.cache_stack.currentIndex() == 1 and view.cache_empty.text() == EMPTY_CACHE
    assert view.cache_table.rowCount() == 0
    assert not view.clear_button.isEnabled() and not view.remove_button.isEnabled()
    assert view.cache_folder_label.path == str(paths.compiled_cache_dir())


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
    table = view.cache_table
    assert view.cache_stack.currentIndex() == 0 and table.rowCount() == 3
    rows = {table.item(r, 0).text(): [table.item(r, c).text() for c in range(5)] for r in range(3)}
    assert set(rows) == {"efficientnet-lite0.onnx", "resnet50.onnx", "mobilenet.onnx"}
    assert rows["resnet50.onnx"][1] == "QNN"
    versions = "onnxruntime-qnn 1.22.0; QNN SDK 2.33 · ONNX Runtime 1.22.0 · driver 30.0.140.1000"
    assert rows["resnet50.onnx"][2] == versions
    resnet_bytes = sum(p.stat().st_size for p in (cache.root / resnet).iterdir())
    assert resnet_bytes > 2_000_000 and rows["resnet50.onnx"][3] == format_bytes(resnet_bytes)
    assert view.cache_summary.text().startswith("3 compiled models")
    assert view.clear_button.isEnabled() and not view.remove_button.isEnabled()

    view.confirm = lambda _title, _text: True
    row = next(r for r in range(3) if table.item(r, 0).text() == "efficientnet-lite0.onnx")
    table.selectRow(row)
    assert view.selected_digests() == [first] and view.remove_button.isEnabled()
    with qtbot.waitSignals(
        [studio.settings_host.cache_removed, studio.settings_host.cache_listed], order="strict", timeout=TIMEOUT
    ):
        view.remove_button.click()
    assert not (cache.root / first).exists()
    assert sorted(table.item(r, 0).text() for r in range(table.rowCount())) == ["mobilenet.onnx", "resnet50.onnx"]
    assert any(m.startswith("Removed 1 compiled model") for m in view.banners.messages())

    declined: list[str] = []
    view.confirm = recorder(declined, False)
    view.clear_button.click()
    assert declined and len(folders(cache)) == 2  # nothing happens without a yes

    view.confirm = lambda _title, _text: True
    with qtbot.waitSignals(
        [studio.settings_host.cache_removed, studio.settings_host.cache_listed], order="strict", timeout=TIMEOUT
    ):
        view.clear_button.click()
    assert folders(cache) == [] and view.cache_stack.currentIndex() == 1
    assert any(m.startswith("Removed 2 compiled models") for m in view.banners.messages())
    main = threading.main_thread().name
    assert threads and all(name != main for name in threads), threads  # the cache was read in the worker


# --- diagnostics and folders ---------------------------------------------------------------------


def test_export_diagnostics_writes_a_zip_where_the_user_chose(studio: Any, qtbot: Any, tmp_path: Path) -> None:
    view = show_settings(studio, qtbot)
    view.choose_zip = lambda: str(tmp_path / "reports" / "for-the-bug")  # no suffix: .zip is added
    progress: list[str] = []
    studio.settings_host.diagnostics_progress.connect(progress.append)
    with qtbot.waitSignal(studio.settings_host.diagnostics_exported, timeout=TIMEOUT) as exported:
        view.export_button.click()
        assert view.diagnostics_busy and not view.export_button.isEnabled()
    target = tmp_path / "reports" / "for-the-bug.zip"
    assert exported.args[0].path == str(target) and target.is_file()
    with zipfile.ZipFile(target) as bundle:
        names = bundle.namelist()
        report = bundle.read("report.txt").decode("utf-8")
    assert {"report.txt", "report.json", "versions.json", "devices.json"} <= set(names)
    assert "CPU" in report and "chat check turned off" in report
    assert progress and progress[0] == "Looking for devices…"
    assert not view.diagnostics_busy and view.export_button.isEnabled()
    # the label names the file (a whole path is one unbreakable word that a small window would cut);
    # the full path is its tooltip, and "Show" opens its folder
    assert target.name in view.diagnostics_label.text() and view.diagnostics_label.toolTip() == str(target)
    assert view.show_export_button.isVisibleTo(view)
    opened: list[QUrl] = []
    view.open_url = recorder(opened, True)
    view.show_export_button.click()
    assert opened == [QUrl.fromLocalFile(str(tmp_path / "reports"))]


def test_an_export_that_cannot_be_written_says_why(studio: Any, qtbot: Any, tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    view = show_settings(studio, qtbot)
    view.choose_zip = lambda: str(blocker / "diagnostics.zip")
    with qtbot.waitSignal(studio.settings_host.failed, timeout=TIMEOUT):
        view.export_button.click()
    assert any("could not be written" in m for m in view.banners.messages())
    assert not view.diagnostics_busy and view.export_button.isEnabled() and not view.show_export_button.isVisible()


def test_folder_buttons_open_the_app_folders_and_the_log_file_is_shown(studio: Any) -> None:
    view = studio.settings_view
    opened: list[QUrl] = []
    view.open_url = recorder(opened, True)
    for key in ("data", "logs", "cache"):
        view.folder_buttons[key].click()
    assert opened == [QUrl.fromLocalFile(str(p)) for p in (paths.data_dir(), paths.log_dir(), paths.cache_dir())]
    assert view.log_file_label.path == log_file() and view.settings_file_label.path == str(settings_path())
    view.open_url = lambda _url: False  # no file manager
    assert not view.open_folder("logs")
    assert any(m.startswith("Could not open") for m in view.banners.messages())

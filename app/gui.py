"""The desktop app's composition root: QApplication, theme, settings, storage, the engine hosts and
the main window, wired together; one excepthook; a staged shutdown.

Start-up order matters: the window is built and shown first (Qt and the UI only); ONNX Runtime and
the models are loaded afterwards, in the hosts' threads. Shutdown is staged: a close while work is
running first cancels it and waits (briefly) for the engines to report back, so that a partial answer
is saved as stopped; then settings are saved, the host threads are stopped and waited for, and the
store is closed.
"""

from __future__ import annotations

import logging
import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from PySide6.QtCore import QByteArray, QObject, Qt, QTimer
from PySide6.QtWidgets import QApplication

from app import __version__, paths
from app.bench_host import BenchHost, load_bench_view, wire_bench_view
from app.chat_host import ChatHost
from app.device_offers import DeviceOffers
from app.hosts import DevicesHost, VisionHost
from app.models_host import ModelsHost, wire_models_view
from app.settings import Settings, load_settings, save_settings
from app.settings_host import SettingsHost, wire_settings_view
from app.storage import ConversationStore
from app.view_links import ModelChoice, wire_classify, wire_status
from engines.errors import ModelError, StorageError, StudioError
from engines.types import DeviceChoice, short_ep_name
from ui.bench_view import BenchView
from ui.chat_view import ChatView
from ui.classify_parts import sample_photos
from ui.classify_view import ClassifyView
from ui.device_picker import DeviceChoiceModel
from ui.devices_view import DevicesView
from ui.layout_check import check_layout
from ui.main_window import MainWindow
from ui.models_view import ModelsView
from ui.screen_fit import fit_window
from ui.settings_view import SettingsView
from ui.shortcuts import ShortcutsSheet
from ui.theme import apply_theme
from ui.widgets import Banner

log = logging.getLogger(__name__)

PROCESS_STARTED = time.time()  # close enough to process start: app.gui is imported first thing by `gui`
CLOSE_GRACE_MS = 3000  # how long a close waits for running work to report back after the cancel
SAVE_DELAY_MS = 500


def headless() -> bool:
    """No real screen (offscreen or minimal Qt platform): tests, the self-test, CI."""
    return os.environ.get("QT_QPA_PLATFORM", "") in {"offscreen", "minimal"}


def model_folder(name: str) -> Path:
    """A model folder by name: the user's models first, then the bundled demo models (the one library
    lookup the CLI uses); a folder that does not exist when the model is not installed."""
    from engines.models.lookup import locate_model

    try:
        return locate_model(name, paths.model_roots()).folder
    except ModelError:
        return paths.bundled_models_dir() / name


def missing_model_error(name: str, kind: str) -> ModelError:
    return ModelError(
        f"The {kind} '{name}' is not installed (no folder {paths.bundled_models_dir() / name}).",
        "Build the demo models with `python assets/recipes/build_demo_models.py`, or reinstall NPU Studio.",
    )


class Studio(QObject):
    """Everything the running app holds, and how it fits together."""

    def __init__(
        self,
        app: QApplication,
        *,
        classifier_factory: Callable[[Path, DeviceChoice], Any] | None = None,
        chat_loader: Callable[[Path, DeviceChoice], Any] | None = None,
        preload: bool = True,
    ) -> None:
        super().__init__()
        self.app = app
        self.preload = preload
        self.started_at = PROCESS_STARTED
        self.timings: dict[str, float] = {}
        self.runtime_loaded_at_show: bool | None = None
        self.crashes: list[str] = []
        self._close_stage = 0
        self._shut_down = False
        self.last_discovery: Any = None

        self.settings, settings_notice = load_settings()
        apply_theme(app, self.settings.theme)
        # Light/dark follows the OS while the app runs (when the theme setting is "system").
        app.styleHints().colorSchemeChanged.connect(self._on_color_scheme_changed)
        self.store, store_notice = self._open_store()
        self.choice_model = DeviceChoiceModel(self.settings.device, self.settings.strict)

        self.devices = DevicesHost()
        self.vision = VisionHost(classifier_factory)
        self.chat = ChatHost(chat_loader)
        self.models = ModelsHost()
        self.bench = BenchHost()
        self.settings_host = SettingsHost()
        self.hosts = (self.devices, self.vision, self.chat, self.models, self.bench, self.settings_host)
        self._save_banner: Banner | None = None

        self.window = MainWindow(__version__)
        self.devices_view = DevicesView(self.choice_model)
        self.classify_view = ClassifyView(self.choice_model)
        self.classify_view.last_open_dir = self.settings.last_open_dir
        self.chat_view = ChatView(
            self.store, self.choice_model, self.settings.system_prompt, dict(self.settings.chat_options)
        )
        self.chat_view.set_enter_sends(self.settings.chat_enter_sends)
        self.chat_view.reopen(self.settings.last_conversation)
        # A device failing mid-run: the retry offers of the Classify and Chat views (app/device_offers.py).
        self.offers = DeviceOffers(
            self.classify_view, self.chat_view, self.choice_model, self.vision, lambda: self.settings.top_k
        )
        self.window.add_view("devices", "Devices", "devices", self.devices_view)
        self.window.add_view("classify", "Classify", "classify", self.classify_view)
        self.window.add_view("chat", "Chat", "chat", self.chat_view)
        # Settings: the settings view and its host (app/settings_host.py); the values live in self.settings.
        # Built before the Benchmark wiring, which starts its worker (and so ONNX Runtime) straight away:
        # everything built after it delays the first frame in a race with that import. Added to the sidebar last.
        self.settings_view = SettingsView(
            self.choice_model,
            self.settings.theme,
            self.settings.allow_downloads,
            self.settings.system_prompt,
            dict(self.settings.chat_options),
        )
        wire_settings_view(
            self.settings_view,
            self.settings_host,
            classifier_folder=self.classifier_folder,
            set_status=lambda t: self.window.set_status("settings", t),
        )
        self.settings_view.theme_changed.connect(self._on_theme_picked)
        self.settings_view.allow_downloads_changed.connect(self._on_allow_downloads)
        self.settings_view.system_prompt_changed.connect(self._on_default_prompt)
        self.settings_view.chat_settings_requested.connect(self._show_chat_settings)
        self.settings_view.save_retry_requested.connect(self.save_settings)
        self.chat_view.settings_changed.connect(self.settings_view.show_chat_settings)
        self.window.closing.connect(self.settings_view.flush)  # before the closing save (connected in _wire)
        self.window.view_changed.connect(lambda key: self.settings_view.refresh_cache() if key == "settings" else None)
        # Benchmark: the bench view and its host (app/bench_host.py)
        self.bench_view = BenchView()
        self.window.add_view("benchmark", "Benchmark", "benchmark", self.bench_view)
        wire_bench_view(self.bench_view, self.bench, set_status=lambda t: self.window.set_status("bench", t))
        self.window.view_changed.connect(self._on_bench_shown)
        # Models: the library view and its host (app/models_host.py)
        self.models_view = ModelsView(self.settings.allow_downloads)
        self.window.add_view("models", "Models", "models", self.models_view)
        wire_models_view(
            self.models_view,
            self.models,
            downloads_allowed=lambda: self.settings.allow_downloads,
            on_allow_downloads=self._on_allow_downloads,
            set_status=lambda t: self.window.set_status("models", t),
        )
        self.window.view_changed.connect(lambda key: self.models.refresh() if key == "models" else None)
        self.window.add_view("settings", "Settings", "settings", self.settings_view)
        for notice in (settings_notice, store_notice):
            if notice:
                self.window.banners.show_message(notice, severity="warning")

        self._save_timer = QTimer(self)
        self._save_timer.setSingleShot(True)
        self._save_timer.setInterval(SAVE_DELAY_MS)
        self._save_timer.timeout.connect(self.save_settings)
        self._wire()
        self._restore_window()

    # --- construction -----------------------------------------------------------------------------
    def _open_store(self) -> tuple[ConversationStore, str | None]:
        try:
            store = ConversationStore()
            return store, store.notice
        except StudioError as exc:
            # Conversations still work for this session; the user is told they are not kept.
            fallback = Path(tempfile.mkdtemp(prefix="npu-studio-")) / "conversations.db"
            log.warning("conversation store unavailable (%s); using %s", exc, fallback)
            return ConversationStore(fallback), f"{exc.user_text()} Conversations are kept only until you quit."

    def _wire(self) -> None:
        w, cv, dv, ch = self.window, self.classify_view, self.devices_view, self.chat_view
        w.first_shown.connect(self._on_first_shown)
        w.view_changed.connect(self._on_view_changed)
        w.close_guard = self.close_guard
        w.closing.connect(self._on_window_closing)
        self.app.aboutToQuit.connect(self.shutdown)

        # devices
        dv.refresh_requested.connect(self.discover)
        self.devices.status.connect(lambda t: w.set_status("devices", t))
        self.devices.devices_found.connect(self._on_devices)
        # Windows ML EP downloads: the card asked for consent; the host downloads, then rediscovers.
        dv.downloads.download_requested.connect(self.devices.download_eps)
        dv.downloads.cancel_requested.connect(self.devices.cancel_download)
        self.devices.download_progress.connect(dv.downloads.show_progress)
        self.devices.downloaded.connect(lambda results: dv.downloads.show_results([r.message for r in results]))
        self.devices.failed.connect(dv.show_error)

        # vision
        cv.classify_requested.connect(self._classify)
        cv.classify_image_requested.connect(self._classify_image)
        cv.cancel_requested.connect(self.vision.cancel)
        self.vision.status.connect(lambda t: w.set_status("vision", t))
        wire_classify(cv, self.vision)
        self.vision.failed.connect(self.offers.on_vision_failed)

        # chat
        ch.generate_requested.connect(self.chat.generate)
        ch.stop_requested.connect(self.chat.cancel)
        ch.forget_requested.connect(self.chat.forget)
        ch.settings_changed.connect(self._on_chat_settings)
        ch.enter_sends_changed.connect(self._on_chat_enter_sends)
        ch.count_requested.connect(self.chat.count_tokens)
        self.chat.tokens_counted.connect(ch.on_tokens_counted)
        ch.conversation_changed.connect(self._on_chat_conversation)
        self.chat.status.connect(lambda t: w.set_status("chat", t))
        self.chat.status.connect(lambda t: ch.show_model_loading(t) if t else None)
        self.chat.model_loaded.connect(ch.on_model_loaded)
        self.chat.generation_started.connect(ch.on_generation_started)
        self.chat.text_generated.connect(ch.on_text)
        self.chat.generation_finished.connect(ch.on_finished)
        self.chat.cancelled.connect(ch.on_cancelled)
        self.chat.failed.connect(self.offers.on_chat_failed)

        self.choice_model.changed.connect(self._on_choice_changed)
        wire_status(w, cv, self.chat, self.vision)
        self.model_choice = ModelChoice(self)

        # window-wide shortcuts
        from PySide6.QtGui import QAction, QKeySequence

        new_chat = QAction("New chat", w)
        new_chat.setShortcut(QKeySequence.StandardKey.New)
        new_chat.triggered.connect(self.new_chat)
        w.addAction(new_chat)
        open_photos = QAction("Open photos", w)
        open_photos.setShortcut(QKeySequence.StandardKey.Open)
        open_photos.triggered.connect(self.open_photos)
        w.addAction(open_photos)
        cv.open_button.setShortcut(QKeySequence())  # the window-wide action owns Ctrl+O
        stop = QAction("Stop", w)
        stop.setShortcut(QKeySequence(Qt.Key.Key_Escape))
        stop.setShortcutContext(Qt.ShortcutContext.WindowShortcut)
        stop.triggered.connect(self.stop_current)
        w.addAction(stop)
        w.add_standard_actions(self.show_shortcuts)
        dv.try_classify_requested.connect(self.try_sample_photo)
        dv.try_chat_requested.connect(self.new_chat)

    def _on_bench_shown(self, key: str) -> None:
        if key == "benchmark":
            load_bench_view(self.bench)

    def _restore_window(self) -> None:
        w = self.window
        geometry = QByteArray.fromBase64(self.settings.window_geometry.encode("ascii", "ignore"))
        restored = not geometry.isEmpty() and w.restoreGeometry(geometry)
        self.open_maximized = fit_window(w, restored)  # first size from the screen; maximized when small
        if headless():
            # Offscreen there is no real screen to fit (its 800x600 is a placeholder): the smallest
            # laptop size the app promises, so that headless runs and tests see that layout.
            self.open_maximized = False
            if not restored:
                w.resize(1280, 720)
        state = QByteArray.fromBase64(self.settings.window_state.encode("ascii", "ignore"))
        if not state.isEmpty():
            w.restoreState(state)
        if self.settings.last_view in w.view_keys():
            w.show_view(self.settings.last_view)

    # --- start-up ---------------------------------------------------------------------------------
    def show(self) -> None:
        if getattr(self, "open_maximized", False):
            self.window.showMaximized()
        else:
            self.window.show()

    def apply_theme_live(self, theme: str) -> None:
        """Switch the theme of the running app (views, icons, charts follow); does not change the setting."""
        apply_theme(self.app, theme)

    def check_layout(self) -> list[Any]:
        """Layout problems of the window as it is now (see ui.layout_check)."""
        return check_layout(self.window)

    def show_shortcuts(self) -> None:
        ShortcutsSheet(self.window.shortcuts(), self.window).exec()

    def try_sample_photo(self) -> None:
        """The first-run path: one click from Home to a classified sample photo."""
        self.window.show_view("classify")
        samples = sorted(sample_photos(), key=lambda p: p.name != "chelsea.png")  # the cat first: a clear answer
        if samples:
            self.classify_view.classify_paths([str(samples[0])])

    def _on_first_shown(self) -> None:
        self.timings["window_shown_s"] = time.time() - self.started_at
        self.runtime_loaded_at_show = any(m in sys.modules for m in ("onnxruntime", "onnxruntime_genai"))
        log.info(
            "window shown %.0f ms after start (ONNX Runtime loaded: %s)",
            self.timings["window_shown_s"] * 1000,
            self.runtime_loaded_at_show,
        )
        # Next event-loop turn: the first frame is painted before any engine work starts.
        QTimer.singleShot(0, self._start_engines)

    def _start_engines(self) -> None:
        if self._shut_down:  # the window closed before its first event-loop turn
            return
        self.discover()
        self.models.refresh()  # the model pickers list the library
        if self.preload:
            self.load_classifier()
            self.load_chat_model()

    def discover(self) -> None:
        self.devices_view.show_loading()
        self.devices.discover()

    def classifier_folder(self) -> Path:
        return model_folder(self.settings.classifier)

    def chat_folder(self) -> Path:
        return model_folder(self.settings.chat_model)

    def load_classifier(self) -> None:
        folder = self.classifier_folder()
        if not folder.is_dir():
            self.classify_view.show_error(missing_model_error(self.settings.classifier, "image classifier"))
            return
        self.vision.load(folder, self.choice_model.choice())

    def load_chat_model(self) -> None:
        folder = self.chat_folder()
        if not folder.is_dir():
            self.chat_view.on_model_failed(missing_model_error(self.settings.chat_model, "chat model"))
            return
        self.chat_view.show_model_loading("Loading the chat model…")
        self.chat.load(folder, self.choice_model.choice())

    # --- requests ---------------------------------------------------------------------------------
    def _classify(self, paths_: list[str]) -> None:
        folder = self.classifier_folder()
        if not folder.is_dir():
            self.classify_view.show_error(missing_model_error(self.settings.classifier, "image classifier"))
            return
        choice = self.choice_model.choice()
        self.offers.remember_classify("paths", list(paths_), folder, choice)
        self.vision.classify(paths_, folder, choice, self.settings.top_k)
        self._remember_open_dir()

    def _classify_image(self, data: bytes, name: str) -> None:
        folder = self.classifier_folder()
        if not folder.is_dir():
            self.classify_view.show_error(missing_model_error(self.settings.classifier, "image classifier"))
            return
        choice = self.choice_model.choice()
        self.offers.remember_classify("bytes", (data, name), folder, choice)
        self.vision.classify_bytes(data, name, folder, choice, self.settings.top_k)

    def _remember_open_dir(self) -> None:
        if self.classify_view.last_open_dir != self.settings.last_open_dir:
            self.settings.last_open_dir = self.classify_view.last_open_dir
            self.schedule_save()

    def new_chat(self) -> None:
        self.window.show_view("chat")
        self.chat_view.new_conversation()

    def open_photos(self) -> None:
        self.window.show_view("classify")
        self.classify_view.open_files()

    def stop_current(self) -> None:
        view = self.window.current_view()
        if view == "chat":
            self.chat_view.escape()
        elif view == "classify":
            self.classify_view.cancel()
        elif view == "benchmark":
            self.bench_view.request_cancel()

    # --- results ----------------------------------------------------------------------------------
    def _on_devices(self, report: Any) -> None:
        info = {
            "onnxruntime": str(report.ort_version),
            "platform": str(report.platform),
            "providers": ", ".join(short_ep_name(p) for p in report.available_providers),
        }
        self.last_discovery = report
        self.devices_view.show_devices(report.devices, info)
        self._offer_ep_downloads()
        self.bench_view.set_devices(report.devices)
        usable = [d for d in report.devices if d.usable]
        kinds = ", ".join(dict.fromkeys(d.type.value for d in usable)) or "none"
        self.window.set_device_summary(f"ONNX Runtime {report.ort_version} · usable: {kinds}")

    def _on_choice_changed(self, choice: DeviceChoice) -> None:
        self.settings.device = self.choice_model.text
        self.settings.strict = choice.strict
        self.schedule_save()
        if self.preload:
            self.load_classifier()
        self.load_chat_model()

    def _on_chat_settings(self, prompt: str, options: dict[str, Any]) -> None:
        self.settings.system_prompt = prompt
        self.settings.chat_options = dict(options)
        self.schedule_save()

    def _on_chat_enter_sends(self, enter_sends: bool) -> None:
        self.settings.chat_enter_sends = enter_sends
        self.schedule_save()

    def _on_chat_conversation(self, conversation_id: int) -> None:
        if conversation_id != self.settings.last_conversation:
            self.settings.last_conversation = conversation_id
            self.schedule_save()

    def _on_allow_downloads(self, allowed: bool) -> None:
        changed = allowed != self.settings.allow_downloads
        self.settings.allow_downloads = allowed
        # One setting, two switches (Models and Settings): both show it. The Models switch re-enters here.
        self.models_view.allow_box.setChecked(allowed)
        self.settings_view.set_allow_downloads(allowed)
        self._offer_ep_downloads()  # the Windows ML EP download follows the same setting
        if changed:
            self.save_settings()

    def _offer_ep_downloads(self) -> None:
        """Windows ML EPs not on this PC yet, offered on the Devices view (enabled only with downloads on)."""
        catalog = getattr(getattr(self, "last_discovery", None), "catalog", None)
        offered = [(p.name, p.version) for p in catalog.providers if p.state.value != "ready"] if catalog else []
        self.devices_view.downloads.set_offer(offered, bool(self.settings.allow_downloads))

    def _on_theme_picked(self, theme: str) -> None:
        self.settings.theme = theme
        apply_theme(self.app, theme)
        self.save_settings()

    def _on_default_prompt(self, prompt: str) -> None:
        self.settings.system_prompt = prompt
        self.chat_view.panel.set_prompt(prompt)  # the Chat view's panel shows the same prompt
        self.save_settings()

    def _show_chat_settings(self) -> None:
        self.window.show_view("chat")
        self.chat_view.settings_button.setChecked(True)

    def _on_color_scheme_changed(self, *_: object) -> None:
        if self.settings.theme == "system":
            apply_theme(self.app, "system")

    def _on_view_changed(self, key: str) -> None:
        if key != self.settings.last_view:
            self.settings.last_view = key
            self.schedule_save()

    # --- settings ---------------------------------------------------------------------------------
    def schedule_save(self) -> None:
        self._save_timer.start()

    def save_settings(self) -> bool:
        self._save_timer.stop()
        try:
            save_settings(self.settings)
        except StorageError as exc:
            self._save_banner = self.window.banners.show_error(exc, severity="warning")
            self._save_banner.closed.connect(self._forget_save_banner)
            self.settings_view.show_save_failed(exc)  # keeps the values, offers a retry
            return False
        if self._save_banner is not None:
            self._save_banner.dismiss()
        self.settings_view.show_saved()
        return True

    def _forget_save_banner(self) -> None:
        self._save_banner = None

    def _capture_window(self, settings: Settings) -> None:
        settings.window_geometry = bytes(self.window.saveGeometry().toBase64().data()).decode("ascii")
        settings.window_state = bytes(self.window.saveState().toBase64().data()).decode("ascii")
        settings.last_view = self.window.current_view() or settings.last_view

    # --- shutdown ---------------------------------------------------------------------------------
    def busy(self) -> bool:
        return self.chat_view.generating or self.classify_view.busy or self.bench_view.busy

    def close_guard(self) -> bool:
        """Called by the window on close: False postpones the close until running work has stopped."""
        if self._close_stage == 0 and self.busy():
            self._close_stage = 1
            self.window.set_status("shutdown", "Stopping before closing…")
            for host in self.hosts:
                host.cancel()
            self._poll_close(time.monotonic() + CLOSE_GRACE_MS / 1000)
            return False
        return True

    def _poll_close(self, deadline: float) -> None:
        if not self.busy() or time.monotonic() >= deadline:
            self._close_stage = 2
            self.window.close()
            return
        QTimer.singleShot(20, lambda: self._poll_close(deadline))

    def _on_window_closing(self) -> None:
        self.chat_view.shutdown()  # anything still streaming is saved as stopped
        self._capture_window(self.settings)
        self.save_settings()

    def shutdown(self) -> bool:
        """Stop every host thread (cancel, quit, wait) and close the store. True when all stopped."""
        if self._shut_down:
            return True
        self._shut_down = True
        self.chat_view.shutdown()
        if self._save_timer.isActive():
            self.save_settings()
        stopped = all([host.shutdown() for host in self.hosts])
        if stopped:
            self.store.close()
        return stopped


def create_application(argv: list[str] | None = None) -> QApplication:
    existing = QApplication.instance()
    if isinstance(existing, QApplication):
        return existing
    QApplication.setApplicationName(paths.APP_NAME)
    QApplication.setOrganizationName(paths.APP_AUTHOR)
    QApplication.setApplicationVersion(__version__)
    QApplication.setDesktopFileName("npu-studio")
    return QApplication(argv if argv is not None else sys.argv[:1])

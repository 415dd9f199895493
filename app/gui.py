"""The desktop app's composition root: QApplication, theme, settings, storage, the engine hosts and
the main window, wired together; one excepthook; a staged shutdown.

Start-up order matters: the window is built and shown first (Qt and the UI only); ONNX Runtime and
the models are loaded afterwards, in the hosts' threads. Shutdown is staged: a close while work is
running first cancels it and waits (briefly) for the engines to report back, so that a partial answer
is saved as stopped; then settings are saved, the host threads are stopped and waited for, and the
store is closed.
"""

from __future__ import annotations

# First: every module imported after PySide6 would otherwise keep its source in memory.
import app.window.module_sources  # noqa: F401  # isort: skip
# isort: split

import logging
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import QObject, QTimer
from PySide6.QtGui import QKeySequence
from PySide6.QtWidgets import QApplication

from app import __version__, paths
from app.hosts.bench import BenchHost, load_bench_view, wire_bench_view
from app.hosts.chat import ChatHost
from app.hosts.chat_turns import ChatTurns
from app.hosts.conversations import Conversations, ConversationsHost
from app.hosts.devices import DevicesHost
from app.hosts.models import ModelsHost, wire_models_view
from app.hosts.server import server_host, wire_server_settings, wire_server_view
from app.hosts.settings import SettingsHost, wire_settings_view
from app.hosts.vision import ClassifierOpener, VisionHost, open_library_classifier
from app.model_folders import missing_model_error, model_folder
from app.server import DEFAULT_PORT
from app.storage.conversations import ConversationStore
from app.storage.settings import load_settings, snapshot
from app.window.actions import add_window_actions
from app.window.closing import StagedClose
from app.window.device_offers import DeviceOffers
from app.window.links import ModelChoice, wire_classify, wire_status
from app.window.placement import capture_window, restore_window
from app.window.settings_keeper import SettingsKeeper
from engines import DeviceChoice, StudioError, probe_plugins_first, short_ep_name
from ui.bench.view import BenchView
from ui.chat.view import ChatView
from ui.classify.samples import sample_photos
from ui.classify.view import ClassifyView
from ui.common.device_picker import DeviceChoiceModel
from ui.common.layout_check import check_layout
from ui.common.screen_fit import fit_window
from ui.common.theme import apply_theme
from ui.devices.view import DevicesView
from ui.main_window import MainWindow
from ui.models.view import ModelsView
from ui.server.view import ServerView
from ui.settings.view import SettingsView
from ui.shortcuts import ShortcutsSheet

if TYPE_CHECKING:
    from engines import DiscoveryReport

log = logging.getLogger(__name__)

PROCESS_STARTED = time.time()  # close enough to process start: app.gui is imported first thing by `gui`


class Studio(QObject):
    """Everything the running app holds, and how it fits together."""

    def __init__(
        self,
        app: QApplication,
        *,
        open_classifier: ClassifierOpener = open_library_classifier,
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
        self._shut_down = False
        self.last_discovery: DiscoveryReport | None = None

        self.settings, settings_notice = load_settings()
        loaded = snapshot(self.settings)  # what a save compares with: only what this app changes is written
        apply_theme(app, self.settings.theme)
        # Light/dark follows the OS while the app runs (when the theme setting is "system").
        app.styleHints().colorSchemeChanged.connect(self._on_color_scheme_changed)
        self.store, store_notice = self._open_store()
        self.choice_model = DeviceChoiceModel(self.settings.device, self.settings.strict)

        # A window process lives long: a plugin EP that offers no device here is not loaded into it (the
        # app, its self-test's screenshot processes and the benchmarks alike).
        probe_plugins_first()
        self.devices = DevicesHost()
        self.vision = VisionHost(open_classifier)
        self.chat = ChatHost(chat_loader)
        self.models = ModelsHost()
        self.bench = BenchHost()
        self.settings_host = SettingsHost()
        self.conversations_host = ConversationsHost(self.store)  # every read and write of the conversations
        self.hosts = (self.devices, self.vision, self.chat, self.models, self.bench, self.settings_host,
                      self.conversations_host)  # fmt: skip

        self.window = MainWindow(__version__)
        self.devices_view = DevicesView(self.choice_model)
        self.classify_view = ClassifyView(self.choice_model)
        self.classify_view.inputs.last_open_dir = self.settings.last_open_dir
        self.chat_view = ChatView(self.choice_model, self.settings.system_prompt, dict(self.settings.chat_options))
        self.chat_view.set_enter_sends(self.settings.chat_enter_sends)
        if preload:  # the chat model loads right after the first frame: a message sent now waits for it
            self.chat_view.show_model_loading("Loading the chat model…")
        # The Chat view's conversations and turns, stored off the GUI thread (app/hosts: conversations, chat_turns).
        self.conversations = Conversations(self.chat_view, self.conversations_host, self.chat.forget, self)
        self.turns = ChatTurns(self.chat_view.session, self.conversations_host, self.chat, self.conversations,
                               self.chat_view.on_model_failed, self)  # fmt: skip
        self.conversations.reopen(self.settings.last_conversation)
        # A device failing mid-run: the retry offers of the Classify and Chat views (app/window/device_offers.py).
        self.offers = DeviceOffers(self.classify_view, self.chat_view, self.choice_model)
        self.window.add_view("devices", "Devices", "devices", self.devices_view)
        self.window.add_view("classify", "Classify", "classify", self.classify_view)
        self.window.add_view("chat", "Chat", "chat", self.chat_view)
        # Settings: the settings view and its host (app/hosts/settings.py); the values live in self.settings.
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
        # Benchmark: the bench view and its host (app/hosts/bench.py)
        self.bench_view = BenchView()
        self.window.add_view("benchmark", "Benchmark", "benchmark", self.bench_view)
        wire_bench_view(self.bench_view, self.bench, set_status=lambda t: self.window.set_status("bench", t))
        self.window.view_changed.connect(self._on_bench_shown)
        # Models: the library view and its host (app/hosts/models.py)
        self.models_view = ModelsView(self.settings.allow_downloads)
        self.window.add_view("models", "Models", "models", self.models_view)
        wire_models_view(
            self.models_view,
            self.models,
            downloads_allowed=lambda: self.settings.allow_downloads,
            on_allow_downloads=self._on_allow_downloads,
            set_status=lambda t: self.window.set_status("models", t),
            model_folders=lambda: list(self.settings.model_folders),
            on_folders_changed=lambda folders: self.keeper.remember(model_folders=folders),
        )
        self.window.view_changed.connect(lambda key: self.models.refresh() if key == "models" else None)
        self.models_view.open_view_requested.connect(self.window.show_view)
        self.server_view = ServerView(DEFAULT_PORT)
        self.server = server_host(self.settings, self.chat, self.load_chat_model)  # serves the chat host's model
        self.window.add_view("server", "Server", "send", self.server_view)
        wire_server_view(self.server_view, self.server, self.window)
        wire_server_settings(self.server_view, self.server, self.settings, self.schedule_save)
        self.window.add_view("settings", "Settings", "settings", self.settings_view)
        for notice in (settings_notice, store_notice):
            if notice:
                self.window.banners.show_message(notice, severity="warning")

        self.keeper = SettingsKeeper(self.settings, self.window, self.settings_view, self, saved=loaded)
        self.staged_close = StagedClose(self.window, (self.server, *self.hosts), self.busy)
        self._wire()
        self.open_maximized = restore_window(self.window, self.settings, fit_window)

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
        w.view_changed.connect(lambda key: self.keeper.remember(last_view=key))
        w.close_guard = self.staged_close.guard
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

        # chat (its conversations and turns: self.conversations, self.turns)
        ch.settings_changed.connect(
            lambda prompt, options: self.keeper.remember(system_prompt=prompt, chat_options=dict(options))
        )
        ch.enter_sends_changed.connect(lambda enter_sends: self.keeper.remember(chat_enter_sends=enter_sends))
        ch.count_requested.connect(self.chat.count_tokens)
        self.chat.tokens_counted.connect(ch.on_tokens_counted)
        ch.session.conversation_changed.connect(lambda opened: self.keeper.remember(last_conversation=opened))
        self.chat.status.connect(lambda t: w.set_status("chat", t))
        self.chat.status.connect(lambda t: ch.show_model_loading(t) if t else None)
        self.chat.model_loaded.connect(ch.on_model_loaded)
        self.chat.model_unloaded.connect(ch.on_model_unloaded)
        self.chat.generation_waiting.connect(ch.session.answer.waiting)
        self.chat.text_generated.connect(ch.session.answer.append)
        self.chat.failed.connect(self.offers.on_chat_failed)  # after the turns' own slot (connected first)

        self.choice_model.changed.connect(self._on_choice_changed)
        wire_status(w, cv, self.chat, self.vision)
        self.model_choice = ModelChoice(self)

        add_window_actions(
            w, new_chat=self.new_chat, open_photos=self.open_photos, stop=self.stop_current,
            show_shortcuts=self.show_shortcuts,
        )
        cv.inputs.open_button.setShortcut(QKeySequence())  # the window-wide action owns Ctrl+O
        dv.try_classify_requested.connect(self.try_sample_photo)
        dv.try_chat_requested.connect(self.new_chat)

    def _on_bench_shown(self, key: str) -> None:
        if key == "benchmark":
            load_bench_view(self.bench)

    # --- start-up ---------------------------------------------------------------------------------
    def show(self) -> None:
        if getattr(self, "open_maximized", False):
            self.window.showMaximized()
        else:
            self.window.show()

    def apply_theme_live(self, theme: str) -> None:
        """Switch the theme of the running app (views, icons, charts follow); does not change the setting."""
        apply_theme(self.app, theme)

    def check_layout(self, roomy: bool = False) -> list[Any]:
        """Layout problems of the window as it is now (see ui.common.layout_check); `roomy`: a size the
        app promises to fit without scrolling."""
        return check_layout(self.window, roomy)

    def show_shortcuts(self) -> None:
        ShortcutsSheet(self.window.shortcuts(), self.window, enter_sends=self.settings.chat_enter_sends).exec()

    def try_sample_photo(self) -> None:
        """The first-run path: one click from Home to a classified sample photo."""
        self.window.show_view("classify")
        samples = sample_photos()  # the first one is the clearest answer (assets/samples/samples.json)
        if samples:
            self.classify_view.classify_paths([str(samples[0].path)])

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
        # Said at once, not when the worker gets to it: the status bar never reads "Ready" before the
        # devices are known (the host's own status replaces this line and clears it when done).
        self.window.set_status("devices", "Looking for devices…")
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
        self.keeper.remember(last_open_dir=self.classify_view.inputs.last_open_dir)

    def new_chat(self) -> None:
        self.window.show_view("chat")
        self.chat_view.new_conversation()

    def open_photos(self) -> None:
        self.window.show_view("classify")
        self.classify_view.inputs.open_files()

    def stop_current(self) -> None:
        view = self.window.current_view()
        if view == "chat":
            self.chat_view.escape()
        elif view == "classify":
            self.classify_view.cancel()
        elif view == "benchmark":
            self.bench_view.request_cancel()

    # --- results ----------------------------------------------------------------------------------
    def _on_devices(self, report: DiscoveryReport) -> None:
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
        self.keeper.remember(device=self.choice_model.text, strict=choice.strict)
        if self.preload:
            self.load_classifier()
        self.load_chat_model()


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
        catalog = self.last_discovery.catalog if self.last_discovery is not None else None
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
        self.chat_view.header.settings_button.setChecked(True)

    def _on_color_scheme_changed(self, *_: object) -> None:
        if self.settings.theme == "system":
            apply_theme(self.app, "system")


    # --- settings (app/window/settings_keeper.py) ------------------------------------------------------
    def schedule_save(self) -> None:
        self.keeper.schedule()

    def save_settings(self) -> bool:
        return self.keeper.save()

    # --- shutdown ---------------------------------------------------------------------------------
    def busy(self) -> bool:
        return (self.chat_view.session.generating or self.classify_view.busy or self.bench_view.busy
                or self.server.busy() > 0)  # fmt: skip

    def _on_window_closing(self) -> None:
        self.turns.finish()  # anything still streaming is saved as stopped
        capture_window(self.window, self.settings)
        self.save_settings()

    def shutdown(self) -> bool:
        """Stop every host thread (cancel, quit, wait) and close the store. True when all stopped."""
        if self._shut_down:
            return True
        self._shut_down = True
        self.turns.finish()
        if self.keeper.pending:
            self.save_settings()
        # The server first: its in-flight answers end (with an error event) while the chat model is still there.
        stopped = all([host.shutdown() for host in (self.server, *self.hosts)])
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

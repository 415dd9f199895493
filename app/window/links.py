"""Links between the views and the hosts that keep one truth on screen: the status bar says what runs
(never "Ready" during a batch or an answer), the model each view uses is picked in the view or in
Models and remembered per view, and the Classify view hears every load, placement and failure.

Views are duck-typed here (app never imports ui); the composition root (app.gui) calls these.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from app.hosts.models import LibrarySnapshot

log = logging.getLogger(__name__)

KIND_CLASSIFIER = "image-classifier"
KIND_LLM = "genai-llm"


def waiting_text(ahead: int) -> str:
    """The status while the window's answer waits for turns ahead of it (the server's clients)."""
    if ahead == 1:
        return "Waiting for another request to finish…"
    return f"Waiting for {ahead} other requests to finish…"


def wire_status(window: Any, classify_view: Any, chat_host: Any, vision_host: Any) -> None:
    """Work in progress reaches the status bar under its own key, so a host going idle (its status "")
    does not say "Ready" while the view is still classifying or the chat is still answering, and a
    finished load does not keep saying "Loading" while the photos run."""
    vision_host.model_loaded.connect(lambda *_: window.set_status("vision", ""))
    chat_host.model_loaded.connect(lambda *_: window.set_status("chat", ""))
    classify_view.work_status.connect(lambda text: window.set_status("classify", text))
    chat_host.generation_waiting.connect(
        lambda ahead: window.set_status("answer", waiting_text(ahead)))  # another door's requests go first
    chat_host.generation_started.connect(lambda *_: window.set_status("answer", "Writing an answer…"))
    for signal in (chat_host.generation_finished, chat_host.cancelled, chat_host.failed):
        signal.connect(lambda *_: window.set_status("answer", ""))


def wire_classify(classify_view: Any, vision_host: Any) -> None:
    cv = classify_view
    vision_host.status.connect(cv.show_busy)
    vision_host.model_loaded.connect(cv.show_loaded)
    vision_host.classified.connect(cv.show_result)
    vision_host.progress.connect(cv.show_progress)
    vision_host.finished.connect(cv.show_finished)
    vision_host.cancelled.connect(lambda _done: cv.show_cancelled())


class ModelChoice:
    """Which library model Classify and Chat use: picked in the view or in Models, kept in settings."""

    def __init__(self, studio: Any) -> None:
        self.studio = studio
        s = studio
        s.classify_view.set_model(s.settings.classifier)
        s.classify_view.model_chosen.connect(lambda name: self.use(KIND_CLASSIFIER, name))
        s.models_view.use_requested.connect(self.use)
        s.models.listed.connect(self._on_listed)
        s.chat_view.set_model(s.settings.chat_model)
        s.chat_view.model_chosen.connect(lambda name: self.use(KIND_LLM, name))
        self._show_in_use()

    def in_use(self) -> set[str]:
        return {self.studio.settings.classifier, self.studio.settings.chat_model}

    def use(self, kind: str, name: str) -> None:
        s = self.studio
        if kind == KIND_CLASSIFIER:
            if name == s.settings.classifier:
                return
            s.settings.classifier = name
            s.classify_view.set_model(name)
            if s.preload:
                s.load_classifier()
        elif kind == KIND_LLM:
            if name == s.settings.chat_model:
                return
            s.settings.chat_model = name
            s.chat_view.set_model(name)
            s.load_chat_model()
        else:
            log.info("ignored a model of unknown kind %s", kind)
            return
        s.schedule_save()
        self._show_in_use()

    def _on_listed(self, snapshot: LibrarySnapshot) -> None:
        entries = snapshot.entries
        self.studio.classify_view.set_model_entries(entries)
        self.studio.chat_view.set_model_entries(entries)
        self._show_in_use()

    def _show_in_use(self) -> None:
        self.studio.models_view.set_in_use(self.in_use())

"""The running app's settings: a changed value is saved after a short delay (a switch the user expects
to stick, at once); a failed save keeps the values and says so in a banner and on the Settings view,
with a retry there.

A save writes only what this app changed since it read or last saved the file (app/storage/settings.py), so a
setting another process saved meanwhile (a second window, a CLI command) is not undone.

The window and the Settings view are passed in (app modules other than app.gui import no ui).
"""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import QObject, QTimer

from app.storage.settings import Settings, save_settings, snapshot
from engines import StorageError

SAVE_DELAY_MS = 500


class SettingsKeeper(QObject):
    def __init__(
        self, settings: Settings, window: Any, settings_view: Any, parent: QObject | None = None,
        saved: Settings | None = None,
    ) -> None:
        super().__init__(parent)
        self.settings = settings
        # the values as read (then as last saved): what `save` compares with
        self._saved = snapshot(saved if saved is not None else settings)
        self._window = window
        self._view = settings_view
        self._banner: Any = None  # the save-failed banner while it is shown
        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        self._timer.setInterval(SAVE_DELAY_MS)
        self._timer.timeout.connect(self.save)

    @property
    def pending(self) -> bool:
        return self._timer.isActive()

    def schedule(self) -> None:
        self._timer.start()

    def remember(self, **values: Any) -> None:
        """Set the fields that changed and save them soon (nothing is saved when nothing changed)."""
        changed = {k: v for k, v in values.items() if getattr(self.settings, k) != v}
        for key, value in changed.items():
            setattr(self.settings, key, value)
        if changed:
            self.schedule()

    def save(self) -> bool:
        self._timer.stop()
        try:
            save_settings(self.settings, since=self._saved)
        except StorageError as exc:
            self._banner = self._window.banners.show_error(exc, severity="warning")
            self._banner.closed.connect(self._forget_banner)
            self._view.show_save_failed(exc)  # keeps the values, offers a retry
            return False
        self._saved = snapshot(self.settings)
        if self._banner is not None:
            self._banner.dismiss()
        self._view.show_saved()
        return True

    def _forget_banner(self) -> None:
        self._banner = None

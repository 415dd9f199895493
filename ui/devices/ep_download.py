"""The Devices view's offer to download Windows ML execution providers: it asks first (a download through
Windows Update), shows progress, can be cancelled, and is never offered while downloads are off."""

from __future__ import annotations

from collections.abc import Sequence

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QHBoxLayout, QProgressBar, QPushButton, QVBoxLayout, QWidget

from engines import short_ep_name
from ui.common.plain import ask, plain_label, set_plain
from ui.common.widgets import Card, muted_label


class EpDownloadCard(Card):
    """Hidden unless Windows ML offers EPs that are not on this PC yet."""

    download_requested = Signal(list)  # EP names, after the user agreed
    cancel_requested = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._names: list[str] = []
        row = QHBoxLayout()
        texts = QVBoxLayout()
        texts.setSpacing(2)
        self.title = plain_label()
        self.title.setObjectName("SectionTitle")
        texts.addWidget(self.title)
        self.detail = muted_label("")
        texts.addWidget(self.detail)
        self.progress = QProgressBar()
        self.progress.setRange(0, 100)
        self.progress.hide()
        texts.addWidget(self.progress)
        row.addLayout(texts, 1)
        self.download_button = QPushButton("Download…")
        self.download_button.clicked.connect(self._on_download)
        row.addWidget(self.download_button, 0, Qt.AlignmentFlag.AlignTop)
        self.cancel_button = QPushButton("Cancel")
        self.cancel_button.clicked.connect(self._on_cancel)
        self.cancel_button.hide()
        row.addWidget(self.cancel_button, 0, Qt.AlignmentFlag.AlignTop)
        self.body.addLayout(row)
        self.hide()

    def set_offer(self, offered: Sequence[tuple[str, str]], downloads_allowed: bool) -> None:
        """`offered`: (EP name, version) of the catalog EPs not ready yet."""
        self._names = [name for name, _ in offered]
        if not offered:
            self.hide()
            return
        listing = ", ".join(f"{short_ep_name(name)} {version}".strip() for name, version in offered)
        set_plain(self.title, f"Windows ML offers {listing} for this PC")
        if downloads_allowed:
            self.detail.setText("Windows Update downloads it when you ask; until then these devices are not usable.")
        else:
            self.detail.setText(
                "Downloads are off (offline). Allow downloads in Settings to get it from Windows Update."
            )
        self.download_button.setEnabled(downloads_allowed)
        self.download_button.show()
        self.cancel_button.hide()
        self.progress.hide()
        self.show()

    def _on_download(self) -> None:
        if not self._names:
            return
        listing = ", ".join(short_ep_name(n) for n in self._names)
        text = (
            f"NPU Studio asks Windows ML to download {listing} through Windows Update. This uses the network "
            "and can take a few minutes. Download now?"
        )
        if not self._confirm(text):
            return
        self.download_button.hide()
        self.cancel_button.show()
        self.cancel_button.setEnabled(True)
        self.progress.setValue(0)
        self.progress.show()
        self.detail.setText("Downloading from Windows Update…")
        self.download_requested.emit(list(self._names))

    def _on_cancel(self) -> None:
        self.cancel_button.setEnabled(False)
        self.detail.setText("Cancelling…")
        self.cancel_requested.emit()

    def show_progress(self, ep: str, value: float) -> None:
        self.progress.setValue(int(max(0.0, min(1.0, value)) * 100))
        self.detail.setText(f"Downloading {short_ep_name(ep)} from Windows Update…")

    def show_results(self, messages: Sequence[str]) -> None:
        self.cancel_button.hide()
        self.progress.hide()
        self.download_button.show()
        self.detail.setText(" ".join(messages))

    def _confirm(self, text: str) -> bool:
        return ask(self, "Download from Windows Update?", text)

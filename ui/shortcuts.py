"""The keyboard shortcuts sheet (Ctrl+/): built from the window's own actions, so it lists exactly the
keys that work."""

from __future__ import annotations

from collections.abc import Sequence

from PySide6.QtCore import QCoreApplication
from PySide6.QtWidgets import QDialog, QDialogButtonBox, QGridLayout, QLabel, QVBoxLayout, QWidget

from engines import rich_text
from ui.common.icons import icon
from ui.common.plain import plain_label, rich_label


# Keys that belong to a widget rather than the window (the sheet lists them too). The chat's send and
# new-line keys follow the user's setting (Enter sends, or Enter starts a new line and Ctrl+Enter sends).
def view_keys(enter_sends: bool = True) -> tuple[tuple[str, str], ...]:
    send, new_line = ("Enter", "Shift+Enter") if enter_sends else ("Ctrl+Enter", "Enter")
    return (
        ("Ctrl+V", "Classify the image on the clipboard (Classify)"),
        (send, "Send the message (Chat)"),
        (new_line, "New line in the message (Chat)"),
        ("Ctrl+R", "Write the last answer again (Chat)"),
        ("Ctrl+L", "Go to the message box (Chat)"),
        ("Tab / Shift+Tab", "Move between controls"),
    )


def tr(text: str) -> str:
    return QCoreApplication.translate("Shortcuts", text)


class ShortcutsSheet(QDialog):
    def __init__(
        self, rows: Sequence[tuple[str, str]], parent: QWidget | None = None, *, enter_sends: bool = True
    ) -> None:
        super().__init__(parent)
        self.setWindowTitle(tr("Keyboard shortcuts"))
        self.setAccessibleName(tr("Keyboard shortcuts"))
        layout = QVBoxLayout(self)
        title = QLabel(tr("Keyboard shortcuts"))
        title.setObjectName("SectionTitle")
        layout.addWidget(title)
        grid = QGridLayout()
        grid.setHorizontalSpacing(24)
        grid.setVerticalSpacing(6)
        self.rows = [*rows, *((keys, tr(what)) for keys, what in view_keys(enter_sends))]
        for row, (keys, what) in enumerate(self.rows):
            grid.addWidget(rich_label(f"<b>{rich_text(keys)}</b>", word_wrap=False), row, 0)
            grid.addWidget(plain_label(what, word_wrap=False), row, 1)
        layout.addLayout(grid)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close)
        buttons.rejected.connect(self.reject)
        buttons.accepted.connect(self.accept)
        self.close_button = buttons.button(QDialogButtonBox.StandardButton.Close)
        # The app's own icon, drawn in the theme's text colour (the platform's stays black on dark).
        self.close_button.setIcon(icon("close"))
        layout.addWidget(buttons)

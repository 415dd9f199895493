"""The main window: a sidebar of views, a banner area for app-wide notices, and a status bar that
shows what is loading or compiling in the background.

Views are added with `add_view(key, title, icon, widget)`; adding a key again replaces that view in
place.

The status bar never says "Ready" while something is still on its way: it reads "Starting…" until the
first news of any work (the app starts by looking for devices, which says so at once).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from PySide6.QtCore import QCoreApplication, QSize, Qt, QTimer, Signal
from PySide6.QtGui import QAction, QCloseEvent, QKeySequence, QResizeEvent, QShowEvent
from PySide6.QtWidgets import (
    QHBoxLayout,
    QLabel,
    QListWidget,
    QListWidgetItem,
    QMainWindow,
    QStackedWidget,
    QVBoxLayout,
    QWidget,
)

from ui.common.icons import icon
from ui.common.plain import plain_label
from ui.common.screen_fit import available, minimum_for
from ui.common.theme import colors
from ui.common.widgets import MARGIN, BannerArea, Glyph, Spinner, muted_label

APP_TITLE = "NPU Studio"
SIDEBAR_WIDE = 208
SIDEBAR_NARROW = 60
COMPACT_BELOW = 1100  # logical pixels of window width


def tr(text: str) -> str:
    return QCoreApplication.translate("MainWindow", text)


@dataclass
class _View:
    key: str
    title: str
    icon_name: str
    widget: QWidget
    item: QListWidgetItem


class MainWindow(QMainWindow):
    first_shown = Signal()
    closing = Signal()
    view_changed = Signal(str)

    def __init__(self, version: str = "", parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle(APP_TITLE)
        self.setWindowIcon(icon("app", colors().accent))
        self.setMinimumSize(minimum_for(available()))
        self.compact = False  # the sidebar shows icons only in a narrow window
        self._views: list[_View] = []
        self._shown = False
        self._status: dict[str, str] = {}
        # Asked on close: False postpones the close (the app first stops running work).
        self.close_guard: Callable[[], bool] | None = None

        root = QWidget()
        layout = QHBoxLayout(root)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(0)
        layout.addWidget(self._build_sidebar(version))
        content = QWidget()
        column = QVBoxLayout(content)
        column.setContentsMargins(0, 0, 0, 0)
        column.setSpacing(0)
        self.banners = BannerArea()
        self.banners.setContentsMargins(MARGIN, 12, MARGIN, 0)
        column.addWidget(self.banners)
        self.stack = QStackedWidget()
        column.addWidget(self.stack, 1)
        layout.addWidget(content, 1)
        self.setCentralWidget(root)

        bar = self.statusBar()
        bar.setSizeGripEnabled(False)
        self.status_spinner = Spinner(14)
        bar.addWidget(self.status_spinner)
        self.status_label = plain_label(tr("Starting…"), word_wrap=False)
        self.status_label.setAccessibleName(tr("Status"))
        bar.addWidget(self.status_label, 1)
        self.status_spinner.start()
        self.serving_label = muted_label("", word_wrap=False)  # "Serving at http://127.0.0.1:PORT"
        bar.addPermanentWidget(self.serving_label)
        self.device_label = muted_label("", word_wrap=False)
        bar.addPermanentWidget(self.device_label)

    def _build_sidebar(self, version: str) -> QWidget:
        sidebar = QWidget()
        sidebar.setObjectName("Sidebar")
        sidebar.setAttribute(Qt.WidgetAttribute.WA_StyledBackground, True)
        sidebar.setFixedWidth(SIDEBAR_WIDE)
        self.sidebar_panel = sidebar
        layout = QVBoxLayout(sidebar)
        layout.setContentsMargins(0, 18, 0, 14)
        layout.setSpacing(12)
        brand = QHBoxLayout()
        brand.setContentsMargins(18, 0, 18, 6)
        brand.setSpacing(10)
        logo = Glyph("app", 28, "accent")
        brand.addWidget(logo)
        name = QLabel(APP_TITLE)
        name.setObjectName("AppTitle")
        brand.addWidget(name, 1)
        self.app_name = name
        layout.addLayout(brand)
        self.sidebar = QListWidget()
        self.sidebar.setObjectName("SidebarList")
        self.sidebar.setIconSize(QSize(20, 20))
        self.sidebar.setVerticalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.sidebar.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.sidebar.currentRowChanged.connect(self._row_changed)
        layout.addWidget(self.sidebar, 1)
        footer = muted_label(tr("Offline · v{v}").format(v=version) if version else tr("Offline"), word_wrap=False)
        footer.setContentsMargins(18, 0, 18, 0)
        layout.addWidget(footer)
        self.footer = footer
        self.sidebar.setAccessibleName(tr("Views"))
        return sidebar

    # --- views ------------------------------------------------------------------------------------
    def add_view(self, key: str, title: str, icon_name: str, widget: QWidget) -> None:
        """Add a view to the sidebar (or replace the view with the same key)."""
        existing = self._find(key)
        if existing is not None:
            index = self.stack.indexOf(existing.widget)
            self.stack.removeWidget(existing.widget)
            existing.widget.deleteLater()
            self.stack.insertWidget(index, widget)
            existing.widget, existing.title = widget, title
            existing.item.setText(title)
            existing.item.setIcon(icon(icon_name, selected_color=colors().accent_text))
            return
        item = QListWidgetItem(icon(icon_name, selected_color=colors().accent_text), "" if self.compact else title)
        item.setData(Qt.ItemDataRole.UserRole, title)
        item.setData(Qt.ItemDataRole.AccessibleTextRole, title)
        item.setSizeHint(QSize(180, 40))
        self.sidebar.addItem(item)
        self.stack.addWidget(widget)
        self._views.append(_View(key, title, icon_name, widget, item))
        position = len(self._views)
        if position <= 9:
            action = QAction(tr("Show {title}").format(title=title), self)
            action.setShortcut(QKeySequence(f"Ctrl+{position}"))
            action.setShortcutContext(Qt.ShortcutContext.WindowShortcut)
            action.triggered.connect(lambda _=False, k=key: self.show_view(k))
            self.addAction(action)
            item.setToolTip(tr("{title} (Ctrl+{n})").format(title=title, n=position))
        if self.sidebar.currentRow() < 0:
            self.sidebar.setCurrentRow(0)

    def view_keys(self) -> list[str]:
        return [v.key for v in self._views]

    def view(self, key: str) -> QWidget:
        found = self._find(key)
        if found is None:
            raise KeyError(key)
        return found.widget

    def show_view(self, key: str) -> None:
        for row, view in enumerate(self._views):
            if view.key == key:
                self.sidebar.setCurrentRow(row)
                return

    def current_view(self) -> str:
        row = self.sidebar.currentRow()
        return self._views[row].key if 0 <= row < len(self._views) else ""

    def _find(self, key: str) -> _View | None:
        return next((v for v in self._views if v.key == key), None)

    def _row_changed(self, row: int) -> None:
        if 0 <= row < len(self._views):
            self.stack.setCurrentWidget(self._views[row].widget)
            self.view_changed.emit(self._views[row].key)

    # --- status -----------------------------------------------------------------------------------
    def set_status(self, source: str, text: str) -> None:
        """Background work per source (devices, vision, chat, ...); the spinner runs while any is busy and
        "Ready" shows only when none is."""
        self._status.pop(source, None)  # the latest news is shown: an update moves its source last
        if text:
            self._status[source] = text
        if self._status:
            self.status_label.setText(list(self._status.values())[-1])
            self.status_spinner.start()
        else:
            self.status_label.setText(tr("Ready"))
            self.status_spinner.stop()

    def set_serving(self, text: str) -> None:
        self.serving_label.setText(text)

    def set_device_summary(self, text: str) -> None:
        self.device_label.setText(text)

    # --- fit and keys -----------------------------------------------------------------------------
    def set_compact(self, compact: bool) -> None:
        """A narrow window gives the views the room: the sidebar keeps its icons, names go to tooltips."""
        if compact == self.compact:
            return
        self.compact = compact
        self.sidebar_panel.setFixedWidth(SIDEBAR_NARROW if compact else SIDEBAR_WIDE)
        self.app_name.setVisible(not compact)
        self.footer.setVisible(not compact)
        for view in self._views:
            view.item.setText("" if compact else view.title)
            view.item.setSizeHint(QSize(SIDEBAR_NARROW - 8 if compact else 180, 40))

    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        self.set_compact(self.width() < COMPACT_BELOW)

    def add_standard_actions(self, on_shortcuts: Callable[[], None]) -> None:
        """Ctrl+Q quits (after the same staged stop as closing the window); Ctrl+/ lists the shortcuts."""
        quit_action = QAction(tr("Quit"), self)
        quit_action.setShortcut(QKeySequence("Ctrl+Q"))
        quit_action.setShortcutContext(Qt.ShortcutContext.ApplicationShortcut)
        quit_action.triggered.connect(self.close)
        self.addAction(quit_action)
        sheet = QAction(tr("Keyboard shortcuts"), self)
        sheet.setShortcuts([QKeySequence("Ctrl+/"), QKeySequence("F1")])
        sheet.triggered.connect(on_shortcuts)
        self.addAction(sheet)

    def shortcuts(self) -> list[tuple[str, str]]:
        """(keys, what) for every window action with a shortcut, in the order they were added."""
        rows = []
        for action in self.actions():
            keys = [k.toString(QKeySequence.SequenceFormat.NativeText) for k in action.shortcuts()]
            if keys and action.text():
                rows.append((" / ".join(keys), action.text().replace("&", "")))
        return rows

    # --- window events ----------------------------------------------------------------------------
    def showEvent(self, event: QShowEvent) -> None:
        super().showEvent(event)
        if not self._shown:
            self._shown = True
            QTimer.singleShot(0, lambda: self.first_shown.emit())

    def closeEvent(self, event: QCloseEvent) -> None:
        if self.close_guard is not None and not self.close_guard():
            event.ignore()
            return
        self.closing.emit()
        event.accept()

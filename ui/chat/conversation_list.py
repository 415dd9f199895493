"""The list of stored conversations: search, new, rename (F2 or double-click), delete, export."""

from __future__ import annotations

import time
from collections.abc import Sequence

from PySide6.QtCore import QCoreApplication, QModelIndex, QPersistentModelIndex, QPoint, QRect, QSize, Qt, Signal
from PySide6.QtGui import QAction, QColor, QFont, QFontMetrics, QKeySequence, QPainter
from PySide6.QtWidgets import (
    QAbstractItemView,
    QHBoxLayout,
    QLineEdit,
    QListWidget,
    QListWidgetItem,
    QMenu,
    QPushButton,
    QStyle,
    QStyledItemDelegate,
    QStyleOptionViewItem,
    QVBoxLayout,
    QWidget,
)

from ui.chat.records import ConversationRecord
from ui.common.icons import icon
from ui.common.plain import plain_text
from ui.common.theme import colors

SUBTITLE_ROLE = Qt.ItemDataRole.UserRole + 1
ID_ROLE = Qt.ItemDataRole.UserRole


def tr(text: str) -> str:
    return QCoreApplication.translate("ConversationList", text)


def when(timestamp: float, now: float | None = None) -> str:
    """ "just now", "5 min ago", "3 h ago", or a date."""
    delta = (now or time.time()) - timestamp
    if delta < 60:
        return tr("just now")
    if delta < 3600:
        return tr("{n} min ago").format(n=int(delta // 60))
    if delta < 86400:
        return tr("{n} h ago").format(n=int(delta // 3600))
    return time.strftime("%d %b %Y", time.localtime(timestamp))


class _Delegate(QStyledItemDelegate):
    """Title on the first line, a muted subtitle under it."""

    def sizeHint(self, option: QStyleOptionViewItem, index: QModelIndex | QPersistentModelIndex) -> QSize:
        height = option.fontMetrics.height()
        return QSize(0, height * 2 + 18)  # as wide as the list: never a horizontal scroll bar

    def paint(
        self, painter: QPainter, option: QStyleOptionViewItem, index: QModelIndex | QPersistentModelIndex
    ) -> None:
        c = colors()
        rect: QRect = option.rect
        selected = bool(option.state & QStyle.StateFlag.State_Selected)
        hovered = bool(option.state & QStyle.StateFlag.State_MouseOver)
        painter.save()
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        box = rect.adjusted(4, 2, -4, -2)
        if selected or hovered:
            painter.setPen(Qt.PenStyle.NoPen)
            painter.setBrush(QColor(c.info_bg if selected else c.surface_alt))
            painter.drawRoundedRect(box, 8, 8)
        metrics = option.fontMetrics
        text_rect = box.adjusted(10, 6, -10, -6)
        title_font = QFont(option.font)
        title_font.setWeight(QFont.Weight.DemiBold if selected else QFont.Weight.Medium)
        painter.setFont(title_font)
        painter.setPen(QColor(c.text))
        # Elided with the bold font it is drawn in, so a long title ends inside its highlight.
        title = QFontMetrics(title_font).elidedText(
            str(index.data(Qt.ItemDataRole.DisplayRole)), Qt.TextElideMode.ElideRight, text_rect.width()
        )
        painter.drawText(text_rect.topLeft() + QPoint(0, metrics.ascent()), title)
        painter.setFont(option.font)
        painter.setPen(QColor(c.muted))
        subtitle = metrics.elidedText(
            str(index.data(SUBTITLE_ROLE) or ""), Qt.TextElideMode.ElideRight, text_rect.width()
        )
        painter.drawText(text_rect.topLeft() + QPoint(0, metrics.height() + 4 + metrics.ascent()), subtitle)
        painter.restore()


class ConversationList(QWidget):
    selected = Signal(int)
    new_requested = Signal()
    search_changed = Signal(str)
    rename_requested = Signal(int, str)
    delete_requested = Signal(int)
    export_requested = Signal(int, str)  # id, "markdown" | "json"

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setMinimumWidth(190)
        self.setMaximumWidth(240)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 12, 0)
        layout.setSpacing(8)
        top = QHBoxLayout()
        self.new_button = QPushButton(icon("new", colors().accent_text), tr("New chat"))
        self.new_button.setObjectName("Primary")
        self.new_button.setToolTip(tr("Start a new conversation (Ctrl+N)"))
        self.new_button.clicked.connect(self.new_requested)
        top.addWidget(self.new_button, 1)
        layout.addLayout(top)
        self.search = QLineEdit()
        self.search.setPlaceholderText(tr("Search chats"))
        self.search.setAccessibleName(tr("Search conversations"))
        self.search.setClearButtonEnabled(True)
        self.search_icon = self.search.addAction(
            icon("search", colors().muted), QLineEdit.ActionPosition.LeadingPosition
        )
        self.search.textChanged.connect(self.search_changed)
        layout.addWidget(self.search)
        self.list = QListWidget()
        self.list.setItemDelegate(_Delegate(self.list))
        self.list.setAccessibleName(tr("Conversations"))
        self.list.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.list.setMouseTracking(True)
        self.list.setFrameShape(QListWidget.Shape.NoFrame)
        self.list.setStyleSheet("QListWidget { background: transparent; }")
        self.list.setEditTriggers(
            QAbstractItemView.EditTrigger.DoubleClicked | QAbstractItemView.EditTrigger.EditKeyPressed
        )
        self.list.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)
        self.list.customContextMenuRequested.connect(self._menu)
        self.list.currentItemChanged.connect(self._current_changed)
        self.list.itemChanged.connect(self._item_changed)
        layout.addWidget(self.list, 1)
        delete = QAction(self.list)
        delete.setShortcut(QKeySequence.StandardKey.Delete)
        delete.setShortcutContext(Qt.ShortcutContext.WidgetShortcut)
        delete.triggered.connect(self._delete_current)
        self.list.addAction(delete)
        self._filling = False

    def set_conversations(self, conversations: Sequence[ConversationRecord], current: int | None) -> None:
        self._filling = True
        try:
            self.list.clear()
            for conversation in conversations:
                item = QListWidgetItem(plain_text(conversation.title, one_line=True))
                item.setData(ID_ROLE, conversation.id)
                count = conversation.message_count
                messages = tr("1 message") if count == 1 else tr("{n} messages").format(n=count)
                item.setData(SUBTITLE_ROLE, f"{when(conversation.updated)} · {messages}")
                item.setFlags(item.flags() | Qt.ItemFlag.ItemIsEditable)
                self.list.addItem(item)
                if conversation.id == current:
                    self.list.setCurrentItem(item)
        finally:
            self._filling = False

    def restyle(self) -> None:
        self.new_button.setIcon(icon("new", colors().accent_text))
        self.search_icon.setIcon(icon("search", colors().muted))
        self.list.viewport().update()

    def current_id(self) -> int | None:
        item = self.list.currentItem()
        return int(item.data(ID_ROLE)) if item is not None else None

    def _current_changed(self, item: QListWidgetItem | None, _previous: QListWidgetItem | None) -> None:
        if item is not None and not self._filling:
            self.selected.emit(int(item.data(ID_ROLE)))

    def _item_changed(self, item: QListWidgetItem) -> None:
        if not self._filling:
            self.rename_requested.emit(int(item.data(ID_ROLE)), item.text())

    def _delete_current(self) -> None:
        ident = self.current_id()
        if ident is not None:
            self.delete_requested.emit(ident)

    def _menu(self, pos: QPoint) -> None:
        item = self.list.itemAt(pos)
        if item is None:
            return
        ident = int(item.data(ID_ROLE))
        menu = QMenu(self)
        menu.addAction(icon("edit"), tr("Rename"), lambda: self.list.editItem(item))
        menu.addAction(
            icon("export"), tr("Export as Markdown…"), lambda: self.export_requested.emit(ident, "markdown")
        )
        menu.addAction(icon("export"), tr("Export as JSON…"), lambda: self.export_requested.emit(ident, "json"))
        menu.addSeparator()
        menu.addAction(icon("delete"), tr("Delete"), lambda: self.delete_requested.emit(ident))
        menu.exec(self.list.viewport().mapToGlobal(pos))

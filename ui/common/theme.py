"""One palette (light and dark) for Qt's Fusion style, plus the few style rules palettes cannot express."""

from __future__ import annotations

from dataclasses import dataclass

from PySide6.QtCore import Qt
from PySide6.QtGui import QColor, QGuiApplication, QPalette
from PySide6.QtWidgets import QApplication


@dataclass(frozen=True)
class Colors:
    dark: bool
    window: str
    surface: str  # cards, inputs
    surface_alt: str
    sidebar: str
    border: str
    text: str
    muted: str
    accent: str
    accent_text: str
    ok: str
    warn: str
    error: str
    ok_bg: str
    warn_bg: str
    error_bg: str
    info_bg: str
    code_bg: str
    user_bubble: str


LIGHT = Colors(
    dark=False,
    window="#f4f5f7",
    surface="#ffffff",
    surface_alt="#f0f2f5",
    sidebar="#e9ecf1",
    border="#d5dae1",
    text="#1c232c",
    muted="#66707d",
    accent="#3367d6",
    accent_text="#ffffff",
    ok="#1f8a4c",
    warn="#a86408",
    error="#c93636",
    ok_bg="#e3f4ea",
    warn_bg="#fdf1dc",
    error_bg="#fbe4e4",
    info_bg="#e5edfc",
    code_bg="#f1f3f6",
    user_bubble="#eaf0fc",
)

DARK = Colors(
    dark=True,
    window="#1d2026",
    surface="#262a31",
    surface_alt="#2d3139",
    sidebar="#16181d",
    border="#3a3f49",
    text="#e5e8ec",
    muted="#9aa3ae",
    accent="#5b8def",
    accent_text="#ffffff",
    ok="#4cc27d",
    warn="#e5a53a",
    error="#f07070",
    ok_bg="#1f3a2b",
    warn_bg="#40321a",
    error_bg="#452224",
    info_bg="#223152",
    code_bg="#1c1f25",
    user_bubble="#2a3550",
)

_current: Colors = LIGHT


def colors() -> Colors:
    """The colours of the theme in use."""
    return _current


def system_prefers_dark() -> bool:
    hints = QGuiApplication.styleHints()
    return bool(hints.colorScheme() == Qt.ColorScheme.Dark)


def resolve_dark(theme: str) -> bool:
    """`system` follows the OS; `light` and `dark` force one."""
    if theme == "dark":
        return True
    if theme == "light":
        return False
    return system_prefers_dark()


def palette_for(c: Colors) -> QPalette:
    p = QPalette()
    role = QPalette.ColorRole
    groups = (QPalette.ColorGroup.Active, QPalette.ColorGroup.Inactive)
    values = {
        role.Window: c.window,
        role.WindowText: c.text,
        role.Base: c.surface,
        role.AlternateBase: c.surface_alt,
        role.ToolTipBase: c.surface,
        role.ToolTipText: c.text,
        role.PlaceholderText: c.muted,
        role.Text: c.text,
        role.Button: c.surface,
        role.ButtonText: c.text,
        role.BrightText: c.error,
        role.Highlight: c.accent,
        role.HighlightedText: c.accent_text,
        role.Link: c.accent,
        role.LinkVisited: c.accent,
        role.Light: c.surface,
        role.Midlight: c.surface_alt,
        role.Mid: c.border,
        role.Dark: c.border,
        role.Shadow: "#000000",
    }
    for group in groups:
        for r, value in values.items():
            p.setColor(group, r, QColor(value))
    disabled = QPalette.ColorGroup.Disabled
    for r, value in values.items():
        p.setColor(disabled, r, QColor(value))
    muted = QColor(c.muted)
    for r in (role.WindowText, role.Text, role.ButtonText):
        p.setColor(disabled, r, muted)
    p.setColor(disabled, role.Highlight, QColor(c.border))
    return p


def stylesheet(c: Colors) -> str:
    return f"""
QWidget#Sidebar {{ background: {c.sidebar}; border-right: 1px solid {c.border}; }}
QListWidget#SidebarList {{ background: transparent; border: none; outline: none; }}
QListWidget#SidebarList::item {{ padding: 9px 12px; margin: 2px 8px; border-radius: 8px; color: {c.text}; }}
QListWidget#SidebarList::item:hover {{ background: {c.surface_alt}; }}
QListWidget#SidebarList::item:selected {{ background: {c.accent}; color: {c.accent_text}; }}
QLabel#AppTitle {{ font-size: 15px; font-weight: 600; }}
QLabel#ViewTitle {{ font-size: 20px; font-weight: 600; }}
QLabel#SectionTitle {{ font-size: 13px; font-weight: 600; }}
QLabel[muted="true"] {{ color: {c.muted}; }}
QFrame#Card {{ background: {c.surface}; border: 1px solid {c.border}; border-radius: 10px; }}
QFrame#Card[disabled="true"] {{ background: {c.surface_alt}; }}
QFrame#EmptyCard {{ background: {c.surface}; border: 1px dashed {c.border}; border-radius: 10px; }}
QFrame#DropZone {{ background: {c.surface}; border: 2px dashed {c.border}; border-radius: 12px; }}
QFrame#DropZone[hover="true"] {{ border-color: {c.accent}; background: {c.info_bg}; }}
QLabel[badge="ok"] {{ background: {c.ok_bg}; color: {c.ok}; border-radius: 9px; padding: 3px 10px; font-weight: 600; }}
QLabel[badge="warn"] {{ background: {c.warn_bg}; color: {c.warn}; border-radius: 9px; padding: 3px 10px;
    font-weight: 600; }}
QLabel[badge="error"] {{ background: {c.error_bg}; color: {c.error}; border-radius: 9px; padding: 3px 10px;
    font-weight: 600; }}
QLabel[badge="info"] {{ background: {c.info_bg}; color: {c.accent}; border-radius: 9px; padding: 3px 10px;
    font-weight: 600; }}
QLabel[badge="neutral"] {{ background: {c.surface_alt}; color: {c.muted}; border-radius: 9px; padding: 3px 10px; }}
QFrame#Banner {{ border-radius: 8px; }}
QFrame#Banner[severity="error"] {{ background: {c.error_bg}; border: 1px solid {c.error}; }}
QFrame#Banner[severity="warning"] {{ background: {c.warn_bg}; border: 1px solid {c.warn}; }}
QFrame#Banner[severity="info"] {{ background: {c.info_bg}; border: 1px solid {c.accent}; }}
QFrame#Banner QLabel {{ background: transparent; }}
QPushButton {{ padding: 6px 14px; border-radius: 6px; }}
QPushButton#Primary {{ background: {c.accent}; color: {c.accent_text}; border: 1px solid {c.accent};
    font-weight: 600; }}
QPushButton#Primary:disabled {{ background: {c.border}; border-color: {c.border}; color: {c.muted}; }}
QPushButton {{ border: 1px solid {c.border}; background: {c.surface}; color: {c.text}; }}
QPushButton:hover {{ border-color: {c.accent}; }}
QPushButton:pressed {{ background: {c.surface_alt}; }}
QPushButton:disabled {{ color: {c.muted}; background: {c.surface_alt}; }}
QToolButton {{ padding: 4px; border-radius: 6px; border: 1px solid transparent; }}
QToolButton#SampleThumb {{ padding: 4px 6px; border: 1px solid {c.border}; background: {c.surface}; }}
QToolButton#SampleThumb:hover {{ border-color: {c.accent}; }}
QFrame#Popover {{ background: {c.surface}; border: 1px solid {c.border}; border-radius: 8px; }}
/* A focus ring that can be seen: keyboard users must know where they are. */
QPushButton:focus, QToolButton:focus {{ border: 2px solid {c.accent}; }}
QPushButton#Primary:focus {{ border: 2px solid {c.text}; }}
QComboBox:focus, QLineEdit:focus, QSpinBox:focus, QPlainTextEdit:focus, QTextEdit:focus {{
    border: 2px solid {c.accent}; border-radius: 4px; }}
QListWidget:focus, QTableView:focus, QTableWidget:focus {{ border: 2px solid {c.accent}; }}
/* Check boxes and radio buttons show focus by their text's colour: a rule on ::indicator would make the
   style sheet draw the indicator itself, and a focused, checked box would lose its tick. */
QCheckBox:focus, QRadioButton:focus {{ color: {c.accent}; }}
QToolButton:hover {{ background: {c.surface_alt}; }}
QProgressBar {{ border: 1px solid {c.border}; border-radius: 5px; background: {c.surface_alt}; text-align: center;
    min-height: 10px; }}
QProgressBar::chunk {{ background: {c.accent}; border-radius: 4px; }}
QStatusBar {{ border-top: 1px solid {c.border}; }}
QStatusBar QLabel {{ padding: 0 6px; }}
QTextBrowser#Transcript {{ border: none; background: {c.window}; }}
QTableView {{ gridline-color: {c.border}; }}
"""


def apply_theme(app: QApplication, theme: str = "system") -> Colors:
    """Fusion, the palette for `theme`, and the style rules; returns the colours in use."""
    global _current
    app.setStyle("Fusion")
    _current = DARK if resolve_dark(theme) else LIGHT
    app.setPalette(palette_for(_current))
    app.setStyleSheet(stylesheet(_current))
    return _current

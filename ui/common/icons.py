"""SVG icons from `assets/icons/`, tinted with the palette and rendered crisp at the screen's scale.

Icons are drawn when painted, in the colours of the theme in use: an icon made in the light theme is
right in the dark one after a live switch, with no widget having to set it again. A colour is named by
its role in the palette (text, muted, accent, ...); a literal colour stays as given.
"""

from __future__ import annotations

from dataclasses import fields
from functools import lru_cache

from PySide6.QtCore import QByteArray, QRect, QRectF, QSize, Qt
from PySide6.QtGui import QGuiApplication, QIcon, QIconEngine, QPainter, QPixmap
from PySide6.QtSvg import QSvgRenderer

from app.paths import assets_dir
from ui.common.theme import Colors, colors

_ROLES = {f.name for f in fields(Colors) if f.name != "dark"}


@lru_cache(maxsize=64)
def _svg_source(name: str) -> str:
    path = assets_dir() / "icons" / f"{name}.svg"
    try:
        return path.read_text(encoding="utf-8")
    except OSError:
        # A missing icon must not stop the app: draw a small neutral square instead.
        return (
            '<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 24 24" fill="none" stroke="currentColor" '
            'stroke-width="1.8"><rect x="5" y="5" width="14" height="14" rx="3"/></svg>'
        )


def _scale() -> float:
    screen = QGuiApplication.primaryScreen()
    return max(1.0, float(screen.devicePixelRatio())) if screen is not None else 1.0


def role_of(color: str | None, default: str = "text") -> str:
    """The palette role a colour plays in the current theme (`colors().accent` -> "accent"), so that
    the icon follows a theme switch; a colour of no role is kept literally."""
    if color is None:
        return default
    if color in _ROLES:
        return color
    current = colors()
    for role in ("text", "muted", "accent", "accent_text", "ok", "warn", "error"):
        if getattr(current, role) == color:
            return role
    return color


def resolve(role: str) -> str:
    return str(getattr(colors(), role)) if role in _ROLES else role


@lru_cache(maxsize=512)
def _render(name: str, width: int, height: int, tint: str) -> QPixmap:
    svg = _svg_source(name).replace("currentColor", tint)
    renderer = QSvgRenderer(QByteArray(svg.encode("utf-8")))
    out = QPixmap(width, height)
    out.fill(Qt.GlobalColor.transparent)
    painter = QPainter(out)
    painter.setRenderHint(QPainter.RenderHint.Antialiasing)
    renderer.render(painter, QRectF(0, 0, width, height))
    painter.end()
    return out


def pixmap(name: str, size: int = 24, color: str | None = None) -> QPixmap:
    """The icon `name` as a pixmap of `size` logical pixels, tinted with `color` (default: text colour)."""
    scale = _scale()
    side = round(size * scale)
    out = QPixmap(_render(name, side, side, resolve(role_of(color))))
    out.setDevicePixelRatio(scale)
    return out


class ThemedIconEngine(QIconEngine):
    """Renders the SVG at paint time with the current theme's colour for each mode."""

    def __init__(self, name: str, role: str, selected_role: str | None) -> None:
        super().__init__()
        self.name = name
        self.role = role
        self.selected_role = selected_role

    def _tint(self, mode: QIcon.Mode) -> str:
        if mode == QIcon.Mode.Disabled:
            return resolve("muted")
        if mode == QIcon.Mode.Selected and self.selected_role:
            return resolve(self.selected_role)
        return resolve(self.role)

    def pixmap(self, size: QSize, mode: QIcon.Mode, state: QIcon.State) -> QPixmap:
        return QPixmap(_render(self.name, max(1, size.width()), max(1, size.height()), self._tint(mode)))

    def scaledPixmap(self, size: QSize, mode: QIcon.Mode, state: QIcon.State, scale: float) -> QPixmap:
        width, height = max(1, round(size.width() * scale)), max(1, round(size.height() * scale))
        out = QPixmap(_render(self.name, width, height, self._tint(mode)))
        out.setDevicePixelRatio(scale)
        return out

    def paint(self, painter: QPainter, rect: QRect, mode: QIcon.Mode, state: QIcon.State) -> None:
        scale = painter.device().devicePixelRatioF() if painter.device() is not None else 1.0
        painter.drawPixmap(rect, self.scaledPixmap(rect.size(), mode, state, scale))

    def clone(self) -> QIconEngine:
        return ThemedIconEngine(self.name, self.role, self.selected_role)

    def iconName(self) -> str:
        return self.name


def icon(name: str, color: str | None = None, selected_color: str | None = None) -> QIcon:
    """A QIcon with normal, disabled and (optionally) selected tints that follow the theme."""
    selected = role_of(selected_color) if selected_color else None
    return QIcon(ThemedIconEngine(name, role_of(color), selected))


def clear_cache() -> None:
    """Forget loaded sources and renders."""
    _svg_source.cache_clear()
    _render.cache_clear()

"""SVG icons from `assets/icons/`, tinted with the palette and rendered crisp at the screen's scale."""

from __future__ import annotations

from functools import lru_cache

from PySide6.QtCore import QByteArray, QRectF, Qt
from PySide6.QtGui import QGuiApplication, QIcon, QPainter, QPixmap
from PySide6.QtSvg import QSvgRenderer

from app.paths import assets_dir
from ui.theme import colors

_SIZES = (16, 20, 24, 32, 48)


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


def pixmap(name: str, size: int = 24, color: str | None = None) -> QPixmap:
    """The icon `name` as a pixmap of `size` logical pixels, tinted with `color` (default: text colour)."""
    tint = color or colors().text
    svg = _svg_source(name).replace("currentColor", tint)
    renderer = QSvgRenderer(QByteArray(svg.encode("utf-8")))
    scale = _scale()
    out = QPixmap(round(size * scale), round(size * scale))
    out.fill(Qt.GlobalColor.transparent)
    painter = QPainter(out)
    painter.setRenderHint(QPainter.RenderHint.Antialiasing)
    renderer.render(painter, QRectF(0, 0, out.width(), out.height()))
    painter.end()
    out.setDevicePixelRatio(scale)
    return out


def icon(name: str, color: str | None = None, selected_color: str | None = None) -> QIcon:
    """A QIcon with normal, disabled and (optionally) selected tints."""
    result = QIcon()
    for size in _SIZES:
        result.addPixmap(pixmap(name, size, color), QIcon.Mode.Normal)
        result.addPixmap(pixmap(name, size, colors().muted), QIcon.Mode.Disabled)
        if selected_color:
            result.addPixmap(pixmap(name, size, selected_color), QIcon.Mode.Selected)
    return result


def clear_cache() -> None:
    """Forget loaded sources (after a theme change nothing is cached by colour, so only the sources)."""
    _svg_source.cache_clear()

"""Benchmark charts, side by side: latency per device (bars at p50 with p90 whiskers and p99 dots,
each number written beside its own mark) and the latency distribution per device (histograms).

pyqtgraph draws them: it is Qt-native (QGraphicsView, so the charts theme, resize and grab() like any
widget), fast with thousands of samples, and needs no extra Qt module (QtCharts would need the
PySide6-Addons wheels). It is imported by this module only, which the Benchmark view loads when the
charts are first needed, so the app's start-up does not pay for it.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QEvent, QSize, Qt
from PySide6.QtGui import QColor, QShowEvent
from PySide6.QtWidgets import QHBoxLayout, QLabel, QVBoxLayout, QWidget

from engines import DeviceResult, percentile
from ui.common.theme import colors

DEVICE_COLORS = {"NPU": "#8a5cd6", "GPU": "#1f9a5a", "CPU": "#3367d6"}
HISTOGRAM_BINS = 30
BAR_WIDTH = 0.55
CHART_MIN_HEIGHT = 170  # the plot, its title and its axis: what 1280x720 leaves beside the setup and table
LEGEND = "Bars and their numbers: p50 · whiskers: p90 · dots: p99 · orange: the run fell back to another device."


def device_color(result: DeviceResult) -> str:
    if result.fell_back:
        return colors().warn  # a fallback never looks like the device it was asked for
    return DEVICE_COLORS.get(result.device, colors().accent)


def _style(widget: pg.PlotWidget) -> None:
    """Background, axes and title colours from the theme in use (again after a theme switch)."""
    c = colors()
    widget.setBackground(c.surface)
    item = widget.getPlotItem()
    item.titleLabel.setText(item.titleLabel.text, color=c.text, size="10pt")
    for name in ("left", "bottom"):
        axis = item.getAxis(name)
        axis.setPen(pg.mkPen(c.border))
        axis.setTextPen(pg.mkPen(c.muted))
        # the y-axis keeps room for its numbers and unit, so they are never cut at 1.5x
        if name == "left":
            axis.setWidth(56)


class _PlotWidget(pg.PlotWidget):
    """A plot that asks for no more than its minimum: a scrolling page lays out by preferred sizes, and
    pyqtgraph's 640x480 would push the results table below the fold."""

    def sizeHint(self) -> QSize:
        return QSize(self.minimumWidth(), self.minimumHeight())


def _plot(title: str) -> pg.PlotWidget:
    widget = _PlotWidget()
    widget.setMinimumHeight(CHART_MIN_HEIGHT)
    widget.setMinimumWidth(280)
    item = widget.getPlotItem()
    item.setTitle(title, color=colors().text, size="10pt")
    item.showGrid(x=False, y=True, alpha=0.25)
    item.setMenuEnabled(False)
    item.hideButtons()
    _style(widget)
    return widget


class BenchCharts(QWidget):
    """The two charts for one model's results."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        pg.setConfigOptions(antialias=True)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(4)
        row = QHBoxLayout()
        row.setSpacing(8)
        self.bars = _plot("Latency per device")
        self.distribution = _plot("Latency distribution")
        self.distribution.getPlotItem().addLegend(offset=(-10, 10), labelTextColor=colors().text)
        row.addWidget(self.bars, 1)
        row.addWidget(self.distribution, 1)
        layout.addLayout(row, 1)
        self.caption = QLabel()
        self.caption.setTextFormat(Qt.TextFormat.PlainText)
        self.caption.setProperty("muted", True)
        self.caption.setWordWrap(True)
        layout.addWidget(self.caption)
        self.shown: list[DeviceResult] = []
        self.theme_dark = colors().dark
        self.bar_labels: list[str] = []  # one per device, measured or not
        self.bar_heights: list[float] = []  # p50 per measured device, in chart order
        self.curves: list[str] = []  # device labels with a distribution curve
        self.marks: list[tuple[str, float, float]] = []  # (text, x, y): each number where its mark is

    def clear(self) -> None:
        self.bars.getPlotItem().clear()
        self.distribution.getPlotItem().clear()
        legend = self.distribution.getPlotItem().legend
        if legend is not None:
            legend.clear()
        self.bar_labels, self.bar_heights, self.curves, self.marks = [], [], [], []
        self.caption.setText("")

    def restyle(self) -> None:
        """A live theme switch: the charts take the new colours and are drawn again."""
        self.theme_dark = colors().dark
        for widget in (self.bars, self.distribution):
            _style(widget)
        legend = self.distribution.getPlotItem().legend
        if legend is not None:
            legend.setLabelTextColor(colors().text)
        self.show_results(list(self.shown))

    def changeEvent(self, event: QEvent) -> None:
        if event.type() == QEvent.Type.StyleChange and colors().dark != self.theme_dark:
            self.restyle()
        super().changeEvent(event)

    def showEvent(self, event: QShowEvent) -> None:
        # A switch while the charts were hidden (another view shown) is caught up on showing.
        if colors().dark != self.theme_dark:
            self.restyle()
        super().showEvent(event)

    def show_results(self, results: Sequence[DeviceResult]) -> None:
        self.clear()
        self.shown = list(results)
        if not results:
            return
        unit = next((r.latency_unit for r in results if r.latency_unit), "ms")
        self._draw_bars(results, unit)
        self._draw_distribution([r for r in results if r.ok and r.samples_ms], unit)
        missing = [f"{r.device}: {r.status}" for r in results if not r.ok]
        caption = LEGEND
        if missing:
            caption += " Not measured: " + ", ".join(missing) + " (why: in the table)."
        self.caption.setText(caption)

    def _draw_bars(self, results: Sequence[DeviceResult], unit: str) -> None:
        plot = self.bars.getPlotItem()
        plot.setTitle(f"Latency per device ({unit})", color=colors().text, size="10pt")
        ticks = []
        top = 0.0
        for x, r in enumerate(results):
            ticks.append((x, r.label))
            if r.ok and r.latency is not None:
                top = max(top, r.latency.p99_ms)
        for x, r in enumerate(results):
            if not (r.ok and r.latency is not None):
                text = pg.TextItem("not available" if r.status == "unavailable" else r.status, color=colors().muted)
                text.setAnchor((0.5, 1.0))
                text.setPos(x, max(top, 1.0) * 0.05)
                plot.addItem(text)
                continue
            lat = r.latency
            color = QColor(device_color(r))
            plot.addItem(pg.BarGraphItem(x=[x], height=[lat.p50_ms], width=BAR_WIDTH, brush=color, pen=color))
            whisker = pg.ErrorBarItem(
                x=np.array([x]),
                y=np.array([lat.p50_ms]),
                top=np.array([lat.p90_ms - lat.p50_ms]),
                bottom=np.array([0.0]),
                beam=0.2,
                pen=pg.mkPen(colors().text, width=1.5),
            )
            plot.addItem(whisker)
            plot.addItem(pg.ScatterPlotItem(x=[x], y=[lat.p99_ms], size=7, brush=pg.mkBrush(colors().text), pen=None))
            # Each number at its own mark: p50 inside the bar's top (above it when the bar is short, beside
            # the whisker), p99 above its dot.
            if lat.p50_ms >= 0.2 * max(top, 1.0):
                self._mark(plot, f"{lat.p50_ms:.1f}", x, lat.p50_ms, (0.5, -0.1), colors().accent_text)
            else:
                self._mark(plot, f"{lat.p50_ms:.1f}", x + 0.03, lat.p50_ms, (0.0, 1.0))
            self._mark(plot, f"p99 {lat.p99_ms:.1f}", x, lat.p99_ms, (0.5, 1.15))
            self.bar_heights.append(lat.p50_ms)
        plot.getAxis("bottom").setTicks([ticks])
        self.bar_labels = [label for _x, label in ticks]
        plot.setXRange(-0.6, len(results) - 0.4, padding=0)
        plot.setYRange(0, max(top, 1.0) * 1.25, padding=0)  # room for the p99 numbers above their dots
        plot.setLabel("left", unit, color=colors().muted)

    def _mark(
        self, plot: pg.PlotItem, text: str, x: float, y: float, anchor: tuple[float, float], color: str = ""
    ) -> None:
        label = pg.TextItem(text, color=color or colors().text, anchor=anchor)
        label.setPos(x, y)
        plot.addItem(label)
        self.marks.append((text, x, y))

    def _draw_distribution(self, results: Sequence[DeviceResult], unit: str) -> None:
        plot = self.distribution.getPlotItem()
        plot.setTitle(f"Latency distribution ({unit})", color=colors().text, size="10pt")
        if not results:
            return
        samples = [s for r in results for s in r.samples_ms]
        low = min(samples)
        high = max(percentile(list(r.samples_ms), 99.5) for r in results)
        if high <= low:
            high = low + 1.0
        edges = np.linspace(low, high, HISTOGRAM_BINS + 1)
        for r in results:
            counts, _ = np.histogram(np.clip(r.samples_ms, low, high), bins=edges)
            color = QColor(device_color(r))
            fill = QColor(color)
            fill.setAlpha(70)
            plot.addItem(
                pg.PlotDataItem(
                    edges,
                    counts,
                    stepMode="center",
                    fillLevel=0,
                    brush=fill,
                    pen=pg.mkPen(color, width=2),
                    name=f"{r.label} ({len(r.samples_ms)})",
                )
            )
            self.curves.append(r.label)
        plot.setLabel("left", "calls", color=colors().muted)

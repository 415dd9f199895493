"""Benchmark charts: latency per device (bars with p90 whiskers and p99 dots) and the latency
distribution per device (histograms).

pyqtgraph draws them: it is Qt-native (QGraphicsView, so the charts theme, resize and grab() like any
widget), fast with thousands of samples, and needs no extra Qt module (QtCharts would need the
PySide6-Addons wheels). It is imported by this module only, which the Benchmark view loads when the
charts are first needed, so the app's start-up does not pay for it.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QEvent
from PySide6.QtGui import QColor, QShowEvent
from PySide6.QtWidgets import QLabel, QVBoxLayout, QWidget

from engines.bench.data import DeviceResult
from engines.bench.stats import percentile
from ui.theme import colors

DEVICE_COLORS = {"NPU": "#8a5cd6", "GPU": "#1f9a5a", "CPU": "#3367d6"}
HISTOGRAM_BINS = 30


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


def _plot(title: str) -> pg.PlotWidget:
    widget = pg.PlotWidget()
    widget.setMinimumHeight(200)
    widget.setMinimumWidth(320)
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
        layout.setSpacing(8)
        self.bars = _plot("Latency per device")
        self.distribution = _plot("Latency distribution")
        self.distribution.getPlotItem().addLegend(offset=(-10, 10), labelTextColor=colors().text)
        self.caption = QLabel()
        self.caption.setProperty("muted", True)
        self.caption.setWordWrap(True)
        layout.addWidget(self.bars, 1)
        layout.addWidget(self.distribution, 1)
        layout.addWidget(self.caption)
        self.shown: list[DeviceResult] = []
        self.theme_dark = colors().dark
        self.bar_labels: list[str] = []  # one per device, measured or not
        self.bar_heights: list[float] = []  # p50 per measured device, in chart order
        self.curves: list[str] = []  # device labels with a distribution curve

    def clear(self) -> None:
        self.bars.getPlotItem().clear()
        self.distribution.getPlotItem().clear()
        legend = self.distribution.getPlotItem().legend
        if legend is not None:
            legend.clear()
        self.bar_labels, self.bar_heights, self.curves = [], [], []
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
        caption = "Bars: p50; whiskers: p90; dots: p99. Orange: the run fell back to another device."
        if missing:
            caption += " Not measured — " + "; ".join(missing) + " (reasons in the table)."
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
            plot.addItem(pg.BarGraphItem(x=[x], height=[lat.p50_ms], width=0.55, brush=color, pen=color))
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
            label = pg.TextItem(f"p50 {lat.p50_ms:.2f}", color=colors().text)
            label.setAnchor((0.5, 1.2))
            label.setPos(x, lat.p99_ms)
            plot.addItem(label)
            self.bar_heights.append(lat.p50_ms)
        plot.getAxis("bottom").setTicks([ticks])
        self.bar_labels = [label for _x, label in ticks]
        plot.setXRange(-0.6, len(results) - 0.4, padding=0)
        plot.setYRange(0, max(top, 1.0) * 1.2, padding=0)
        plot.setLabel("left", unit, color=colors().muted)

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

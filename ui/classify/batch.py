"""A batch's results: the table model (one row per photo, its own numbers), the summary line and the
CSV of the per-photo numbers."""

from __future__ import annotations

import os
import re
from collections import Counter
from collections.abc import Sequence
from functools import lru_cache
from typing import Any

from PySide6.QtCore import QAbstractTableModel, QCoreApplication, QModelIndex, QPersistentModelIndex, Qt
from PySide6.QtGui import QColor, QIcon

from engines import Classification, csv_writer, printable
from ui.classify.bars import TOP_K
from ui.classify.photos import display_name
from ui.common.icons import pixmap
from ui.common.placement_chip import chip_color, chip_icon_name, describe_placement
from ui.common.plain import plain_tooltip
from ui.common.theme import colors


def tr(text: str) -> str:
    return QCoreApplication.translate("Classify", text)


@lru_cache(maxsize=16)
def _chip_icon(kind: str, color: str) -> QIcon:
    # Cached by colour: table repaints during a batch must not re-render SVGs (a theme switch changes the key).
    return QIcon(pixmap(chip_icon_name(kind), 16, color))


def photo_ms(result: Classification) -> float:
    """This photo's own time: its decode + preprocessing plus its share of the inference."""
    return result.preprocess_ms + result.latency_ms


def failure_cause(result: Classification) -> str:
    """The cause of a failed photo without its name, so that failures group by cause."""
    text = result.error
    for name in {result.path, display_name(result.path)}:
        if name:
            text = text.replace(f"'{name}'", "").replace(name, "")
    first = re.split(r"(?<=[.:])\s", text.strip(), maxsplit=1)[0]
    return re.sub(r"\s+", " ", first).strip(" .:") or tr("unknown error")


def batch_summary(results: Sequence[Classification], seconds: float | None, total: int) -> str:
    """ "242 photos in 3.1 s (78 photos/s) · 240 classified · 2 failed (2× Could not decode)"."""
    failed = [r for r in results if r.error]
    done = len(results) - len(failed)
    parts = [tr("{n} photos").format(n=total) if total != 1 else tr("1 photo")]
    if seconds and seconds > 0:
        parts[0] += " " + tr("in {s:.1f} s ({rate:.0f} photos/s)").format(s=seconds, rate=len(results) / seconds)
    parts.append(tr("{n} classified").format(n=done))
    if failed:
        causes = Counter(failure_cause(r) for r in failed)
        listed = "; ".join(f"{n}× {cause}" for cause, n in causes.most_common(3))
        parts.append(tr("{n} failed ({causes})").format(n=len(failed), causes=listed))
    if len(results) < total:
        parts.append(tr("{n} not run").format(n=total - len(results)))
    return " · ".join(parts)


class ResultsModel(QAbstractTableModel):
    """One row per photo. "Ran on" is the placement chip's short form ("NPU→CPU · 94/94") with its icon;
    the whole line and the reason are the tooltip. Every string is plain: a file name or a label is
    shown as it is (display text is never markup; tooltips are escaped inside a paragraph of ours)."""

    HEADERS = ("File", "Top-1", "Probability", "Time (ms)", "Ran on")
    RAN_ON = 4

    def __init__(self) -> None:
        super().__init__()
        self.results: list[Classification] = []
        self.asked = ""  # what the user asked for in this run (DeviceChoice.describe())

    def rowCount(self, parent: QModelIndex | QPersistentModelIndex = QModelIndex()) -> int:  # noqa: B008
        return 0 if parent.isValid() else len(self.results)

    def columnCount(self, parent: QModelIndex | QPersistentModelIndex = QModelIndex()) -> int:  # noqa: B008
        return 0 if parent.isValid() else len(self.HEADERS)

    def headerData(self, section: int, orientation: Qt.Orientation, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if role == Qt.ItemDataRole.DisplayRole and orientation == Qt.Orientation.Horizontal:
            return tr(self.HEADERS[section])
        if role == Qt.ItemDataRole.ToolTipRole and orientation == Qt.Orientation.Horizontal and section == 3:
            return tr(
                "Each photo's decode and preprocessing plus its share of the inference: photos run in batches, "
                "and a batch's inference time is shared equally by its photos"
            )
        return None

    def data(self, index: QModelIndex | QPersistentModelIndex, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if not index.isValid():
            return None
        result = self.results[index.row()]
        column = index.column()
        if role == Qt.ItemDataRole.DisplayRole:  # a file name or label may carry controls or a bidi override
            return printable(self.cell(result, column), newlines=False)
        if role == Qt.ItemDataRole.ToolTipRole:
            return plain_tooltip(self.tooltip(result, column))
        if role == Qt.ItemDataRole.DecorationRole and column == self.RAN_ON and result.placement and not result.error:
            chip = describe_placement(result.placement, self.asked or None)
            return _chip_icon(chip.kind, chip_color(chip.kind))
        if role == Qt.ItemDataRole.TextAlignmentRole and column in (2, 3):
            return int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        if role == Qt.ItemDataRole.ForegroundRole and result.error:
            return QColor(colors().error)
        return None

    def cell(self, result: Classification, column: int) -> str:
        """One cell's text, computed alone: Qt asks for cells one by one on every repaint."""
        if result.error:
            return (display_name(result.path), "—", "", "", result.error)[column]
        if column == 3:
            return f"{photo_ms(result):.1f}"
        if column == self.RAN_ON:
            return self.ran_on(result)
        top = result.top[0] if result.top else None
        if column == 1:
            return top.label if top else "—"
        if column == 2:
            return f"{top.probability:.1%}" if top else ""
        return display_name(result.path)

    def ran_on(self, result: Classification) -> str:
        if result.placement is None:
            return ""
        chip = describe_placement(result.placement, self.asked or None)
        return chip.short or chip.text

    def tooltip(self, result: Classification, column: int) -> str:
        if result.error:
            return result.error
        if column == 3:
            return tr(
                "Decode + preprocessing {pre:.1f} ms · inference {inf:.1f} ms (its share of the batch it ran in)"
            ).format(pre=result.preprocess_ms, inf=result.latency_ms)
        if column == self.RAN_ON and result.placement is not None:
            chip = describe_placement(result.placement, self.asked or None)
            return f"{chip.text}\n{chip.details}"
        if column == 1 and result.top:
            return "\n".join(f"{s.label} {s.probability:.1%}" for s in result.top)
        return result.path

    def extend(self, results: Sequence[Classification]) -> None:
        if not results:
            return
        row = len(self.results)
        self.beginInsertRows(QModelIndex(), row, row + len(results) - 1)
        self.results.extend(results)
        self.endInsertRows()

    def clear(self) -> None:
        self.beginResetModel()
        self.results = []
        self.endResetModel()


def write_results_csv(results: Sequence[Classification], path: str | os.PathLike[str]) -> None:
    """Every photo with its own numbers: top-k, inference, decode + preprocessing, total, placement
    (engines/csvfile.py: labels and file names are never run as formulas)."""
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv_writer(handle)
        header = ["path"]
        for rank in range(1, TOP_K + 1):
            header += [f"label_{rank}", f"probability_{rank}"]
        header += ["latency_ms", "preprocess_ms", "photo_ms", "placement", "error"]
        writer.writerow(header)
        for result in results:
            row: list[object] = [result.path]
            for rank in range(TOP_K):
                if rank < len(result.top):
                    row += [result.top[rank].label, f"{result.top[rank].probability:.6f}"]
                else:
                    row += ["", ""]
            placement = result.placement.badge() if result.placement else ""
            row += [
                f"{result.latency_ms:.3f}",
                f"{result.preprocess_ms:.3f}",
                f"{photo_ms(result):.3f}",
                placement,
                result.error,
            ]
            writer.writerow(row)

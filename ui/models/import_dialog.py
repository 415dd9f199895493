"""Models: the dialog that imports an `.onnx` image classifier: its labels file, input size, layout,
normalisation, output kind, library name and licence."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QCoreApplication, Qt
from PySide6.QtWidgets import (
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QFileDialog,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPushButton,
    QSpinBox,
    QWidget,
)

from ui.common.icons import icon
from ui.common.plain import plain_text
from ui.common.widgets import muted_label


def tr(text: str) -> str:
    return QCoreApplication.translate("Models", text)


# The model file, the classifier's options (labels, input size, layout, mean, std, output kind) and the
# import's details (name, licence), as the models host takes them.
ClassifierChoice = tuple[str, dict[str, object], dict[str, object]]


def _numbers(text: str) -> tuple[float, float, float] | None:
    parts = [p for p in text.replace(",", " ").split() if p]
    try:
        values = tuple(float(p) for p in parts)
    except ValueError:
        return None
    return (values[0], values[1], values[2]) if len(values) == 3 else None


class ClassifierImportDialog(QDialog):
    """Labels and preprocessing for an `.onnx` classifier; `fields()` gives what the host needs."""

    def __init__(self, model_path: str, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle(tr("Import an image classifier"))
        self.model_path = model_path
        form = QFormLayout(self)
        form.addRow(muted_label(plain_text(f"Model: {Path(model_path).name}", one_line=True)))
        self.labels = QLineEdit()
        self.labels.setPlaceholderText(tr("one class name per line, in output order"))
        browse = QPushButton(icon("open"), tr("Browse…"))
        browse.clicked.connect(self._browse_labels)
        row = QHBoxLayout()
        row.addWidget(self.labels, 1)
        row.addWidget(browse)
        form.addRow(tr("Labels file"), row)
        self.size_box = QSpinBox()
        self.size_box.setRange(0, 4096)
        self.size_box.setSpecialValueText(tr("from the model"))
        form.addRow(tr("Input size (px)"), self.size_box)
        self.layout_box = QComboBox()
        self.layout_box.addItems(["from the model", "NCHW", "NHWC"])
        form.addRow(tr("Layout"), self.layout_box)
        self.mean = QLineEdit("123.675, 116.28, 103.53")
        self.std = QLineEdit("58.395, 57.12, 57.375")
        form.addRow(tr("Mean (0-255)"), self.mean)
        form.addRow(tr("Std (0-255)"), self.std)
        self.output_kind = QComboBox()
        self.output_kind.addItems(["detect", "logits", "probabilities"])
        form.addRow(tr("Output"), self.output_kind)
        self.name = QLineEdit(Path(model_path).stem)
        form.addRow(tr("Name in the library"), self.name)
        self.licence = QLineEdit()
        self.licence.setPlaceholderText(tr("e.g. Apache-2.0 (optional)"))
        form.addRow(tr("Licence"), self.licence)
        self.problem = QLabel()
        self.problem.setTextFormat(Qt.TextFormat.PlainText)
        self.problem.setWordWrap(True)
        form.addRow(self.problem)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel)
        buttons.accepted.connect(self._accept)
        buttons.rejected.connect(self.reject)
        form.addRow(buttons)

    def _browse_labels(self) -> None:
        path, _ = QFileDialog.getOpenFileName(
            self, tr("Labels file"), str(Path(self.model_path).parent), "Text files (*.txt);;All files (*)"
        )
        if path:
            self.labels.setText(path)

    def problems(self) -> str:
        if not self.labels.text().strip():
            return "Choose the labels file (one class name per line)."
        if _numbers(self.mean.text()) is None or _numbers(self.std.text()) is None:
            return "Mean and std need three numbers each, e.g. 123.675, 116.28, 103.53."
        return ""

    def _accept(self) -> None:
        problem = self.problems()
        self.problem.setText(problem)
        if not problem:
            self.accept()

    def fields(self) -> tuple[dict[str, object], dict[str, object]]:
        """(classifier options, import details) as plain values."""
        size = self.size_box.value()
        layout = self.layout_box.currentText()
        kind = self.output_kind.currentText()
        options: dict[str, object] = {
            "labels": Path(self.labels.text().strip()),
            "input_size": (size, size) if size else None,
            "layout": layout if layout in ("NCHW", "NHWC") else None,
            "mean": _numbers(self.mean.text()),
            "std": _numbers(self.std.text()),
            "output_kind": kind if kind in ("logits", "probabilities") else None,
        }
        details: dict[str, object] = {"name": self.name.text().strip() or None, "licence": self.licence.text().strip()}
        return options, details


def choose_classifier(parent: QWidget, start: str) -> ClassifierChoice | None:
    """Ask for an .onnx file, then for what the manifest needs to know about it (None: cancelled)."""
    path, _ = QFileDialog.getOpenFileName(parent, tr("Image classifier"), start, "ONNX models (*.onnx)")
    if not path:
        return None
    dialog = ClassifierImportDialog(path, parent)
    if dialog.exec() != QDialog.DialogCode.Accepted:
        return None
    options, details = dialog.fields()
    return path, options, details

"""What the Models view's library tab knows without a widget: the library as the models host reads it, and
why Use is off for a model."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol

from PySide6.QtCore import QCoreApplication

from engines import CatalogEntry, FitHint, ModelEntry


def tr(text: str) -> str:
    return QCoreApplication.translate("Models", text)


KIND_CLASSIFIER = "image-classifier"
VIEW_OF_KIND = {KIND_CLASSIFIER: "Classify", "genai-llm": "Chat"}
USE_TIP = "Make the selected model the one its view uses (remembered)"


class Snapshot(Protocol):
    """The library as the models host reads it (app.hosts.models.LibrarySnapshot)."""

    @property
    def entries(self) -> Sequence[ModelEntry]: ...
    @property
    def fits(self) -> Mapping[str, FitHint]: ...
    @property
    def catalog(self) -> Sequence[CatalogEntry]: ...
    @property
    def partial_bytes(self) -> Mapping[str, int]: ...
    @property
    def catalog_error(self) -> str: ...
    @property
    def user_dir(self) -> str: ...
    @property
    def bundled_dir(self) -> str: ...


def use_blocker(entry: ModelEntry | None, in_use: set[str]) -> str:
    """Why the Use button is off for `entry` ("" when it can be used)."""
    if entry is None:
        return tr("Select a model to use it.")
    view = VIEW_OF_KIND.get(entry.kind, "")
    if not view:
        return tr("No view uses this kind of model.")
    if not entry.usable:
        return tr("It has a problem: see its details.")
    if entry.name in in_use:
        return f"{view} uses this model already."
    return ""

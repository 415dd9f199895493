"""The Models view's "On this machine" tab on its host, over a home laid out as Foundry Local and the
Hugging Face cache leave it (tests/fixtures/machine_home.py): the real scan, the real add by reference."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from PySide6.QtCore import Qt

from app.hosts.models import LibraryPlaces, ModelsHost, wire_models_view
from tests.fixtures.machine_home import MachineHome
from ui.models.found import FOUND_COLUMNS
from ui.models.view import ModelsView

REPO = Path(__file__).resolve().parents[2]
TIMEOUT = 120_000


@pytest.fixture
def setup(qtbot: Any, machine: MachineHome, tmp_path: Path) -> Iterator[tuple[ModelsView, ModelsHost, dict[str, Any]]]:
    (tmp_path / "bundled").mkdir()
    host = ModelsHost(LibraryPlaces(tmp_path / "bundled", tmp_path / "user", REPO / "assets" / "catalog.json"))
    view = ModelsView(False)
    qtbot.addWidget(view)
    state: dict[str, Any] = {"folders": [], "saved": []}
    wire_models_view(
        view, host, downloads_allowed=lambda: False, on_allow_downloads=lambda _: None,
        model_folders=lambda: list(state["folders"]), on_folders_changed=lambda f: state["saved"].append(f),
    )  # fmt: skip
    yield view, host, state
    assert host.shutdown(), "the models host did not stop"


def _rows(view: ModelsView) -> dict[str, int]:
    table = view.found_panel.table
    return {table.item(r, 0).data(Qt.ItemDataRole.UserRole): r for r in range(table.rowCount())}


def _scan_by_opening_the_tab(qtbot: Any, view: ModelsView, host: ModelsHost) -> None:
    with qtbot.waitSignal(host.scanned, timeout=TIMEOUT):
        view.tabs.setCurrentWidget(view.found_panel)  # the first visit looks
    assert not view.busy


def test_the_tab_lists_what_is_here_and_whether_it_runs(qtbot: Any, setup: Any, machine: MachineHome) -> None:
    view, host, _ = setup
    _scan_by_opening_the_tab(qtbot, view, host)
    rows = _rows(view)
    assert set(rows) == {str(f) for f in machine.real}
    assert view.tabs.tabText(1) == f"On this machine ({len(machine.real)})"
    table = view.found_panel.table
    qnn = rows[str(machine.foundry_qnn)]
    cells = [table.item(qnn, c).text() for c in range(table.columnCount())]
    assert cells[:3] == ["smollm2-135m-instruct-qnn-npu:1", "Needs the Qualcomm NPU", "QNN NPU"]
    assert cells[3:5] == ["Foundry Local", "Chat"]
    assert table.item(rows[str(machine.foundry_cpu)], 1).text() == "Runs here on the CPU"
    assert table.item(rows[str(machine.hub_vision)], 1).text() == "Runs here"  # a classifier: placed automatically
    table.selectRow(qnn)
    assert "needs the Qualcomm NPU: not on this machine" in view.found_panel.details.text()
    assert view.found_panel.add_button.isEnabled()  # a QNN folder can be added; it only does not run here
    assert "2 folders could not be read" in view.found_panel.summary.text()
    table.clearSelection()
    details = view.found_panel.details
    assert "Could not be read: models--someone--broken: genai_config.json: it is not valid JSON" in details.text()
    assert str(machine.broken) in details.toolTip()  # the whole path, where it does not widen the view
    note = view.npu_note.text()
    assert "smollm2-135m-instruct-qnn-npu:1 (QNN NPU) needs the Qualcomm NPU: not on this machine" in note


def test_add_to_library_by_reference_from_the_tab(
    qtbot: Any, setup: Any, machine: MachineHome, monkeypatch: pytest.MonkeyPatch
) -> None:
    view, host, _ = setup
    _scan_by_opening_the_tab(qtbot, view, host)
    view.found_panel.table.selectRow(_rows(view)[str(machine.hub_chat)])
    asked: list[str] = []
    monkeypatch.setattr(view.found_panel, "_ask_name", lambda suggested: asked.append(suggested) or "hub-chat")
    with qtbot.waitSignals([host.imported, host.listed, host.scanned], order="strict", timeout=TIMEOUT):
        view.found_panel.add_button.click()
    assert asked == ["SmolLM2-135M-Instruct-ONNX-cpu"]
    assert any(m.startswith("Added hub-chat") and "by reference" in m for m in view.banners.messages())
    library = {view.table.item(r, 0).text(): r for r in range(view.table.rowCount())}
    assert view.table.item(library["hub-chat"], 2).text() == "By reference"
    row = _rows(view)[str(machine.hub_chat)]
    assert view.found_panel.table.item(row, 1).text() == "In library (hub-chat)"
    view.found_panel.table.selectRow(row)
    assert not view.found_panel.add_button.isEnabled()


def test_a_hostile_name_is_shown_as_plain_text(qtbot: Any, setup: Any, machine: MachineHome) -> None:
    view, host, _ = setup
    hostile = '<b>bold</b><img src="x"> \x1b]0;title\x07'
    path = machine.foundry_cpu / "inference_model.json"
    path.unlink()
    path.write_text(json.dumps({"Name": hostile}))
    _scan_by_opening_the_tab(qtbot, view, host)
    row = _rows(view)[str(machine.foundry_cpu)]
    name = view.found_panel.table.item(row, 0).text()
    assert name.startswith('<b>bold</b><img src="x">') and "\x1b" not in name and "\\x1b" in name
    view.found_panel.table.selectRow(row)
    details = view.found_panel.details
    assert details.textFormat() == Qt.TextFormat.PlainText and "<b>bold</b>" in details.text().replace("\u200b", "")


def test_your_folders_are_kept_and_looked_in(
    qtbot: Any, setup: Any, tmp_path: Path, tiny_llm: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.fixtures.machine_home import _copy_model

    view, host, state = setup
    mine = _copy_model(tiny_llm, tmp_path / "mine" / "chat")
    _scan_by_opening_the_tab(qtbot, view, host)
    monkeypatch.setattr(view.found_panel, "_choose_folder", lambda: str(tmp_path / "mine"))
    state["folders"] = [str(tmp_path / "mine")]
    with qtbot.waitSignal(host.scanned, timeout=TIMEOUT):
        view.found_panel.add_folder_button.click()
    assert state["saved"] == [[str(tmp_path / "mine")]]
    assert str(mine) in _rows(view) and view.found_panel.folders_label.text() == "mine"
    assert _found_in(view, str(mine)) == "Your folder"
    monkeypatch.setattr(view.found_panel, "_choose_folder_to_remove", lambda folders: folders[0])
    with qtbot.waitSignal(host.scanned, timeout=TIMEOUT):
        view.found_panel.remove_folder_button.click()
    assert state["saved"][-1] == [] and str(mine) not in _rows(view)
    assert not view.found_panel.remove_folder_button.isEnabled()


def _found_in(view: ModelsView, folder: str) -> str:
    return view.found_panel.table.item(_rows(view)[folder], FOUND_COLUMNS.index("From")).text()

"""The Settings view's diagnostics export with bait everywhere (tests/fixtures/bait.py): the dialog lists what
the zip holds before anything is written, and none of the bait is in the zip."""

from __future__ import annotations

import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from app import diagnostics
from tests.fixtures.bait import leaks, plant
from tests.reliability.conftest import Recorder

TIMEOUT = 180_000


@pytest.mark.allow_warnings("settings|Settings")
def test_the_apps_diagnostics_zip_holds_no_bait(
    make_studio: Callable[..., Any], qtbot: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    reliability: Recorder,
) -> None:
    baits = plant(tmp_path)
    for name, value in baits.env.items():
        monkeypatch.setenv(name, value)
    empty = tmp_path / "no-bundled-models"
    empty.mkdir()
    monkeypatch.setenv("NPU_STUDIO_BUNDLED_MODELS", str(empty))
    studio = make_studio()
    studio.show()
    card = studio.settings_view.diagnostics
    studio.window.show_view("settings")
    shown: list[list[str]] = []
    monkeypatch.setattr(card, "_confirm_export", lambda lines: shown.append(lines) is None)
    target = baits.home / "Desktop" / "bug-report.zip"
    monkeypatch.setattr(card, "_choose_zip", lambda: str(target))
    with qtbot.waitSignal(studio.settings_host.diagnostics_exported, timeout=TIMEOUT):
        card.export_button.click()
    found = leaks(baits, [target])
    with zipfile.ZipFile(target) as bundle:
        names = bundle.namelist()
    reliability.record(
        "Diagnostics",
        "the app's Export diagnostics with the same baits (settings, paths, environment, title, logs)",
        "the dialog lists the contents first; no bait in the zip",
        f"dialog listed {len(shown[0]) if shown else 0} lines; {len(found)} baits in {len(names)} zip entries"
        + (f" ({'; '.join(found[:3])})" if found else ""),
    )
    assert shown == [diagnostics.contents()]
    assert found == [] and "settings.json" in names and "report.txt" in names

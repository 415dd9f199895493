"""The self-test's look at the Models view's "On this machine" tab (and the layout passes' too).

A folder laid out as Foundry Local keeps its cache (`<Publisher>/<model>-<version>/v<version>/` with
`inference_model.json`) holds two copies of the demo chat model: one as it is, one whose genai_config.json
asks for the Qualcomm NPU. It is scanned through the Models host as the tab's "Look again" scans (as one of
the user's folders, Foundry's CLI not asked), so the tab has real rows when it is captured and its layout
checked. The weights are hard links, copied only where links cannot be made; the scan is the app's own:
read-only, bounded in depth, entries and time (10 s), the tools' default places included.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Generator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from engines import MANIFEST_NAME

if TYPE_CHECKING:
    from app.gui import Studio

QNN_PROVIDER = [{"qnn": {"backend_path": "QnnHtp.dll", "htp_performance_mode": "burst"}}]
COPIES: tuple[tuple[str, list[dict[str, Any]] | None], ...] = (
    ("smollm2-135m-instruct-generic-cpu", None),
    ("smollm2-135m-instruct-qnn-npu", QNN_PROVIDER),
)
SCAN_TIMEOUT_S = 60.0


def build_found_folder(root: Path, chat_model: Path) -> Path:
    """`root` holding the two copies of `chat_model` (made once; an existing copy is kept)."""
    for name, providers in COPIES:
        folder = root / "Microsoft" / f"{name}-1" / "v1"
        if (folder / "inference_model.json").is_file():
            continue
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)
        for file in sorted(chat_model.iterdir()):
            if not file.is_file() or file.name == MANIFEST_NAME:
                continue
            if file.suffix in (".json", ".jinja", ".txt"):
                shutil.copyfile(file, folder / file.name)  # small, and edited below: never a link to the demo's
                continue
            try:
                os.link(file, folder / file.name)
            except OSError:
                shutil.copyfile(file, folder / file.name)
        if providers:
            path = folder / "genai_config.json"
            config = json.loads(path.read_text(encoding="utf-8"))
            config["model"]["decoder"].setdefault("session_options", {})["provider_options"] = providers
            path.write_text(json.dumps(config, indent=4), encoding="utf-8")
        (folder / "inference_model.json").write_text(json.dumps({"Name": f"{name}:1"}), encoding="utf-8")
    return root


def scan_with(studio: Studio, folder: Path) -> Generator[None, None, Any]:
    """Scan through the Models host with `folder` first; the report once the view shows it."""
    panel = studio.models_view.found_panel
    before = panel.report
    studio.models.scan([str(folder)], ask_foundry=False)
    deadline = time.monotonic() + SCAN_TIMEOUT_S
    while panel.report is before:
        if time.monotonic() > deadline:
            raise TimeoutError(f"the scan of {folder} showed nothing within {SCAN_TIMEOUT_S:.0f} s")
        yield
    return panel.report


def found_in(report: Any, folder: Path) -> list[Any]:
    """The models of `report` that sit in `folder`."""
    return [m for m in report.models if Path(m.folder).is_relative_to(folder)]

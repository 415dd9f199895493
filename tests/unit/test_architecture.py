"""The layer rules hold: engines free of Qt, ui free of the runtimes (import-linter contracts)."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_import_linter_contracts_are_kept() -> None:
    exe = shutil.which("lint-imports", path=str(Path(sys.executable).parent))
    assert exe, "import-linter is a dev dependency"
    out = subprocess.run([exe, "--no-cache"], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    kept = re.search(r"Contracts: (\d+) kept, 0 broken", out.stdout)
    assert kept and int(kept.group(1)) >= 9, out.stdout  # the layers, Qt, runtimes, one per sub-package


def test_engines_source_never_mentions_qt() -> None:
    pattern = re.compile(r"^\s*(from|import)\s+(PySide6|shiboken6|ui|app)\b", re.MULTILINE)
    offenders = [p.name for p in (REPO / "engines").rglob("*.py") if pattern.search(p.read_text(encoding="utf-8"))]
    assert offenders == []


def test_ui_source_never_imports_a_runtime() -> None:
    pattern = re.compile(r"^\s*(from|import)\s+onnxruntime", re.MULTILINE)
    offenders = [p.name for p in (REPO / "ui").rglob("*.py") if pattern.search(p.read_text(encoding="utf-8"))]
    assert offenders == []


def test_importing_the_public_api_loads_no_runtime() -> None:
    probe = (
        "import sys, engines, engines.types\n"
        "assert callable(engines.__getattr__('open_classifier').__call__)\n"
        "heavy = [m for m in ('onnxruntime', 'onnxruntime_genai', 'numpy', 'onnx', 'PIL') if m in sys.modules]\n"
        "print(','.join(heavy))\n"
    )
    out = subprocess.run([sys.executable, "-c", probe], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "", f"`import engines` (and naming open_classifier) loaded {out.stdout.strip()}"


def test_the_public_api_lists_what_it_offers() -> None:
    import engines

    assert {"open_classifier", "open_chat", "discover", "DeviceChoice", "Placement", "StudioError"} <= set(
        engines.__all__
    )
    for name in engines.__all__:
        assert getattr(engines, name) is not None, name

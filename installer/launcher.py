"""Entry script of the installed app.

Frozen by PyInstaller (the shipping MSIs) it simply runs `app.__main__.main`. In the wheels payload that
the Linux check build stages (no Windows Python runtime can be fetched there), it sits in `_internal\\`
next to `site-packages\\` and the app's packages, and `npu-studio.cmd` starts it with an installed
CPython of the version the wheels were resolved for.
"""

from __future__ import annotations

import json
import os
import site
import sys
from pathlib import Path


def _prepare_wheels_payload() -> str | None:
    """Put the payload's packages first on sys.path; return an error text when this Python cannot run it."""
    here = Path(__file__).resolve().parent
    info_path = here / "payload.json"
    if not info_path.is_file():
        return None  # a source checkout: nothing to set up
    info = json.loads(info_path.read_text(encoding="utf-8"))
    wanted = str(info.get("python_version", ""))
    running = f"{sys.version_info.major}.{sys.version_info.minor}"
    if wanted and wanted != running:
        return (
            f"NPU Studio's packages were built for Python {wanted} ({info.get('target')}), "
            f"but Python {running} is running. Install Python {wanted} for this machine's architecture, "
            "or install the MSI built on Windows, which needs no Python."
        )
    site_packages = here / "site-packages"
    sys.path[:0] = [str(here), str(site_packages)]
    site.addsitedir(str(site_packages))  # honours .pth files
    if hasattr(os, "add_dll_directory"):
        for dll_dir in (site_packages / "onnxruntime" / "capi", site_packages / "PySide6"):
            if dll_dir.is_dir():
                os.add_dll_directory(str(dll_dir))
    return None


def main() -> int:
    if not getattr(sys, "frozen", False):
        problem = _prepare_wheels_payload()
        if problem:
            print(f"npu-studio: error: {problem}", file=sys.stderr)
            return 2
    from app.__main__ import main as app_main

    return app_main()


if __name__ == "__main__":
    sys.exit(main())

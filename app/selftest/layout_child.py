"""`python -m app.selftest.layout_child OUT`: the scaled layout pass in its own process (the self-test starts
it with QT_SCALE_FACTOR=1.5, which Qt reads once per process); writes OUT/layout-scaled.json."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Generator, Sequence
from pathlib import Path
from typing import Any

from app.selftest.layout_shots import SCALED_SIZES, layout_pass


def main(argv: Sequence[str] | None = None) -> int:
    """Build the app (no preloading), wait for discovery, run the scaled pass, write its report."""
    from PySide6.QtCore import QTimer

    from app.gui import Studio
    from app.launch import create_application

    args = list(sys.argv[1:] if argv is None else argv)
    out = Path(args[0]) if args else Path("layout-shots")
    app = create_application()
    studio = Studio(app, preload=False)
    studio.show()
    result: dict[str, Any] = {}

    def run() -> Generator[None, None, None]:
        deadline = time.monotonic() + 60
        while not studio.devices_view.devices and time.monotonic() < deadline:
            yield  # the Devices view shows what discovery found, as a user sees it
        if studio.chat_folder().is_dir():  # the "On this machine" tab with rows, as the self-test fills it
            from app import paths
            from app.selftest.found import build_found_folder, scan_with

            yield from scan_with(studio, build_found_folder(paths.data_dir() / "self-test-found", studio.chat_folder()))
        report = yield from layout_pass(studio, out, SCALED_SIZES)
        result.update(report)

    script = run()
    timer = QTimer()
    timer.setInterval(50)

    def tick() -> None:
        try:
            next(script)
        except StopIteration:
            timer.stop()
            app.quit()

    timer.timeout.connect(tick)
    timer.start()
    app.exec()
    studio.shutdown()
    (out / "layout-scaled.json").write_text(json.dumps(result, indent=2), encoding="utf-8")
    return 0 if result and not result.get("problems") else 1


if __name__ == "__main__":
    raise SystemExit(main())

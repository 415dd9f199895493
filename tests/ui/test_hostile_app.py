"""The hostile-text fuzz: hostile strings (HTML with an <img> pointing at a bait, Markdown images and
links, chat control tokens, bidi overrides, a 10,000-character line, NUL, lone surrogates, terminal
escapes) in every field the app shows: conversation titles and messages, classifier labels, model
names and cards, file names, error texts, device names and drivers, benchmark models and reasons,
paths. Every view is opened and every tooltip shown, in the real app in a child process
(tests/ui/hostile_app.py), while this process watches the bait:

- no resource is read from disk: the bait is a FIFO, and a reader opening it is seen here (a thread
  keeps trying to open its writing end, which succeeds only while someone opens it to read);
- no abort and no freeze: the child must exit 0 within the deadline;
- the text is shown literally: the child reports every label, cell, item and tooltip where a hostile
  string's markup was rendered, or a raw control character reached the screen."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DEADLINE_S = 240
SEEDS = (1, 7)


class BaitWatch:
    """Sees whether anything opens the FIFO `path` for reading, and lets such a reader go (EOF)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.opened = 0
        self.times: list[float] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)

    def __enter__(self) -> BaitWatch:
        os.mkfifo(self.path)
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(5)

    def _watch(self) -> None:
        while not self._stop.wait(0.01):
            try:
                fd = os.open(self.path, os.O_WRONLY | os.O_NONBLOCK)
            except OSError:
                continue  # ENXIO: nobody has it open to read
            self.opened += 1
            self.times.append(time.time())
            os.close(fd)  # the reader gets an empty file and goes on


@pytest.mark.parametrize("seed", SEEDS)
def test_hostile_text_in_every_field_of_every_view(tmp_path: Path, seed: int) -> None:
    cwd = tmp_path / "cwd"  # relative <img src="fifo-bait"> resolves here
    cwd.mkdir()
    home = tmp_path / 'home ZQX1<img src="fifo-bait">ZQX1 \u202eevil'  # every path the app shows
    home.mkdir()
    report = tmp_path / "report.json"
    env = dict(os.environ, QT_QPA_PLATFORM="offscreen", NPU_STUDIO_HOME=str(home), NPU_STUDIO_NO_PRELOAD="1",
               PYTHONPATH=str(REPO))  # fmt: skip
    with BaitWatch(cwd / "fifo-bait") as bait:
        try:
            done = subprocess.run(
                [sys.executable, "-m", "tests.ui.hostile_app", str(report), str(seed), str(bait.path)],
                cwd=cwd, env=env, capture_output=True, text=True, timeout=DEADLINE_S,
            )  # fmt: skip
        except subprocess.TimeoutExpired as exc:
            pytest.fail(f"the app froze: no exit within {DEADLINE_S} s ({(exc.stdout or '')[-400:]!r})")
    assert done.returncode == 0, f"the app ended with {done.returncode}: {done.stderr[-2000:]}"
    data = json.loads(report.read_text(encoding="utf-8"))
    assert "error" not in data, data.get("error")
    assert bait.opened == 0 and data["python_opened_bait"] == [], (
        f"a hostile string made the app read the bait {bait.opened} times (set HOSTILE_DEBUG=1 to see when)"
    )
    assert data["crashes"] == []
    assert data["problems"] == [], "\n".join(data["problems"][:40])
    # every kind of hostile string was seeded, reached the screen and was checked somewhere
    assert all(count > 0 for count in data["seen"].values()), data["seen"]
    assert data["checked"] > 500

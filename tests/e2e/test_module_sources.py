"""PySide6's per-import source check keeps no module's source in memory (app/window/module_sources.py),
and still gives PySide6 the answer its own check gives."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import types
from pathlib import Path

import pytest

from app.window.module_sources import mentions_pyside

REPO = Path(__file__).resolve().parents[2]

WINDOW_PROCESS = textwrap.dedent(
    """
    import json, linecache, sys
    from pathlib import Path

    import app.gui  # the window's composition root: PySide6, every view and every host

    roots = [Path(sys.argv[1], package) for package in ("app", "ui", "engines")]
    feature = sys.modules["shibokensupport.feature"]
    held = sorted(name for name in linecache.cache if any(Path(name).resolve().is_relative_to(r) for r in roots))
    answers = {}
    for name, selection in feature.pyside_feature_dict.items():
        file = getattr(sys.modules.get(name), "__file__", None) or ""
        if file.endswith(".py") and any(Path(file).resolve().is_relative_to(r) for r in roots):
            answers[name] = [selection, "PySide6" in Path(file).read_text(encoding="utf-8")]
    print(json.dumps({"held": held, "answers": answers}))
    """
)


def test_the_window_process_holds_no_module_source_and_pyside_gets_its_answers() -> None:
    env = dict(os.environ, QT_QPA_PLATFORM="offscreen")
    done = subprocess.run(
        [sys.executable, "-c", WINDOW_PROCESS, str(REPO)], cwd=REPO, env=env, capture_output=True, text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout.splitlines()[-1])
    assert found["held"] == []  # without the replacement: every app, ui and engines module (~270 files)
    answers = found["answers"]
    # PySide6 asked about the app's own packages, some of which use it and some not, and got its own answer
    # for each: selection 0 for a module whose source mentions PySide6, -1 ("ignore") for the others.
    assert sum(uses for _, uses in answers.values()) >= 5 and sum(not uses for _, uses in answers.values()) >= 5
    assert {name: selection for name, (selection, _) in answers.items()} == {
        name: 0 if uses else -1 for name, (_, uses) in answers.items()
    }


def test_mentions_pyside_answers_as_inspect_would(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "qt_user.py").write_text("from PySide6.QtCore import QObject\n", encoding="utf-8")
    (tmp_path / "plain.py").write_text("VALUE = 1\n", encoding="utf-8")
    (tmp_path / "gone.py").write_text("import PySide6\n", encoding="utf-8")
    (tmp_path / "space").mkdir()  # a namespace package: no source at all
    monkeypatch.syspath_prepend(str(tmp_path))
    import importlib

    modules = {name: importlib.import_module(name) for name in ("qt_user", "plain", "gone", "space")}
    try:
        (tmp_path / "gone.py").unlink()  # its file removed after the import: no source to read
        assert mentions_pyside(modules["qt_user"]) is True
        assert mentions_pyside(modules["plain"]) is False
        assert mentions_pyside(modules["gone"]) is False
        assert mentions_pyside(modules["space"]) is False
        assert mentions_pyside(sys) is False  # built in
        assert mentions_pyside(types.ModuleType("made")) is False  # no spec
    finally:
        for name in modules:
            sys.modules.pop(name, None)

"""A photo folder with bad entries (a loop of links, a link to nothing, a pipe, a sub-folder, a text file)
or one that cannot be read: through the real CLI and the Classify view, which walk it the same way
(engines/photo_folders.py). Every bad entry is reported and skipped, the photos are classified, and a
folder the user cannot read is one clear line."""

from __future__ import annotations

import errno
import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from app.cli import run
from engines import photo_folders
from tests.reliability.conftest import Recorder

CATEGORY = "Photo folders"


@pytest.fixture
def mixed(tmp_path: Path, samples: Path) -> Path:
    """The audit's folder: a loop of links, a dangling link, a photo, a sub-folder, plus a text file and a pipe."""
    folder = tmp_path / "photos"
    (folder / "sub").mkdir(parents=True)
    shutil.copy2(samples / "chelsea.png", folder / "chelsea.png")
    os.symlink("loop2", folder / "loop1")
    os.symlink("loop1", folder / "loop2")
    os.symlink("nowhere.png", folder / "dangling.png")
    (folder / "notes.txt").write_text("not a photo")
    os.mkfifo(folder / "camera.png")
    return folder


def _denied_for(folder: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Listing `folder` fails as it does for a folder without read permission (the tests run as any user,
    root included, so the error is raised at the one call that lists a folder)."""
    real = os.scandir

    def scandir(path: Any) -> Any:
        if os.fspath(path) == str(folder):
            raise PermissionError(errno.EACCES, "Permission denied", str(folder))
        return real(path)

    monkeypatch.setattr(photo_folders.os, "scandir", scandir)


def test_a_folder_with_a_loop_a_dangling_link_and_a_pipe_is_classified(
    demo_classifier: Path, mixed: Path, capsys: pytest.CaptureFixture[str], reliability: Recorder
) -> None:
    code = run(["classify", str(mixed), "--device", "cpu", "--top-k", "1"])
    out, err = capsys.readouterr()
    reliability.record(CATEGORY, "classify a folder: a loop of links, a link to nothing, a pipe named camera.png, "
                       "a sub-folder, a text file and one photo",
                       "the photo is classified; each skipped entry is reported on stderr", err.strip())  # fmt: skip
    assert code == 0 and "chelsea.png" in out and "unexpected error" not in err
    assert err.strip().splitlines() == [
        "npu-studio: note: 1 file skipped: not a photo",
        "npu-studio: note: 1 sub-folder skipped: sub-folders are not searched: sub",
        "npu-studio: note: 2 links skipped: a loop of links: loop1, loop2",
        "npu-studio: note: 1 link skipped: it points to nothing: dangling.png",
        "npu-studio: note: 1 entry skipped: not a file (a pipe, socket or device): camera.png",
    ]


def test_the_same_folder_in_json_lists_what_was_skipped(
    demo_classifier: Path, mixed: Path, capsys: pytest.CaptureFixture[str], reliability: Recorder
) -> None:
    code = run(["classify", str(mixed), "--device", "cpu", "--top-k", "1", "--json"])
    out, err = capsys.readouterr()
    report = json.loads(out)
    skipped = {Path(s["path"]).name: s["reason"] for s in report["skipped"]}
    reliability.record(CATEGORY, "classify a folder --json: the same bad entries",
                       "one JSON document: the photo's result and every skipped entry with its reason",
                       ", ".join(f"{k}: {v}" for k, v in sorted(skipped.items())))  # fmt: skip
    assert code == 0 and err == ""
    assert [Path(r["path"]).name for r in report["results"]] == ["chelsea.png"]
    assert skipped == {"notes.txt": "not a photo", "sub": "sub-folder", "loop1": "link loop", "loop2": "link loop",
                       "dangling.png": "link to nothing", "camera.png": "not a file"}  # fmt: skip


def test_a_folder_the_user_cannot_read_is_one_clear_line(
    tmp_path: Path, samples: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
    reliability: Recorder,
) -> None:  # fmt: skip
    locked = tmp_path / "locked"
    locked.mkdir()
    shutil.copy2(samples / "coffee.png", locked / "coffee.png")
    _denied_for(locked, monkeypatch)
    code = run(["classify", str(locked), "--device", "cpu"])
    out, err = capsys.readouterr()
    reliability.record(CATEGORY, "classify a folder the user cannot read (permission denied)",
                       "one line naming the folder and the reason, exit 2", err.strip())  # fmt: skip
    assert code == 2 and out == ""
    assert err.strip() == (f"npu-studio: error: The folder {locked} cannot be read: permission denied. "
                           "Check its permissions, or give another folder.")  # fmt: skip


def test_an_unreadable_folder_next_to_a_readable_one_spoils_nothing(
    demo_classifier: Path, tmp_path: Path, samples: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str], reliability: Recorder,
) -> None:  # fmt: skip
    locked, readable = tmp_path / "locked", tmp_path / "readable"
    for folder in (locked, readable):
        folder.mkdir()
        shutil.copy2(samples / "coffee.png", folder / "coffee.png")
    _denied_for(locked, monkeypatch)
    code = run(["classify", str(locked), str(readable), "--device", "cpu", "--top-k", "1"])
    out, err = capsys.readouterr()
    reliability.record(CATEGORY, "classify two folders, one that cannot be read",
                       "the readable folder's photos are classified; the other is one note", err.strip())
    assert code == 0 and f"{readable / 'coffee.png'}" in out and "espresso" in out
    assert err.strip() == f"npu-studio: note: the folder {locked} cannot be read: permission denied"


def test_the_classify_view_walks_the_folder_as_the_cli_does(
    qtbot: Any, mixed: Path, reliability: Recorder
) -> None:
    from ui.classify.view import ClassifyView
    from ui.common.device_picker import DeviceChoiceModel

    view = ClassifyView(DeviceChoiceModel())
    qtbot.addWidget(view)
    asked: list[list[str]] = []
    view.classify_requested.connect(asked.append)
    view.classify_paths([str(mixed)])
    said, listed = view.batch.skipped.text(), view.batch.skipped.toolTip()
    reliability.record(CATEGORY, "Classify view: the same folder dropped on the window",
                       "the photo is classified; the skipped entries are said beside the run, each named in a tooltip",
                       f"{said} / {listed}")  # fmt: skip
    assert asked == [[str(mixed / "chelsea.png")]]
    assert said.startswith("6 files skipped: ")
    for name, why in [("notes.txt", "not a photo"), ("sub", "a folder"), ("loop1", "a loop of links"),
                      ("loop2", "a loop of links"), ("dangling.png", "a link to nothing"),
                      ("camera.png", "not a file (a pipe, socket or device)")]:  # fmt: skip
        assert f"{name}: {why}" in listed, name


def test_the_classify_view_says_why_an_unreadable_folder_gave_no_photos(
    qtbot: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, reliability: Recorder
) -> None:
    from ui.classify.view import ClassifyView
    from ui.common.device_picker import DeviceChoiceModel

    locked = tmp_path / "locked"
    locked.mkdir()
    (locked / "a.png").write_bytes(b"")
    _denied_for(locked, monkeypatch)
    view = ClassifyView(DeviceChoiceModel())
    qtbot.addWidget(view)
    view.classify_paths([str(locked)])
    banners = [(b.message, b.hint) for b in view.banners.shown()]
    reliability.record(CATEGORY, "Classify view: a folder the user cannot read",
                       "a warning that names the folder and the reason", " / ".join(f"{m} {h}" for m, h in banners))
    assert len(banners) == 1 and banners[0][0] == "No photos to classify."
    assert banners[0][1].startswith(f"The folder {locked} cannot be read: permission denied. ")

"""The one photo-folder walk (engines/photo_folders.py): each bad entry is skipped with its reason and the
walk goes on; a folder that cannot be listed is one problem; the CLI and the Classify view use it."""

from __future__ import annotations

import errno
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from engines import photo_folders
from engines.photo_folders import (
    FOLDER_UNREADABLE,
    LINK_LOOP,
    LINK_TO_NOTHING,
    NOT_A_FILE,
    NOT_A_PHOTO,
    SUB_FOLDER,
    UNREADABLE,
    walk_photos,
)


def mixed_folder(root: Path) -> Path:
    """The audit's folder: a loop of links, a dangling link, a photo, a sub-folder and a text file."""
    root.mkdir()
    (root / "photo.png").write_bytes(b"png")
    (root / "notes.txt").write_text("not a photo")
    (root / "sub").mkdir()
    (root / "sub" / "inside.png").write_bytes(b"png")
    os.symlink("loop2", root / "loop1")
    os.symlink("loop1", root / "loop2")
    os.symlink("nowhere.png", root / "dangling.png")
    return root


def test_one_bad_entry_spoils_nothing(tmp_path: Path) -> None:
    folder = mixed_folder(tmp_path / "photos")
    walk = walk_photos([folder])
    assert walk.photos == (str(folder / "photo.png"),)
    reasons = {Path(s.path).name: s.reason for s in walk.skipped}
    assert reasons == {"notes.txt": NOT_A_PHOTO, "sub": SUB_FOLDER, "loop1": LINK_LOOP, "loop2": LINK_LOOP,
                       "dangling.png": LINK_TO_NOTHING}  # fmt: skip
    assert walk.notes() == [
        "1 file skipped: not a photo",
        "1 sub-folder skipped: sub-folders are not searched: sub",
        "2 links skipped: a loop of links: loop1, loop2",
        "1 link skipped: it points to nothing: dangling.png",
    ]


def test_photos_come_in_natural_order_and_hidden_files_are_not_photos(tmp_path: Path) -> None:
    for name in ("astronaut_10.png", "astronaut_2.png", "Astronaut_1.png", ".hidden.png", "._astronaut_3.png"):
        (tmp_path / name).write_bytes(b"")
    names = [Path(p).name for p in walk_photos([tmp_path]).photos]
    assert names == ["Astronaut_1.png", "astronaut_2.png", "astronaut_10.png"]
    assert walk_photos([tmp_path]).skipped == ()


def test_a_pipe_named_like_a_photo_is_skipped_not_opened(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "frozen.png")
    (tmp_path / "ok.jpg").write_bytes(b"")
    walk = walk_photos([tmp_path])
    assert [Path(p).name for p in walk.photos] == ["ok.jpg"]
    assert [(Path(s.path).name, s.reason) for s in walk.skipped] == [("frozen.png", NOT_A_FILE)]


def test_files_named_directly_are_kept_as_given(tmp_path: Path) -> None:
    folder = mixed_folder(tmp_path / "photos")
    given = [str(folder / "notes.txt"), str(tmp_path / "missing.png"), str(folder / "photo.png")]
    assert walk_photos(given).photos == tuple(given)  # the classifier says what is wrong with each


def _denied(path: str) -> PermissionError:
    return PermissionError(errno.EACCES, "Permission denied", path)


def test_a_folder_that_cannot_be_listed_is_one_problem_and_the_others_go_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    locked, open_one = tmp_path / "locked", tmp_path / "open"
    for folder in (locked, open_one):
        folder.mkdir()
        (folder / "a.png").write_bytes(b"")
    real = os.scandir

    def scandir(path: Any) -> Any:
        if os.fspath(path) == str(locked):
            raise _denied(str(locked))
        return real(path)

    monkeypatch.setattr(photo_folders.os, "scandir", scandir)
    walk = walk_photos([locked, open_one])
    assert walk.photos == (str(open_one / "a.png"),)
    problems = [(s.path, s.reason, s.detail) for s in walk.skipped]
    assert problems == [(str(locked), FOLDER_UNREADABLE, "permission denied")]
    assert walk.notes() == [f"the folder {locked} cannot be read: permission denied"]


class _Entry:
    """A directory entry whose type cannot be read (a folder listed without search permission)."""

    def __init__(self, folder: Path, name: str, error: OSError | None) -> None:
        self.name, self.path, self._error = name, str(folder / name), error

    def _check(self) -> bool:
        if self._error is not None:
            raise self._error
        return False

    def is_dir(self) -> bool:
        return self._check()

    def is_file(self) -> bool:
        return self._error is None

    def is_symlink(self) -> bool:
        return False


class _Listing:
    def __init__(self, entries: list[_Entry], broken: OSError | None = None) -> None:
        self.entries, self.broken = entries, broken

    def __enter__(self) -> _Listing:
        return self

    def __exit__(self, *args: object) -> None:
        pass

    def __iter__(self) -> Iterator[_Entry]:
        yield from self.entries
        if self.broken is not None:
            raise self.broken


def test_an_entry_whose_type_cannot_be_read_is_skipped_with_the_reason(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    entries = [_Entry(tmp_path, "b.png", None), _Entry(tmp_path, "secret.png", _denied("secret.png")),
               _Entry(tmp_path, "a.png", None)]  # fmt: skip
    monkeypatch.setattr(photo_folders.os, "scandir", lambda path: _Listing(entries))
    monkeypatch.setattr(photo_folders.os.path, "isdir", lambda path: True)
    walk = walk_photos([tmp_path])
    assert [Path(p).name for p in walk.photos] == ["a.png", "b.png"]
    assert [(Path(s.path).name, s.reason, s.detail) for s in walk.skipped] == [
        ("secret.png", UNREADABLE, "permission denied")
    ]
    assert walk.notes() == ["1 entry skipped: cannot be read (permission denied): secret.png"]


def test_a_listing_that_breaks_off_keeps_what_it_found(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    listing = _Listing([_Entry(tmp_path, "a.png", None)], broken=OSError(errno.EIO, "Input/output error"))
    monkeypatch.setattr(photo_folders.os, "scandir", lambda path: listing)
    monkeypatch.setattr(photo_folders.os.path, "isdir", lambda path: True)
    walk = walk_photos([tmp_path])
    assert [Path(p).name for p in walk.photos] == ["a.png"]
    assert walk.notes() == [f"the folder {tmp_path} cannot be read: input/output error"]


def test_names_in_notes_cannot_drive_a_terminal(tmp_path: Path) -> None:
    os.symlink("nowhere", tmp_path / "evil\x1b]52;c;SGVsbG8=\x07.png")
    assert walk_photos([tmp_path]).notes() == ["1 link skipped: it points to nothing: evil\\x1b]52;c;SGVsbG8=\\x07.png"]


def test_many_skipped_entries_are_counted_not_all_named(tmp_path: Path) -> None:
    for i in range(5):
        os.symlink(f"nowhere{i}", tmp_path / f"link{i}.png")
    assert walk_photos([tmp_path]).notes() == [
        "5 links skipped: it points to nothing: link0.png, link1.png, link2.png and 2 more"
    ]


def test_the_cli_and_the_classify_view_walk_the_same_way(tmp_path: Path) -> None:
    from app.commands.classify import expand_images
    from ui.classify.photos import expand_paths

    folder = mixed_folder(tmp_path / "photos")
    (folder / "photo_10.jpg").write_bytes(b"")
    (folder / "photo_9.jpg").write_bytes(b"")
    cli, walk = expand_images([str(folder)])
    assert [str(p) for p in cli] == expand_paths([str(folder)]).photos == list(walk.photos)
    assert [Path(p).name for p in walk.photos] == ["photo.png", "photo_9.jpg", "photo_10.jpg"]


def test_quantize_calibration_walks_the_same_way(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from engines.errors import ImageError
    from engines.vision.calibration import find_photos

    folder = mixed_folder(tmp_path / "photos")
    assert find_photos(folder) == [folder / "photo.png"]
    real = os.scandir
    monkeypatch.setattr(photo_folders.os, "scandir",
                        lambda path: (_ for _ in ()).throw(_denied(str(path))) if Path(path) == folder else real(path))
    with pytest.raises(ImageError, match="cannot be read: permission denied"):
        find_photos(folder)

"""The one reader of user-writable JSON (engines/jsonfile.py) and the work folders a killed process
cannot leave behind (engines/workdirs.py)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from engines import jsonfile, workdirs


@pytest.mark.parametrize(
    ("content", "words"),
    [
        (b"[" * 100_000, "nests deeper"),
        (b'{"a": ' * 70 + b"1" + b"}" * 70, "nests deeper"),
        (b"9" * 5000, "cannot be parsed"),
        (b"\xff\xfe{}", "not UTF-8"),
        (b'{"a": 1', "not valid JSON"),
    ],
    ids=["deep array", "deep object", "5000-digit number", "not UTF-8", "cut short"],
)
def test_damaged_json_is_one_error_with_the_reason(tmp_path: Path, content: bytes, words: str) -> None:
    path = tmp_path / "x.json"
    path.write_bytes(content)
    with pytest.raises(jsonfile.JsonFileError) as caught:
        jsonfile.read_json(path)
    assert words in caught.value.problem and caught.value.kind == "damaged"


def test_brackets_inside_strings_do_not_count_as_nesting(tmp_path: Path) -> None:
    path = tmp_path / "x.json"
    path.write_text('{"template": "' + "[{" * 10_000 + '", "n": [1, [2]]}', encoding="utf-8")
    assert jsonfile.read_object(path)["n"] == [1, [2]]


def test_a_fifo_a_folder_a_missing_file_and_a_huge_file(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo.json"
    os.mkfifo(fifo)
    started = time.monotonic()
    with pytest.raises(jsonfile.JsonFileError, match="not a regular file"):
        jsonfile.read_json(fifo)
    assert time.monotonic() - started < 1
    (tmp_path / "folder.json").mkdir()
    with pytest.raises(jsonfile.JsonFileError) as caught:
        jsonfile.read_json(tmp_path / "folder.json")
    assert caught.value.kind == "unreadable"
    with pytest.raises(jsonfile.JsonFileError) as caught:
        jsonfile.read_json(tmp_path / "nothing.json")
    assert caught.value.missing
    big = tmp_path / "big.json"
    big.write_bytes(b"[" + b"1," * 600_000 + b"1]")
    with pytest.raises(jsonfile.JsonFileError, match="far larger"):
        jsonfile.read_json(big, max_bytes=1 << 20)
    with pytest.raises(jsonfile.JsonFileError, match="not an object"):
        big.write_text("[1]")
        jsonfile.read_object(big)


def test_work_folders_name_their_process_and_only_dead_ones_are_swept(tmp_path: Path) -> None:
    mine = workdirs.make(tmp_path, ".import-my-p5-model-")
    assert workdirs.owner(mine.name, ".import-my-p5-model-") == os.getpid()
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    gone = tmp_path / f".import-x-p{dead.pid}-abcdefgh"
    old_style = tmp_path / ".import-y-abcdefgh"  # no process id: kept until it is old
    unrelated = tmp_path / "model"
    for folder in (gone, old_style, unrelated):
        folder.mkdir()
    assert workdirs.sweep(tmp_path, (".import-",)) == [gone]
    past = time.time() - workdirs.STALE_AGE_SECONDS - 10
    os.utime(old_style, (past, past))
    assert workdirs.sweep(tmp_path, (".import-",)) == [old_style]
    assert mine.is_dir() and unrelated.is_dir()


def _dead_pid() -> int:
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    return dead.pid


def test_a_work_folder_names_its_process_and_when_it_started(tmp_path: Path) -> None:
    folder = workdirs.make(tmp_path, ".import-phi-")
    assert folder.name.startswith(f".import-phi-p{os.getpid()}s")
    assert workdirs.owner(folder.name) == os.getpid()
    assert workdirs.is_running(os.getpid(), workdirs._start_token(os.getpid()))
    assert workdirs.name(".removing-phi-").startswith(f".removing-phi-p{os.getpid()}s")


def test_a_reused_process_id_does_not_keep_a_dead_commands_folder(tmp_path: Path) -> None:
    """The id in the name is running again, but as another process (it started at another time)."""
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        started = workdirs._start_token(other.pid)
        assert started
        reused = tmp_path / f".import-x-p{other.pid}s{started}0-abcdefgh"  # same id, another start
        same = tmp_path / f".import-y-p{other.pid}s{started}-abcdefgh"  # that very process: running
        for folder in (reused, same):
            folder.mkdir()
        assert workdirs.sweep(tmp_path) == [reused]
        assert same.is_dir()
    finally:
        other.kill()
        other.wait()
    assert workdirs.sweep(tmp_path) == [same]  # now its process is gone


def test_every_kind_of_work_folder_of_a_dead_process_is_swept_from_the_library(tmp_path: Path) -> None:
    pid = _dead_pid()
    swept = [f".import-phi-p{pid}s1abc-abcdefgh", f".efficientnet-lite0-qdq.p{pid}s1abc-abcdefgh",
             f".efficientnet-lite0-qdq.old-p{pid}s1abc-abcdefgh", f".import-phi-p{pid}-abcdefgh",
             ".removing-phi-1234abcd"]  # fmt: skip
    kept = [workdirs.make(tmp_path, ".efficientnet-lite0-qdq.").name, ".downloads", ".import-legacy-abcdefgh",
            "phi-p1-model", f".notes-p{pid}.txt"]  # fmt: skip
    for name in swept + kept[1:]:
        (tmp_path / name).mkdir()
    (tmp_path / swept[0] / "model.onnx.data").write_bytes(b"x" * 1000)
    assert sorted(p.name for p in workdirs.sweep(tmp_path)) == sorted(swept)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(kept)


def test_with_prefixes_only_those_work_folders_are_swept(tmp_path: Path) -> None:
    """A quantize with --out elsewhere sweeps its own leftovers there, nothing of the user's."""
    pid = _dead_pid()
    mine, theirs = tmp_path / f".variant.p{pid}s1abc-abcdefgh", tmp_path / f".other-p{pid}s1abc-abcdefgh"
    for folder in (mine, theirs):
        folder.mkdir()
    assert workdirs.sweep(tmp_path, (".variant.",)) == [mine]
    assert theirs.is_dir()


def test_the_first_look_at_the_library_sweeps_it(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from app import paths

    monkeypatch.setenv("NPU_STUDIO_HOME", str(tmp_path / "home"))
    library = tmp_path / "home" / "data" / "models"
    stale = library / f".efficientnet-lite0-qdq.p{_dead_pid()}s1abc-abcdefgh"
    stale.mkdir(parents=True)
    assert paths.user_models_dir() == library and not stale.exists()

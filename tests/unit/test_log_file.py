"""The log file rolls over like the standard library's RotatingFileHandler, without importing
logging.handlers, and a rollover another process prevents keeps the log going."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from app import logs

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def logger() -> Iterator[logging.Logger]:
    log = logging.getLogger("tests.log-file")
    log.propagate = False
    log.setLevel(logging.INFO)
    yield log
    for handler in list(log.handlers):
        log.removeHandler(handler)
        handler.close()


def attach(log: logging.Logger, path: Path, max_bytes: int, backups: int) -> logs.SelfDisablingFileHandler:
    handler = logs.SelfDisablingFileHandler(str(path), maxBytes=max_bytes, backupCount=backups, encoding="utf-8")
    handler.setFormatter(logging.Formatter("%(message)s"))
    log.addHandler(handler)
    return handler


def test_the_file_rolls_over_into_numbered_copies_and_the_oldest_goes(tmp_path: Path, logger: logging.Logger) -> None:
    path = tmp_path / "npu-studio.log"
    attach(logger, path, max_bytes=100, backups=2)
    for number in range(40):
        logger.info("record %02d %s", number, "x" * 10)  # 21 bytes a line: four lines a file
    files = sorted(p.name for p in tmp_path.iterdir())
    assert files == ["npu-studio.log", "npu-studio.log.1", "npu-studio.log.2"]
    for name in files:
        assert (tmp_path / name).stat().st_size < 100
    newest = path.read_text(encoding="utf-8").splitlines()
    assert newest[-1].startswith("record 39")
    kept = [line for name in reversed(files) for line in (tmp_path / name).read_text(encoding="utf-8").splitlines()]
    numbers = [int(line.split()[1]) for line in kept]
    assert numbers == list(range(numbers[0], 40))  # the copies hold the newest records, in order, none lost
    assert numbers[0] > 0  # the oldest copy went


def test_a_rollover_that_cannot_rename_keeps_logging(
    tmp_path: Path, logger: logging.Logger, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "npu-studio.log"
    handler = attach(logger, path, max_bytes=60, backups=3)

    def held_open(src: str, dst: str) -> None:
        raise PermissionError(13, "The process cannot access the file because it is being used by another process")

    monkeypatch.setattr(logs.os, "replace", held_open)
    for number in range(10):
        logger.info("record %02d %s", number, "y" * 10)
    assert not handler.disabled_reason
    assert [p.name for p in tmp_path.iterdir()] == ["npu-studio.log"]
    lines = path.read_text(encoding="utf-8").splitlines()
    assert [int(line.split()[1]) for line in lines] == list(range(10))  # every record kept, the file grew
    assert capsys.readouterr().err == ""
    monkeypatch.undo()
    logger.info("record 10 %s", "z" * 10)  # the next record rolls it over once the rename works again
    assert (tmp_path / "npu-studio.log.1").is_file()
    assert path.read_text(encoding="utf-8").splitlines() == [f"record 10 {'z' * 10}"]


def test_a_folder_gone_at_rollover_turns_the_file_off_with_one_line(
    tmp_path: Path, logger: logging.Logger, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "logs"
    folder.mkdir()
    handler = attach(logger, folder / "npu-studio.log", max_bytes=40, backups=1)
    logger.info("first record %s", "a" * 20)
    handler.stream.close()
    for name in os.listdir(folder):
        os.remove(folder / name)
    folder.rmdir()
    (tmp_path / "logs").write_text("a file where the folder was", encoding="utf-8")
    for number in range(5):
        logger.info("record %d %s", number, "b" * 20)
    assert handler.disabled_reason
    err = capsys.readouterr().err
    assert err.count("cannot be written") == 1 and "Traceback" not in err


def test_starting_the_log_imports_no_logging_handlers() -> None:
    probe = (
        "import sys, os, tempfile\n"
        "os.environ['NPU_STUDIO_HOME'] = tempfile.mkdtemp()\n"
        "from app import logs\n"
        "logs.setup_logging(console=False)\n"
        "import logging; logging.getLogger('x').info('hello')\n"
        "print(','.join(m for m in ('logging.handlers', 'socket', 'pickle') if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", probe], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == ""

"""The CLI's output channels (app/terminal.py): machine output is UTF-8 whatever the locale, human output
degrades what a console cannot show and never fails, and an output that goes away is `OutputLost`, which
the CLI ends quietly (a closed pipe) or in one line (a full disk), never as an error of the work."""

from __future__ import annotations

import errno
import io
import json
import sys
import types
from pathlib import Path
from typing import Any

import pytest

from app import terminal
from app.terminal import EXIT_OUTPUT_CLOSED, EXIT_OUTPUT_FAILED, OutputLost, SafeStream

REPO = Path(__file__).resolve().parents[2]
PLACEMENT = "ran on CPU — all 94 nodes · 3× faster → done…"


def console(encoding: str) -> tuple[io.BytesIO, io.TextIOWrapper]:
    raw = io.BytesIO()
    return raw, io.TextIOWrapper(raw, encoding=encoding, write_through=True)


@pytest.mark.parametrize("encoding", ["ascii", "latin-1", "cp932", "cp1252", "utf-8"])
def test_human_text_degrades_on_a_console_that_cannot_show_it(encoding: str) -> None:
    raw, inner = console(encoding)
    SafeStream(inner).write(PLACEMENT + " 東京\n")
    shown = raw.getvalue().decode(encoding)
    kept = {c for c in PLACEMENT + " 東京" if c.encode(encoding, "ignore")}
    assert all(c in shown for c in kept)  # what the console can show stays as it is
    if encoding == "ascii":
        assert shown == "ran on CPU - all 94 nodes - 3x faster -> done... \\u6771\\u4eac\n"


@pytest.mark.parametrize("encoding", ["ascii", "latin-1", "cp932", "cp1252"])
def test_json_is_utf8_whatever_the_console_encoding(encoding: str, monkeypatch: pytest.MonkeyPatch) -> None:
    raw, inner = console(encoding)
    monkeypatch.setattr(sys, "stdout", SafeStream(inner))
    data = {"badge": PLACEMENT, "label": "東京", "escape": "\x1b[2J"}
    terminal.print_json(data)
    assert json.loads(raw.getvalue().decode("utf-8")) == data


class Failing(io.TextIOBase):
    def __init__(self, error: OSError) -> None:
        super().__init__()
        self.error = error

    def write(self, text: str) -> int:
        raise self.error


def test_a_failed_write_is_output_lost_not_an_exception_of_the_work() -> None:
    stream = SafeStream(Failing(BrokenPipeError(errno.EPIPE, "Broken pipe")))
    with pytest.raises(OutputLost) as lost:
        stream.write("answer")
    assert lost.value.closed and lost.value.stream == "stdout"
    assert not isinstance(lost.value, Exception)  # no `except Exception` on the way takes it for its own error


def test_a_closed_pipe_ends_quietly(capsys: pytest.CaptureFixture[str]) -> None:
    code = terminal.ended_by(OutputLost("stdout", BrokenPipeError(errno.EPIPE, "Broken pipe")))
    assert code == EXIT_OUTPUT_CLOSED and capsys.readouterr().err == ""


def test_a_full_output_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    code = terminal.ended_by(OutputLost("stdout", OSError(errno.ENOSPC, "No space left on device")))
    assert code == EXIT_OUTPUT_FAILED
    assert capsys.readouterr().err == (
        "npu-studio: error: the output could not be written (no space left on device); nothing more was written.\n"
    )


def test_every_command_goes_through_the_one_rule(capsys: pytest.CaptureFixture[str],
                                                 monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    """`app.cli.run` ends any command whose stdout fails the same way: here `--version`'s own print."""
    from app import cli

    def broken_parser() -> Any:
        class Parser:
            def parse_args(self, argv: list[str]) -> Any:
                print("npu-studio 0.1.0")
                raise OutputLost("stdout", BrokenPipeError(errno.EPIPE, "Broken pipe"))

        return Parser()

    monkeypatch.setattr(cli, "build_parser", broken_parser)
    assert cli.run(["--version"]) == EXIT_OUTPUT_CLOSED
    assert capsys.readouterr().err == ""


def test_the_frozen_app_runs_python_in_utf8_mode(monkeypatch: pytest.MonkeyPatch) -> None:
    """The PyInstaller spec, run with PyInstaller's build functions recorded: both executables get `-X utf8`."""
    calls: dict[str, list[tuple[tuple[Any, ...], dict[str, Any]]]] = {}

    def record(name: str) -> Any:
        def call(*args: Any, **kwargs: Any) -> Any:
            calls.setdefault(name, []).append((args, kwargs))
            return types.SimpleNamespace(pure=[], scripts=[], binaries=[], datas=[])

        return call

    hooks = types.ModuleType("PyInstaller.utils.hooks")
    hooks.collect_all = lambda package: ([], [], [])  # type: ignore[attr-defined]
    hooks.collect_submodules = lambda package: []  # type: ignore[attr-defined]
    for name in ("PyInstaller", "PyInstaller.utils"):
        monkeypatch.setitem(sys.modules, name, types.ModuleType(name))
    monkeypatch.setitem(sys.modules, "PyInstaller.utils.hooks", hooks)
    spec = REPO / "installer" / "npu_studio.spec"
    names = {"SPECPATH": str(spec.parent), **{n: record(n) for n in ("Analysis", "PYZ", "EXE", "COLLECT")}}
    exec(compile(spec.read_text(encoding="utf-8"), str(spec), "exec"), names)
    executables = calls["EXE"]
    assert sorted(kwargs["name"] for _, kwargs in executables) == ["npu-studio", "npu-studio-cli"]
    for args, _ in executables:
        assert ("X utf8=1", None, "OPTION") in args[2]

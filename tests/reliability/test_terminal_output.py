"""Text that comes from elsewhere cannot take over the terminal, and any file name works.

Labels, model names, photo names and the model's streamed answer carry escape sequences, control
characters, bidi overrides and bytes that are not UTF-8. Through the real CLI, text mode must show
each as a visible escape (no ESC, no C1 control, no override reaches the terminal) and `--json` must
print one valid document whose strings are exactly the originals.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from PIL import Image

from app.cli import run
from tests.reliability.conftest import Recorder
from tests.unit.tiny_models import colour_classifier

CATEGORY = "Terminal output and file names"
# What must never reach a terminal raw: C0 controls but tab/newline, DEL, C1, bidi controls, surrogates.
RAW_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069\ud800-\udfff]")

HOSTILE_TEXT: dict[str, str] = {
    "an OSC 52 clipboard write": "\x1b]52;c;cm0gLXJmIH4=\x07",
    "a clear-screen CSI sequence": "\x1b[2J\x1b[H",
    "a window-title OSC sequence": "\x1b]0;pwned\x1b\\",
    "a one-byte C1 CSI (0x9b)": "\x9b31m",
    "a right-to-left override": "\u202egpj.exe",
    "a cursor-up and erase-line that rewrite the line above": "\x1b[1A\x1b[2K",
    "a backspace and a bell": "\x08\x08\x07",
}


def _assert_clean(text: str) -> None:
    found = RAW_CONTROL.search(text)
    assert found is None, f"raw control character {found.group()!r} reached the terminal: {text!r}"


@pytest.fixture
def photo(tmp_path: Path) -> Path:
    path = tmp_path / "red.png"
    Image.new("RGB", (16, 16), (240, 0, 0)).save(path)
    return path


@pytest.mark.parametrize("what", list(HOSTILE_TEXT), ids=list(HOSTILE_TEXT))
def test_a_label_with_control_characters_is_shown_escaped(
    what: str, tmp_path: Path, photo: Path, capsys: pytest.CaptureFixture[str], reliability: Recorder
) -> None:
    hostile = HOSTILE_TEXT[what]
    folder = colour_classifier(tmp_path / "m", labels=(f"red{hostile}", "green", "blue", "dark"))
    code = run(["classify", str(photo), "--model", str(folder), "--device", "cpu"])
    out = capsys.readouterr().out
    top = next(line for line in out.splitlines() if "%" in line)
    reliability.record(CATEGORY, f"classify: a label with {what}", "shown as visible escapes", top.strip())
    assert code == 0
    _assert_clean(out)
    assert "red" in top and ("\\x" in top or "\\u" in top)


def test_a_model_name_and_a_photo_name_with_escapes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], reliability: Recorder
) -> None:
    folder = colour_classifier(tmp_path / "m")
    manifest = json.loads((folder / "manifest.json").read_text(encoding="utf-8"))
    manifest["name"] = "colours\x1b]0;owned\x07"
    (folder / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    photo = tmp_path / "red\x1b[2J\u202e.png"
    Image.new("RGB", (16, 16), (240, 0, 0)).save(photo)
    code = run(["classify", str(photo), "--model", str(folder), "--device", "cpu"])
    out = capsys.readouterr().out
    reliability.record(
        CATEGORY, "classify: manifest name and photo name with escape sequences", "shown as visible escapes",
        " / ".join(line for line in out.splitlines()[:3] if line.strip()),
    )  # fmt: skip
    assert code == 0
    _assert_clean(out)
    assert "colours\\x1b]0;owned\\x07" in out and "red\\x1b[2J\\u202e.png" in out


def test_an_error_that_quotes_a_hostile_file_name(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], reliability: Recorder
) -> None:
    folder = colour_classifier(tmp_path / "m")
    missing = tmp_path / "gone\x1b]52;c;ZXZpbA==\x07.png"
    code = run(["classify", str(missing), "--model", str(folder), "--device", "cpu"])
    err = capsys.readouterr().err.strip()
    reliability.record(CATEGORY, "classify: an error message quoting a file name with OSC 52", "escaped", err)
    assert code == 2
    _assert_clean(err)
    assert "\\x1b]52" in err and len(err.splitlines()) == 1


def _non_utf8_folder(tmp_path: Path) -> tuple[Path, list[bytes]]:
    folder = tmp_path / "photos"
    folder.mkdir()
    names = [b"caf\xe9.png", b"\xff\xfe.png", b"ok.png"]
    for name in names:
        Image.new("RGB", (16, 16), (240, 0, 0)).save(os.fsdecode(os.path.join(os.fsencode(folder), name)))
    return folder, names


def test_photos_whose_names_are_not_utf8_in_text_mode(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], reliability: Recorder
) -> None:
    folder, _ = _non_utf8_folder(tmp_path)
    model = colour_classifier(tmp_path / "m")
    code = run(["classify", str(folder), "--model", str(model), "--device", "cpu"])
    out = capsys.readouterr().out
    shown = [line.rsplit("/", 1)[-1] for line in out.splitlines() if line.endswith(".png")]
    reliability.record(CATEGORY, "classify a folder: file names that are not UTF-8, text mode",
                       "every photo classified; the bad bytes shown as \\xNN", ", ".join(shown))  # fmt: skip
    assert code == 0
    _assert_clean(out)
    assert sorted(shown) == sorted(["caf\\xe9.png", "ok.png", "\\xff\\xfe.png"])
    assert out.count("red") == 3


def test_photos_whose_names_are_not_utf8_in_json(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], reliability: Recorder
) -> None:
    folder, names = _non_utf8_folder(tmp_path)
    model = colour_classifier(tmp_path / "m")
    code = run(["classify", str(folder), "--model", str(model), "--device", "cpu", "--json"])
    out = capsys.readouterr().out
    data = json.loads(out)  # one whole, valid document
    paths = [os.fsencode(result["path"]) for result in data["results"]]
    same = sorted(os.path.basename(p) for p in paths) == sorted(names)
    reliability.record(CATEGORY, "classify a folder --json: file names that are not UTF-8",
                       "one valid JSON document; each path decodes back to the file's bytes",
                       f"{len(data['results'])} results, paths round-trip: {same}")  # fmt: skip
    assert code == 0
    _assert_clean(out)
    assert sorted(os.path.basename(p) for p in paths) == sorted(names)
    assert all(result["top"][0]["label"] == "red" for result in data["results"])


def test_json_keeps_hostile_labels_exact(tmp_path: Path, photo: Path, capsys: pytest.CaptureFixture[str],
                                        reliability: Recorder) -> None:  # fmt: skip
    labels = ("red" + "".join(HOSTILE_TEXT.values()), "green", "blue", "dark")
    folder = colour_classifier(tmp_path / "m", labels=labels)
    code = run(["classify", str(photo), "--model", str(folder), "--device", "cpu", "--json"])
    out = capsys.readouterr().out
    top = json.loads(out)["results"][0]["top"][0]["label"]
    reliability.record(CATEGORY, "classify --json: a label with every kind of control sequence",
                       "escaped in the JSON text, the same string once parsed",
                       f"label parsed back exactly: {top == labels[0]}")  # fmt: skip
    assert code == 0 and top == labels[0]
    _assert_clean(out)


def _hostile_stream(monkeypatch: pytest.MonkeyPatch, inject: str) -> None:
    """The real model answers, and every streamed piece carries `inject` (as a hostile model could)."""
    from engines.chat.conversation import Conversation

    real: Callable[..., Any] = Conversation._respond  # every answer, whole or stepped in turn, is made here
    monkeypatch.setenv("NPU_STUDIO_CHAT_IN_PROCESS", "1")  # the patched engine runs in this process

    def respond(self: Conversation, messages: Any, on_text: Callable[[str], None] | None = None,
                *args: Any, **kwargs: Any) -> Any:  # fmt: skip
        wrapped = None if on_text is None else (lambda piece: on_text(inject + piece))
        return real(self, messages, wrapped, *args, **kwargs)

    monkeypatch.setattr(Conversation, "_respond", respond)


@pytest.mark.parametrize("what", ["an OSC 52 clipboard write", "a right-to-left override", "a one-byte C1 CSI (0x9b)"])
def test_streamed_chat_text_with_escapes(
    what: str, tiny_llm: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
    reliability: Recorder,
) -> None:  # fmt: skip
    _hostile_stream(monkeypatch, HOSTILE_TEXT[what])
    code = run(["chat", "--model", str(tiny_llm), "--device", "cpu", "--prompt", "Hi", "--max-new-tokens", "3"])
    out = capsys.readouterr().out
    reliability.record(CATEGORY, f"chat --prompt: streamed answer with {what}", "shown as visible escapes",
                       f"escapes shown: {out.count(chr(92)) >= 3}, raw controls: {bool(RAW_CONTROL.search(out))}")
    assert code == 0
    _assert_clean(out)
    assert out.count("\\") >= 3


def test_models_list_shows_a_hostile_model_name_escaped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], reliability: Recorder
) -> None:
    source = colour_classifier(tmp_path / "src")
    manifest = json.loads((source / "manifest.json").read_text(encoding="utf-8"))
    manifest["licence"] = "MIT\x1b]52;c;ZXZpbA==\x07\u202e"
    (source / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    assert run(["models", "import", str(source)]) == 0
    capsys.readouterr()
    code = run(["models", "list"])
    out = capsys.readouterr().out
    line = next((line for line in out.splitlines() if line.startswith("src ")), out)
    reliability.record(CATEGORY, "models list: a licence with escape sequences", "shown as visible escapes",
                       line.strip())  # fmt: skip
    assert code == 0
    _assert_clean(out)
    assert "MIT\\x1b]52" in line
    shutil.rmtree(tmp_path / "src")

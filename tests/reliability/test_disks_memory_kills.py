"""Read-only and full disks, errors without tracebacks, memory proportional to the work, and commands killed
half-way that leave nothing half-made (app/logs.py, app/paths.py, engines/vision/images.py,
engines/workdirs.py, app/cli.py's SIGTERM handling)."""

from __future__ import annotations

import io
import json
import logging
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from app import logs, paths
from app.cli import run
from tests.reliability.conftest import REPO, Recorder
from tests.unit.tiny_models import colour_classifier

ANSI = re.compile(r"\x1b\[")


def _cli(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = run(args)
    captured = capsys.readouterr()
    err = "\n".join(line for line in captured.err.splitlines() if not line.startswith("Importing "))
    return code, captured.out, err.strip()


def _child(args: list[str], home: Path, **env: str) -> subprocess.CompletedProcess[str]:
    environment = dict(os.environ, NPU_STUDIO_HOME=str(home), PYTHONPATH=str(REPO), **env)
    return subprocess.run([sys.executable, "-m", "app", *args], env=environment, cwd=REPO, text=True,
                          capture_output=True, timeout=300, check=False)  # fmt: skip


# --- class: disks and errors ---------------------------------------------------------------------------

CAT_DISK = "Disks and errors"


@pytest.fixture
def unwritable_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """NPU_STUDIO_HOME below a regular file: nothing can be created there (as on a read-only disk, which a
    test running as root cannot make)."""
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("x")
    monkeypatch.setenv("NPU_STUDIO_HOME", str(blocker / "home"))
    return blocker / "home"


READ_ONLY = [
    ("classify", lambda s: ["classify", str(s / "chelsea.png")], 0),
    ("models list", lambda s: ["models", "list"], 0),
    ("models import", lambda s: ["models", "import", "COLOURS", "--name", "c"], 2),
    ("bench", lambda s: ["bench", "--model", "COLOURS", "--devices", "cpu", "--runs", "5", "--batch", "2",
                         "--no-progress"], 0),
]  # fmt: skip


@pytest.mark.parametrize(("name", "make_args", "expected"), READ_ONLY, ids=[r[0] for r in READ_ONLY])
def test_an_unwritable_data_folder_degrades_instead_of_failing(
    name: str, make_args: object, expected: int, unwritable_home: Path, samples: Path, tmp_path: Path,
    capsys: pytest.CaptureFixture[str], reliability: Recorder,
) -> None:  # fmt: skip
    colours = colour_classifier(tmp_path / "colours")
    args = [str(colours) if a == "COLOURS" else a for a in make_args(samples)]  # type: ignore[operator]
    code, out, err = _cli(args, capsys)
    reliability.record(CAT_DISK, f"{name} with a data folder that cannot be created",
                       "works without the cache, or one clear line" if expected == 0 else "one clear line",
                       err.splitlines()[-1] if err else f"exit {code}, output as usual")  # fmt: skip
    assert "Traceback" not in err and "unexpected error" not in err
    assert code == expected, err
    if expected:
        assert err.startswith("npu-studio: error:") and "cannot be created" in err
    else:
        assert out.strip()


def test_doctor_prints_its_report_when_the_disk_refuses_the_files(
    unwritable_home: Path, capsys: pytest.CaptureFixture[str], reliability: Recorder
) -> None:
    code, out, err = _cli(["doctor", "--no-chat"], capsys)
    last = err.splitlines()[-1]
    reliability.record(CAT_DISK, "doctor with a data folder that cannot be created",
                       "the report on screen; one line about the files", last)  # fmt: skip
    assert "CPU" in out and "could not be written" in last and "Traceback" not in err
    assert code == 1


def test_a_full_disk_turns_the_log_file_off_with_one_line(tmp_path: Path, reliability: Recorder) -> None:
    handler = logs.SelfDisablingFileHandler(str(tmp_path / "npu-studio.log"), maxBytes=10**6, encoding="utf-8")
    handler.stream.close()
    handler.stream = open("/dev/full", "w", encoding="utf-8")  # noqa: SIM115 - the handler owns it
    logger = logging.getLogger("tests.full-disk")
    logger.addHandler(handler)
    logger.propagate = False
    stderr = io.StringIO()
    real, sys.stderr = sys.stderr, stderr
    try:
        for number in range(50):
            logger.warning("record %d", number)
    finally:
        sys.stderr = real
        logger.removeHandler(handler)
        handler.close()
    lines = stderr.getvalue().splitlines()
    reliability.record(CAT_DISK, "50 log records on a full disk", "one line, then silence", lines[0] if lines else "")
    assert len(lines) == 1 and "cannot be written" in lines[0] and "--- Logging error ---" not in stderr.getvalue()


def test_an_unexpected_error_is_one_line_without_a_traceback(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, reliability: Recorder
) -> None:
    from app.commands import devices

    def broken(args: object) -> int:
        raise RuntimeError("something inside went wrong")

    monkeypatch.setattr(devices, "run", broken)
    parser_func = run.__globals__["build_parser"]
    monkeypatch.setitem(run.__globals__, "build_parser", lambda: _with_func(parser_func(), broken))
    code, _, err = _cli(["devices"], capsys)
    reliability.record(CAT_DISK, "a command fails with an error nobody expected", "one line, exit 1", err)
    assert code == 1 and err.count("\n") == 0 and "Traceback" not in err and "something inside" in err


def _with_func(parser: object, func: object) -> object:
    import argparse

    assert isinstance(parser, argparse.ArgumentParser)
    for action in parser._subparsers._group_actions:  # type: ignore[union-attr]
        choices = getattr(action, "choices", None) or {}
        if "devices" in choices:
            choices["devices"].set_defaults(func=func)
    return parser


def test_a_classifier_section_that_is_a_list_is_one_clear_line(
    tmp_path: Path, samples: Path, capsys: pytest.CaptureFixture[str], reliability: Recorder
) -> None:
    folder = colour_classifier(tmp_path / "odd")
    manifest = json.loads((folder / "manifest.json").read_text(encoding="utf-8"))
    manifest["classifier"] = [manifest["classifier"]]
    (folder / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    code, _, err = _cli(["classify", "--model", str(folder), str(samples / "chelsea.png")], capsys)
    reliability.record(CAT_DISK, "classify --model: the classifier section is a list", "one clear line", err)
    assert code == 2 and err.startswith("npu-studio: error:") and "classifier section" in err


def test_onnx_runtime_warnings_never_reach_the_terminal(tmp_path: Path, samples: Path, reliability: Recorder) -> None:
    import onnx
    from onnx import TensorProto, helper

    folder = colour_classifier(tmp_path / "noisy")
    model = onnx.load(folder / "model.onnx")
    model.graph.initializer.append(helper.make_tensor("unused", TensorProto.FLOAT, [1], [1.0]))  # ORT warns
    onnx.save(model, folder / "model.onnx")
    result = _child(["classify", "--model", str(folder), str(samples / "chelsea.png")], tmp_path / "home")
    reliability.record(CAT_DISK, "a model that makes ONNX Runtime print a warning", "no native log line on stderr",
                       result.stderr.strip() or "nothing on stderr")  # fmt: skip
    assert result.returncode == 0 and not ANSI.search(result.stderr) and "onnxruntime" not in result.stderr


# --- class: memory -------------------------------------------------------------------------------------

CAT_MEMORY = "Memory"
# VmHWM is this process's own peak; ru_maxrss would include the size of the pytest process it was forked from.
PEAK_MB = (
    "def peak_mb():\n"
    "    return next(int(l.split()[1]) // 1024 for l in open('/proc/self/status') if l.startswith('VmHWM'))\n"
)
PEAK = PEAK_MB + (
    "import sys; from engines.models.manifest import Preprocess; from engines.vision.images import preprocess\n"
    "from engines.errors import ImageError\n"
    "try:\n    preprocess(sys.argv[1], Preprocess()); outcome = 'classified'\n"
    "except ImageError as exc:\n    outcome = str(exc)\n"
    "print(peak_mb(), outcome)"
)


def _image(kind: str, path: Path) -> Path:
    side = 9400  # just under Pillow's pixel limit (89.5 megapixels)
    if kind == "palette PNG":
        Image.new("P", (side, side)).save(path.with_suffix(".png"))
        return path.with_suffix(".png")
    if kind == "GIF":
        Image.new("P", (side, side)).save(path.with_suffix(".gif"))
        return path.with_suffix(".gif")
    if kind == "16-bit PNG":
        Image.new("I;16", (side, 6000)).save(path.with_suffix(".png"))
        return path.with_suffix(".png")
    Image.fromarray(np.zeros((side, side), np.float32), mode="F").save(path.with_suffix(".tif"),
                                                                      compression="tiff_deflate")  # fmt: skip
    return path.with_suffix(".tif")


@pytest.mark.parametrize("kind", ["palette PNG", "GIF", "16-bit PNG", "float TIFF"])
def test_a_tiny_file_that_decodes_to_a_huge_image_stays_within_memory(
    kind: str, tmp_path: Path, reliability: Recorder
) -> None:
    photo = _image(kind, tmp_path / "photo")
    result = subprocess.run([sys.executable, "-c", PEAK, str(photo)], capture_output=True, text=True, cwd=REPO,
                            env=dict(os.environ, PYTHONPATH=str(REPO)), timeout=120, check=False)  # fmt: skip
    peak_mb, _, outcome = result.stdout.strip().partition(" ")
    reliability.record(CAT_MEMORY, f"a {photo.stat().st_size // 1024} KB {kind} of 9400 px",
                       "classified or refused, under 450 MB", outcome.replace(str(tmp_path), "<tmp>"))  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert int(peak_mb) < 450, f"peak {peak_mb} MB"


def test_quantize_with_a_20000_by_1_strip_stays_within_memory(tmp_path: Path, reliability: Recorder) -> None:
    model = colour_classifier(tmp_path / "colours")
    calibration = tmp_path / "calibration"
    calibration.mkdir()
    Image.new("RGB", (20000, 1), (200, 10, 10)).save(calibration / "strip.png")
    Image.new("RGB", (64, 48), (10, 200, 10)).save(calibration / "green.png")
    code = PEAK_MB + (
        "import sys; from app.cli import run\n"
        "status = run(['quantize', sys.argv[1], '--calibration', sys.argv[2], '--out', sys.argv[3]])\n"
        "print(peak_mb(), status)"
    )
    result = subprocess.run([sys.executable, "-c", code, str(model), str(calibration), str(tmp_path / "out")],
                            capture_output=True, text=True, cwd=REPO, timeout=300, check=False,
                            env=dict(os.environ, PYTHONPATH=str(REPO), NPU_STUDIO_HOME=str(tmp_path / "h")),
                            )  # fmt: skip
    peak_mb, _, status = result.stdout.strip().splitlines()[-1].partition(" ")
    reliability.record(CAT_MEMORY, "quantize with a 140-byte 20000 x 1 PNG among the calibration photos",
                       "quantized, under 1 GB", f"exit {status}")  # fmt: skip
    assert status == "0", result.stderr[-2000:]
    assert int(peak_mb) < 1024, f"peak {peak_mb} MB"


# --- class: interrupted work ---------------------------------------------------------------------------

CAT_KILL = "Interrupted work"


def test_sigterm_during_an_import_leaves_nothing_behind(
    demo_chat_model: Path, tmp_path: Path, reliability: Recorder
) -> None:
    from tests.reliability.test_model_code import chat_folder

    source = chat_folder(demo_chat_model, tmp_path / "big-llm")
    home = tmp_path / "home"
    env = dict(os.environ, NPU_STUDIO_HOME=str(home), PYTHONPATH=str(REPO))
    child = subprocess.Popen([sys.executable, "-m", "app", "models", "import", str(source), "--name", "big"],
                             env=env, cwd=REPO, stderr=subprocess.PIPE, text=True)  # fmt: skip
    library = home / "data" / "models"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not any(library.glob(".import-*")):
        time.sleep(0.01)
    child.send_signal(signal.SIGTERM)
    _, err = child.communicate(timeout=30)
    last = err.strip().splitlines()[-1]
    reliability.record(CAT_KILL, "SIGTERM while `models import` copies a 107 MB model",
                       "exit 143; no .import-* folder; nothing added", last)  # fmt: skip
    leftovers = sorted(p.name for p in library.iterdir())
    assert child.returncode == 143 and leftovers == [], leftovers
    assert "Traceback" not in err


def test_work_folders_of_killed_processes_are_swept_at_the_next_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], reliability: Recorder
) -> None:
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    library = paths.user_models_dir()
    stale = library / f".import-big-p{dead.pid}-abcdefgh"
    live = library / f".import-other-p{os.getpid()}-zyxwvuts"
    for folder in (stale, live):
        folder.mkdir()
        (folder / "model.onnx.data").write_bytes(b"x" * 1000)
    out = tmp_path / "variant"
    stale_quantize = tmp_path / f".variant.p{dead.pid}-qwertyui"
    stale_quantize.mkdir()
    model = colour_classifier(tmp_path / "colours")
    calibration = tmp_path / "calibration"
    calibration.mkdir()
    Image.new("RGB", (32, 32), (200, 10, 10)).save(calibration / "red.png")
    assert _cli(["models", "import", str(model), "--name", "colours"], capsys)[0] == 0
    assert _cli(["quantize", str(model), "--calibration", str(calibration), "--out", str(out)], capsys)[0] == 0
    reliability.record(CAT_KILL, "work folders left by a killed import and a killed quantize",
                       "removed at the next run; a running one's kept",
                       f"import leftover removed: {not stale.exists()}; quantize leftover removed: "
                       f"{not stale_quantize.exists()}; live kept: {live.exists()}")  # fmt: skip
    assert not stale.exists() and not stale_quantize.exists() and live.exists()


OUTS = [
    ("the folder that holds the source model", lambda model: model.parent),
    ("a folder inside the source model", lambda model: model / "variant"),
    ("a non-empty folder that is not a model", lambda model: model.parent / "documents"),
]


@pytest.mark.parametrize(("name", "out_of"), OUTS, ids=[o[0] for o in OUTS])
def test_quantize_never_replaces_its_source_or_other_files(
    name: str, out_of: object, tmp_path: Path, capsys: pytest.CaptureFixture[str], reliability: Recorder
) -> None:
    model = colour_classifier(tmp_path / "library" / "colours")
    documents = tmp_path / "library" / "documents"
    documents.mkdir()
    (documents / "letter.txt").write_text("keep me")
    calibration = tmp_path / "calibration"
    calibration.mkdir()
    Image.new("RGB", (32, 32), (200, 10, 10)).save(calibration / "red.png")
    out = out_of(model)  # type: ignore[operator]
    before = sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*"))
    code, _, err = _cli(["quantize", str(model), "--calibration", str(calibration), "--out", str(out), "--force"],
                        capsys)  # fmt: skip
    reliability.record(CAT_KILL, f"quantize --force --out {name}", "refused; every file still there", err)
    assert code == 2 and err.startswith("npu-studio: error:")
    assert sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*")) == before

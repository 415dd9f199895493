"""The classify command on a fake Snapdragon: the NPU gets the QDQ variant, a lost device moves to the CPU."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from PIL import Image

from app.cli import run
from engines import runtime
from engines.runtime import registration
from engines.runtime.fallback import HEALTH
from tests.unit.fake_ort import directml_laptop, snapdragon
from tests.unit.tiny_models import colour_library_with_qdq


@pytest.fixture
def library(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    root = colour_library_with_qdq(tmp_path / "bundled")
    monkeypatch.setenv("NPU_STUDIO_BUNDLED_MODELS", str(root))
    yield root
    runtime.use_fake(None)
    registration.reset_registrations()
    HEALTH.reset()


def _photo(tmp_path: Path) -> Path:
    path = tmp_path / "red.png"
    Image.new("RGB", (32, 32), (240, 0, 0)).save(path)
    return path


def test_npu_choice_on_a_machine_with_an_npu_loads_the_qdq_variant(
    library: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = snapdragon(
        graph_ops=("GlobalAveragePool", "Flatten", "Gemm"),
        supported_ops={"CPUExecutionProvider": None, "QNNExecutionProvider": {"GlobalAveragePool", "Flatten", "Gemm"}},
    )
    # The fake runs no maths: answer like the real model would for a red photo.
    monkeypatch.setattr(
        "engines.vision.classifier.ImageClassifier.infer",
        lambda self, batch: __import__("numpy").tile([[5.0, 0.0, 0.0, 0.0]], (batch.shape[0], 1)),
    )
    monkeypatch.setattr("engines.vision.classifier.check_contract", _fake_contract)
    monkeypatch.setattr("engines.vision.classifier.IOBINDING_EPS", set())
    runtime.use_fake(fake)
    registration.reset_registrations()
    code = run(["classify", str(_photo(tmp_path)), "--device", "npu", "--model", "colours", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0
    assert out["model"] == "colours-qdq"
    assert out["placement"]["nodes_per_ep"] == {"QNNExecutionProvider": 3}
    assert out["results"][0]["top"][0]["label"] == "red"
    assert Path(fake.sessions[-1].path).parent.name == "colours-qdq"


def test_a_gpu_lost_mid_run_moves_the_work_to_the_cpu_and_says_so(
    library: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import numpy as np

    def infer(self: object, batch: np.ndarray) -> np.ndarray:
        if self.placement.primary_ep == "DmlExecutionProvider":  # type: ignore[attr-defined]
            raise RuntimeError("DirectML: DXGI_ERROR_DEVICE_REMOVED (0x887A0005)")
        return np.tile([[5.0, 0.0, 0.0, 0.0]], (batch.shape[0], 1))

    monkeypatch.setattr("engines.vision.classifier.ImageClassifier.infer", infer)
    monkeypatch.setattr("engines.vision.classifier.check_contract", _fake_contract)
    monkeypatch.setattr("engines.vision.classifier.ImageClassifier._warmup", lambda self: 0.0)
    monkeypatch.setattr("engines.vision.classifier.IOBINDING_EPS", set())
    runtime.use_fake(directml_laptop(graph_ops=("GlobalAveragePool", "Flatten", "Gemm")))
    code = run(["classify", str(_photo(tmp_path)), "--device", "gpu", "--model", "colours", "--json"])
    captured = capsys.readouterr()
    out = json.loads(captured.out)
    assert code == 0
    assert out["placement"]["active_eps"] == ["CPUExecutionProvider"]
    assert out["results"][0]["top"][0]["label"] == "red"
    assert "0x887A0005" in " ".join(out["device_switches"])
    assert "0x887A0005" in captured.err
    assert HEALTH.is_failed("DmlExecutionProvider")
    # Strict mode does not move: the user said it must run on the GPU.
    HEALTH.reset()
    runtime.use_fake(directml_laptop(graph_ops=("GlobalAveragePool", "Flatten", "Gemm")))
    code = run(["classify", str(_photo(tmp_path)), "--device", "gpu", "--strict", "--model", "colours"])
    assert code == 2
    assert "0x887A0005" in capsys.readouterr().err


def _fake_contract(session: object, spec: object) -> object:
    from engines.vision.classifier import _Contract

    return _Contract("pixels", "scores", __import__("numpy").float32, None)


def test_without_an_npu_the_float_model_runs_on_the_cpu(
    library: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = run(["classify", str(_photo(tmp_path)), "--device", "npu", "--model", "colours", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0
    assert out["model"] == "colours"
    assert out["placement"]["fell_back"] is True
    assert out["results"][0]["top"][0]["label"] == "red"


def test_a_model_folder_path_is_used_as_given(
    library: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    copy = tmp_path / "mine"
    shutil.copytree(library / "colours", copy)
    assert run(["classify", str(_photo(tmp_path)), "--model", str(copy), "--json", "--device", "cpu"]) == 0
    assert json.loads(capsys.readouterr().out)["model_folder"] == str(copy)


def test_progress_line_appears_only_after_a_while_and_ends_at_the_total() -> None:
    import io

    from app.commands.classify import FolderProgress

    quiet = io.StringIO()
    slow_to_start = FolderProgress(3, quiet, after_s=60)
    for _ in range(3):
        slow_to_start(None)
    slow_to_start.close()
    assert quiet.getvalue() == ""

    stream = io.StringIO()
    progress = FolderProgress(4, stream, after_s=0, every_s=60)
    for _ in range(4):
        progress(None)
    progress.close()
    lines = stream.getvalue().splitlines()
    assert lines[0].startswith("classified 1/4 photos (")  # the first one shows, then at most every 60 s
    assert lines[-1].startswith("classified 4/4 photos (")  # the last one always shows
    assert len(lines) == 2


def test_a_folder_shows_progress_on_stderr_but_never_with_json(
    library: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from app.commands import classify

    monkeypatch.setattr(classify, "PROGRESS_AFTER_S", 0.0)
    folder = tmp_path / "photos"
    folder.mkdir()
    for i in range(3):
        Image.new("RGB", (32, 32), (240, 0, i)).save(folder / f"{i}.png")
    assert run(["classify", str(folder), "--device", "cpu", "--model", "colours"]) == 0
    assert "classified 3/3 photos" in capsys.readouterr().err
    assert run(["classify", str(folder), "--device", "cpu", "--model", "colours", "--json"]) == 0
    captured = capsys.readouterr()
    assert "classified" not in captured.err
    assert len(json.loads(captured.out)["results"]) == 3

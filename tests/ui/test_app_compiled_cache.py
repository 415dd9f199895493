"""The app opens a classifier exactly as the CLI does: on an NPU choice the QDQ variant and the
compiled-model cache, so the second start loads the compiled model instead of compiling again, and
the Settings view lists the entry the app itself made. QNN is faked at the runtime boundary."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from PIL import Image

from app import paths
from app.cli import run
from tests.unit.fake_qnn import FakeQnnOrt
from tests.unit.tiny_models import colour_library_with_qdq

TIMEOUT = 60_000


@pytest.fixture
def library(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    root = colour_library_with_qdq(tmp_path / "bundled")
    monkeypatch.setenv("NPU_STUDIO_BUNDLED_MODELS", str(root))
    # The fake session runs no maths: answer as the real model would for a red photo.
    monkeypatch.setattr(
        "engines.vision.classifier.ImageClassifier.infer",
        lambda self, batch: np.tile([[5.0, 0.0, 0.0, 0.0]], (batch.shape[0], 1)),
    )
    monkeypatch.setattr("engines.vision.classifier.check_contract", _contract)
    monkeypatch.setattr("engines.vision.classifier.IOBINDING_EPS", set())
    yield root


def _contract(session: object, spec: object) -> object:
    from engines.vision.classifier import _Contract

    return _Contract("pixels", "scores", np.float32, None)


def _classify_once(studio: Any, qtbot: Any, photo: Path) -> None:
    studio.settings.classifier = "colours"
    studio.choice_model.set_text("npu")
    view = studio.classify_view
    view.classify_paths([str(photo)])
    qtbot.waitUntil(lambda: not view.busy and bool(view.batch.results.results), timeout=TIMEOUT)
    assert "red" in view.result_panel.title.text()


def test_the_second_app_start_loads_the_compiled_model_like_the_cli(
    make_studio: Callable[..., Any],
    qtbot: Any,
    library: Path,
    tmp_path: Path,
    fake_runtime: Callable[[FakeQnnOrt], FakeQnnOrt],
    capsys: pytest.CaptureFixture[str],
) -> None:
    fake = fake_runtime(FakeQnnOrt())
    photo = tmp_path / "red.png"
    Image.new("RGB", (32, 32), (240, 0, 0)).save(photo)

    first = make_studio()
    _classify_once(first, qtbot, photo)
    assert len(fake.compiles) == 1, "the first start compiles for the NPU"
    assert Path(fake.compiles[0]["source"]).parent.name == "colours-qdq", "the NPU gets the QDQ variant"
    assert first.shutdown()

    second = make_studio()
    _classify_once(second, qtbot, photo)
    assert len(fake.compiles) == 1, "the second start loads the compiled model: no compile"
    [entry] = [e for e in (paths.compiled_cache_dir()).iterdir() if e.is_dir()]
    assert fake.loads[-1] == str(entry / "model_ctx.onnx")

    # Settings lists the entry the app made.
    view = second.settings_view
    with qtbot.waitSignal(second.settings_host.cache_listed, timeout=TIMEOUT):
        second.window.show_view("settings")
    assert view.cache.table.rowCount() == 1
    assert view.cache.table.item(0, 0).text() == "model.onnx" and view.cache.table.item(0, 1).text() == "QNN"

    # The CLI finds the same entry: no compile either.
    assert run(["classify", str(photo), "--device", "npu", "--model", "colours", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["model"] == "colours-qdq" and out["compiled_cache"]["status"] == "hit"
    assert len(fake.compiles) == 1

"""The app meets hostile model folders through its hosts: a classifier whose results would be wrong, a
genai config that asks for options off the allow-list or names tokenizer files outside its folder, and
chat text or options the runtime would misread. Each ends as the host's `failed` with the reason
(the same rule as the CLI), never a result on screen."""

from __future__ import annotations

import json
import math
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

from app.hosts.chat import ChatHost
from app.hosts.jobs import Host
from app.hosts.vision import VisionHost
from engines.errors import StudioError
from engines.types import DeviceChoice
from tests.unit.tiny_models import colour_classifier

TIMEOUT = 120_000


@pytest.fixture
def hosts() -> Iterator[list[Host]]:
    made: list[Host] = []
    yield made
    for host in made:
        assert host.shutdown(), f"{host.qthread.objectName()} did not stop"


def _nan_bias(folder: Path) -> None:
    model = onnx.load(str(folder / "model.onnx"))
    for index, tensor in enumerate(model.graph.initializer):
        if tensor.name == "B":
            model.graph.initializer[index].CopyFrom(numpy_helper.from_array(np.full(4, math.nan, np.float32), "B"))
    onnx.save(model, str(folder / "model.onnx"))


def _manifest(folder: Path, **classifier: Any) -> None:
    data = json.loads((folder / "manifest.json").read_text(encoding="utf-8"))
    data["classifier"].update(classifier)
    (folder / "manifest.json").write_text(json.dumps(data), encoding="utf-8")


@pytest.mark.parametrize(
    ("name", "words"),
    [("nan", "not a number"), ("probabilities", "says it outputs probabilities"), ("std", "must be above 0")],
)
def test_the_classify_view_never_gets_a_wrong_result(
    name: str, words: str, qtbot: Any, hosts: list[Host], tmp_path: Path
) -> None:
    folder = colour_classifier(tmp_path / "wrong")
    if name == "nan":
        _nan_bias(folder)
    elif name == "probabilities":
        _manifest(folder, output_kind="probabilities")
    else:
        _manifest(folder, std=[0, 0, 0])
    photo = tmp_path / "red.png"
    from PIL import Image

    Image.new("RGB", (16, 16), (240, 0, 0)).save(photo)
    host = VisionHost()
    hosts.append(host)
    results: list[Any] = []
    host.classified.connect(results.append)
    with qtbot.waitSignal(host.failed, timeout=TIMEOUT) as failed:
        host.classify([str(photo)], folder, DeviceChoice.parse("cpu"))
    error = failed.args[0]
    assert isinstance(error, StudioError) and words in error.user_text()
    assert results == []


def _genai(tiny_llm: Path, tmp_path: Path) -> Path:
    folder = tmp_path / "llm"
    shutil.copytree(tiny_llm, folder)
    return folder


def _edit_config(folder: Path, key: str, value: Any) -> None:
    config = json.loads((folder / "genai_config.json").read_text(encoding="utf-8"))
    config["model"]["decoder"]["session_options"][key] = value
    (folder / "genai_config.json").write_text(json.dumps(config), encoding="utf-8")


@pytest.mark.parametrize("case", ["profiling", "threads", "tiktoken"])
def test_the_chat_view_refuses_a_hostile_genai_folder(
    case: str, qtbot: Any, hosts: list[Host], tiny_llm: Path, tmp_path: Path
) -> None:
    folder = _genai(tiny_llm, tmp_path)
    if case == "profiling":
        _edit_config(folder, "enable_profiling", str(tmp_path / "prof"))
        words = "enable_profiling"
    elif case == "threads":
        _edit_config(folder, "intra_op_num_threads", 1000)
        words = "intra_op_num_threads = 1000"
    else:
        (folder / "tokenizer_module.json").write_text(json.dumps({"tiktoken_file": "../secret"}), encoding="utf-8")
        words = "tiktoken_file"
    host = ChatHost()
    hosts.append(host)
    with qtbot.waitSignal(host.failed, timeout=TIMEOUT) as failed:
        host.load(folder, DeviceChoice.parse("cpu"))
    assert words in failed.args[0].user_text()
    assert not (tmp_path / "prof").exists() and not list(tmp_path.glob("prof*"))


@pytest.mark.parametrize(
    ("text", "options", "words"),
    [
        ("hello\x00 and the rest", {}, "NUL character"),
        ("hi", {"top_k": 2**40}, "top_k"),
        ("hi", {"seed": 2**31}, "seed"),
    ],
)
def test_the_chat_view_refuses_text_and_options_the_runtime_would_misread(
    text: str, options: dict[str, Any], words: str, qtbot: Any, hosts: list[Host], tiny_llm: Path
) -> None:
    host = ChatHost()
    hosts.append(host)
    with qtbot.waitSignal(host.model_loaded, timeout=TIMEOUT):
        host.load(tiny_llm, DeviceChoice.parse("cpu"))
    with qtbot.waitSignal(host.failed, timeout=TIMEOUT) as failed:
        host.generate("send", 1, text, [], "", {"max_new_tokens": 2, **options})
    assert words in failed.args[0].user_text()

"""Wrong results are never shown as right: a classifier whose output breaks the contract (no batch axis,
scores that do not match the labels) or whose numbers are wrong (NaN, infinity, 'probabilities' that
are not) is refused with the reason by `classify --model` and by `models import` alike, and nothing is
printed as a result."""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper
from PIL import Image

from app import paths
from app.cli import run
from tests.reliability.conftest import Recorder
from tests.unit.tiny_models import classifier_section, colour_classifier, edit_manifest

CATEGORY = "Wrong results"
Mutation = Callable[[Path], None]



def _classifier(edit: Callable[[dict[str, object]], None]) -> Mutation:
    def mutate(folder: Path) -> None:
        edit_manifest(folder, lambda data: edit(classifier_section(data)))

    return mutate


def _bias(values: list[float]) -> Mutation:
    def mutate(folder: Path) -> None:
        model = onnx.load(str(folder / "model.onnx"))
        for index, tensor in enumerate(model.graph.initializer):
            if tensor.name == "B":
                model.graph.initializer[index].CopyFrom(numpy_helper.from_array(np.array(values, np.float32), "B"))
        onnx.save(model, str(folder / "model.onnx"))

    return mutate


def _no_batch_axis(folder: Path) -> None:
    """The scores are averaged over the batch: output shape [4] whatever the number of photos."""
    model = onnx.load(str(folder / "model.onnx"))
    graph = model.graph
    graph.node[-1].output[0] = "per_image"
    graph.node.append(helper.make_node("ReduceMean", ["per_image"], ["scores"], keepdims=0, axes=[0]))
    del graph.output[:]
    graph.output.append(helper.make_tensor_value_info("scores", onnx.TensorProto.FLOAT, [4]))
    model.opset_import[0].version = 17
    onnx.save(model, str(folder / "model.onnx"))


def _symbolic_classes_fewer_labels(folder: Path) -> None:
    """The model hides its class count (a symbolic dimension) and has one label fewer than scores."""
    model = onnx.load(str(folder / "model.onnx"))
    dims = model.graph.output[0].type.tensor_type.shape.dim
    dims[1].ClearField("dim_value")
    dims[1].dim_param = "classes"
    onnx.save(model, str(folder / "model.onnx"))
    (folder / "labels.txt").write_text("red\ngreen\nblue\n", encoding="utf-8")


CASES: list[tuple[str, Mutation, str]] = [
    ("output without a batch axis (scores averaged over the photos)", _no_batch_axis, "no batch axis"),
    ("class count hidden by a symbolic dimension, one label short", _symbolic_classes_fewer_labels,
     "has 4 classes but there are 3 labels"),
    ("manifest std [0, 0, 0] (divides by zero)", _classifier(lambda s: s.update(std=[0, 0, 0])), "must be above 0"),
    ("manifest std negative", _classifier(lambda s: s.update(std=[255, -1, 255])), "must be above 0"),
    ("manifest mean NaN", _classifier(lambda s: s.update(mean=["nan", 0, 0])), "finite"),
    ("manifest std infinite", _classifier(lambda s: s.update(std=["inf", 1, 1])), "finite"),
    ("manifest std so small the pixels overflow to infinity",
     _classifier(lambda s: s.update(std=[1e-45, 1e-45, 1e-45])), "not a number (NaN or infinity)"),
    ("model bias NaN (every score NaN)", _bias([math.nan] * 4), "not a number (NaN or infinity)"),
    ("model bias infinite for one class", _bias([math.inf, 0, 0, 0]), "not a number (NaN or infinity)"),
    ("'probabilities' that are logits", _classifier(lambda s: s.update(output_kind="probabilities")),
     "says it outputs probabilities"),
    ("'probabilities' above 1", lambda f: (_bias([1.5, 0.0, 0.0, 0.0])(f),
     _classifier(lambda s: s.update(output_kind="probabilities", std=[1e9, 1e9, 1e9]))(f)),
     "says it outputs probabilities"),
]  # fmt: skip


def _photos(tmp_path: Path, count: int) -> list[str]:
    made = []
    for index, colour in enumerate([(240, 0, 0), (0, 240, 0), (0, 0, 240)][:count]):
        path = tmp_path / f"photo{index}.png"
        Image.new("RGB", (16, 16), colour).save(path)
        made.append(str(path))
    return made


@pytest.mark.parametrize("count", [1, 2], ids=["one photo", "two photos"])
@pytest.mark.parametrize(("name", "mutate", "words"), CASES, ids=[c[0] for c in CASES])
def test_classify_refuses_a_model_whose_results_would_be_wrong(
    name: str, mutate: Mutation, words: str, count: int, tmp_path: Path, capsys: pytest.CaptureFixture[str],
    reliability: Recorder,
) -> None:  # fmt: skip
    folder = colour_classifier(tmp_path / "wrong")
    mutate(folder)
    code = run(["classify", *_photos(tmp_path, count), "--model", str(folder), "--device", "cpu"])
    captured = capsys.readouterr()
    err = captured.err.strip().splitlines()[-1] if captured.err.strip() else ""
    reliability.record(CATEGORY, f"classify --model, {count} photo{'s' if count > 1 else ''}: {name}",
                       "refused with the reason; no score printed", err)  # fmt: skip
    assert code == 2, captured.out + captured.err
    assert words in err, err
    assert "%" not in captured.out and "nan" not in captured.out.lower()
    assert "zip()" not in err and "failed:" not in err


@pytest.mark.parametrize(("name", "mutate", "words"), CASES[::2], ids=[c[0] for c in CASES[::2]])
def test_models_import_refuses_the_same_models(
    name: str, mutate: Mutation, words: str, tmp_path: Path, capsys: pytest.CaptureFixture[str],
    reliability: Recorder,
) -> None:  # fmt: skip
    folder = colour_classifier(tmp_path / "wrong")
    mutate(folder)
    code = run(["models", "import", str(folder)])
    err = capsys.readouterr().err.strip().splitlines()[-1]
    reliability.record(CATEGORY, f"models import: {name}", "refused; nothing added to the library", err)
    assert code == 2, err
    assert words in err
    assert not [p for p in paths.user_models_dir().iterdir() if not p.name.startswith(".")]


def test_true_probabilities_are_shown(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], reliability: Recorder
) -> None:
    """Control: a model that ends in Softmax and says 'probabilities' classifies."""
    folder = colour_classifier(tmp_path / "softmax")
    model = onnx.load(str(folder / "model.onnx"))
    model.graph.node[-1].output[0] = "logits"
    model.graph.node.append(helper.make_node("Softmax", ["logits"], ["scores"], axis=-1))
    onnx.save(model, str(folder / "model.onnx"))
    _classifier(lambda s: s.update(output_kind="probabilities"))(folder)
    code = run(["classify", *_photos(tmp_path, 2), "--model", str(folder), "--device", "cpu"])
    out = capsys.readouterr().out
    tops = [line.split()[1] for line in out.splitlines() if line.startswith("   ") and "%" in line][::4]
    reliability.record(CATEGORY, "classify --model: true probabilities (a Softmax output)", "classified",
                       f"top classes: {tops}")  # fmt: skip
    assert code == 0 and tops == ["red", "green"]

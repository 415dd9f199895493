"""Every path a model folder names stays inside it, in every command: `quantize` (model file, labels,
external data, the output named after the manifest), the chat tokenizer's own files
(`tokenizer_module.json`, symlinked vocabularies) and the library's names. Each escape is refused
before the file outside is read (or, for a name, the name is made safe), and nothing is written
outside the library."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from PIL import Image

from app import paths
from app.cli import run
from tests.reliability.conftest import Recorder
from tests.reliability.test_untrusted_models import SECRET, _externalize, _secret
from tests.unit.tiny_models import classifier_section, colour_classifier, edit_manifest

CATEGORY = "Untrusted model files"
Mutation = Callable[[Path, Path], None]


def _cli(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = run(args)
    lines = [line for line in capsys.readouterr().err.splitlines() if not line.startswith(("Importing ", "Quantiz"))]
    return code, "\n".join(lines).strip()




@pytest.fixture
def photos(tmp_path: Path) -> Path:
    folder = tmp_path / "calibration"
    folder.mkdir()
    for name, colour in (("red", (240, 0, 0)), ("green", (0, 240, 0)), ("blue", (0, 0, 240))):
        Image.new("RGB", (16, 16), colour).save(folder / f"{name}.png")
    return folder


# --- quantize MODEL ----------------------------------------------------------------------------------


def _q_labels_parent(folder: Path, outside: Path) -> None:
    _secret(outside)
    edit_manifest(folder, lambda m: classifier_section(m).update(labels="../outside/secret.txt"))


def _q_labels_absolute(folder: Path, outside: Path) -> None:
    secret = _secret(outside)
    edit_manifest(folder, lambda m: classifier_section(m).update(labels=str(secret)))


def _q_labels_symlink(folder: Path, outside: Path) -> None:
    secret = _secret(outside)
    (folder / "labels.txt").unlink()
    os.symlink(secret, folder / "labels.txt")


def _q_model_absolute(folder: Path, outside: Path) -> None:
    outside.mkdir(parents=True, exist_ok=True)
    shutil.copy2(folder / "model.onnx", outside / "model.onnx")
    edit_manifest(folder, lambda m: m.update(files=[{"path": str(outside / "model.onnx")}, {"path": "labels.txt"}]))


def _q_model_parent(folder: Path, outside: Path) -> None:
    outside.mkdir(parents=True, exist_ok=True)
    shutil.copy2(folder / "model.onnx", outside / "model.onnx")
    edit_manifest(folder, lambda m: m.update(files=[{"path": "../outside/model.onnx"}, {"path": "labels.txt"}]))


def _q_external_outside(folder: Path, outside: Path) -> None:
    _externalize(folder / "model.onnx", "W", "../outside/weights.bin", outside / "weights.bin")


QUANTIZE_CASES: list[tuple[str, Mutation, str]] = [
    ("labels file '../outside/secret.txt'", _q_labels_parent, "points outside the model's folder"),
    ("labels file at an absolute path", _q_labels_absolute, "points to an absolute path"),
    ("labels.txt is a symlink to a secret file", _q_labels_symlink, "is a link to a file outside"),
    ("manifest names the model at an absolute path", _q_model_absolute, "points to an absolute path"),
    ("manifest names '../outside/model.onnx'", _q_model_parent, "points outside the model's folder"),
    ("model's external data outside the folder", _q_external_outside, "points outside the model's folder"),
]


@pytest.mark.parametrize(("name", "mutate", "words"), QUANTIZE_CASES, ids=[c[0] for c in QUANTIZE_CASES])
def test_quantize_refuses_a_folder_that_names_files_outside_it(
    name: str, mutate: Mutation, words: str, tmp_path: Path, photos: Path, capsys: pytest.CaptureFixture[str],
    reliability: Recorder,
) -> None:  # fmt: skip
    folder = colour_classifier(tmp_path / "evil")
    mutate(folder, tmp_path / "outside")
    out = tmp_path / "out-qdq"
    code, err = _cli(["quantize", str(folder), "--calibration", str(photos), "--runs", "1", "--out", str(out)], capsys)
    reliability.record(CATEGORY, f"quantize: {name}", "refused; nothing read from outside, nothing written", err)
    assert code == 2, err
    assert words in err and "Traceback" not in err and SECRET not in err
    assert not out.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["evil", "outside", "calibration"])


def test_quantize_given_an_onnx_file_whose_external_data_is_outside(
    tmp_path: Path, photos: Path, capsys: pytest.CaptureFixture[str], reliability: Recorder
) -> None:
    folder = colour_classifier(tmp_path / "evil", manifest=False)
    _externalize(folder / "model.onnx", "W", "../outside/weights.bin", tmp_path / "outside" / "weights.bin")
    code, err = _cli(["quantize", str(folder / "model.onnx"), "--calibration", str(photos), "--runs", "1"], capsys)
    reliability.record(CATEGORY, "quantize: a bare .onnx file with external data outside its folder",
                       "refused before the model is loaded", err)  # fmt: skip
    assert code == 2, err
    assert "points outside the model's folder" in err


@pytest.mark.parametrize("chosen", ["../../escaped", "/tmp/absolute-escape", "..\\..\\windows-escape", "a/b/../../c"])
def test_quantize_never_turns_a_manifest_name_into_a_path(
    chosen: str, tmp_path: Path, photos: Path, capsys: pytest.CaptureFixture[str], reliability: Recorder
) -> None:
    folder = colour_classifier(tmp_path / "src")
    edit_manifest(folder, lambda m: m.update(name=chosen))
    code, err = _cli(["quantize", str(folder), "--calibration", str(photos), "--runs", "1", "--json"], capsys)
    made = [p for p in paths.user_models_dir().iterdir() if p.is_dir()]
    reliability.record(CATEGORY, f"quantize: manifest name {chosen!r}, default output",
                       "the output stays in the user's models folder under a safe name",
                       f"exit {code}; wrote {[p.name for p in made]}")  # fmt: skip
    assert code == 0, err
    assert len(made) == 1 and made[0].name.endswith("-qdq") and "/" not in made[0].name and ".." not in made[0].name
    assert sorted(p.name for p in tmp_path.iterdir()) == ["calibration", "src"]
    assert not Path("/tmp/absolute-escape-qdq").exists() and not (tmp_path.parent / "escaped-qdq").exists()


# --- chat --model: files the tokenizer opens itself ------------------------------------------------


@pytest.fixture
def genai_copy(tiny_llm: Path, tmp_path: Path) -> Path:
    folder = tmp_path / "evil-llm"
    shutil.copytree(tiny_llm, folder)
    return folder


def _module(value: object, key: str = "tiktoken_file") -> Mutation:
    def mutate(folder: Path, outside: Path) -> None:
        secret = _secret(outside)
        shown = str(value).replace("SECRET", str(secret))
        (folder / "tokenizer_module.json").write_text(json.dumps({key: shown}), encoding="utf-8")

    return mutate


def _linked_extra_file(name: str) -> Mutation:
    def mutate(folder: Path, outside: Path) -> None:
        secret = _secret(outside)
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        os.symlink(secret, folder / name)

    return mutate


def _config_vocab_file(folder: Path, outside: Path) -> None:
    _secret(outside)
    config = json.loads((folder / "tokenizer_config.json").read_text(encoding="utf-8"))
    config["vocab_file"] = "../outside/secret.txt"
    (folder / "tokenizer_config.json").write_text(json.dumps(config), encoding="utf-8")


def _module_symlink(folder: Path, outside: Path) -> None:
    outside.mkdir(parents=True, exist_ok=True)
    (outside / "module.json").write_text('{"tiktoken_file": "x"}', encoding="utf-8")
    os.symlink(outside / "module.json", folder / "tokenizer_module.json")


TOKENIZER_CASES: list[tuple[str, Mutation, str]] = [
    ("tokenizer_module.json tiktoken_file at an absolute path", _module("SECRET"), "points to an absolute path"),
    ("tokenizer_module.json tiktoken_file '../outside/secret.txt'", _module("../outside/secret.txt"), "with '..'"),
    ("tokenizer_module.json names a missing file", _module("nowhere.tiktoken"), "is missing"),
    ("tokenizer_module.json is a symlink out of the folder", _module_symlink, "is a link to a file outside"),
    ("tokenizer_config.json vocab_file '../outside/secret.txt'", _config_vocab_file, "with '..'"),
    ("vocab.json is a symlink to a secret file", _linked_extra_file("vocab.json"), "is a link to a file outside"),
    ("a symlink out of the folder in a subfolder", _linked_extra_file("sp/spiece.model"), "a link to a file outside"),
]


@pytest.mark.parametrize(("name", "mutate", "words"), TOKENIZER_CASES, ids=[c[0] for c in TOKENIZER_CASES])
def test_chat_refuses_tokenizer_files_outside_the_folder(
    name: str, mutate: Mutation, words: str, genai_copy: Path, tmp_path: Path, native_guard: object,
    capsys: pytest.CaptureFixture[str], reliability: Recorder,
) -> None:  # fmt: skip
    mutate(genai_copy, tmp_path / "outside")
    code, err = _cli(["chat", "--model", str(genai_copy), "--prompt", "hi", "--device", "cpu"], capsys)
    reliability.record(CATEGORY, f"chat --model: {name}", "refused before onnxruntime-genai reads it", err)
    assert code == 2, err
    assert words in err and SECRET not in err and len(err.splitlines()) == 1
    assert native_guard.calls == []  # type: ignore[attr-defined]


def test_models_import_refuses_a_tokenizer_module_outside(
    genai_copy: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], reliability: Recorder
) -> None:
    _module("../outside/secret.txt")(genai_copy, tmp_path / "outside")
    code, err = _cli(["models", "import", str(genai_copy)], capsys)
    reliability.record(CATEGORY, "models import: tokenizer_module.json names '../outside/secret.txt'",
                       "refused; nothing added to the library", err)  # fmt: skip
    assert code == 2, err
    assert "with '..'" in err
    assert not [p for p in paths.user_models_dir().iterdir() if not p.name.startswith(".")]


# --- the library: a manifest's name is a label, never the key -------------------------------------


def test_a_manifest_name_never_picks_which_folder_is_removed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], reliability: Recorder
) -> None:
    victim = colour_classifier(tmp_path / "victim")
    impostor = colour_classifier(tmp_path / "impostor")
    assert run(["models", "import", str(victim)]) == 0 and run(["models", "import", str(impostor)]) == 0
    library = paths.user_models_dir()
    edit_manifest(library / "impostor", lambda m: m.update(name="victim"))  # edited after the import
    capsys.readouterr()
    assert run(["models", "list", "--json"]) == 0
    names = sorted(e["name"] for e in json.loads(capsys.readouterr().out) if e["folder"].startswith(str(library)))
    assert run(["models", "remove", "impostor"]) == 0
    capsys.readouterr()
    left = sorted(p.name for p in library.iterdir() if not p.name.startswith("."))
    reliability.record(CATEGORY, "models list/remove: an imported manifest renamed to another model's name",
                       "the library names models by their folder; removing one removes only that folder",
                       f"listed {names}; after removing 'impostor': {left}")  # fmt: skip
    assert names == ["impostor", "victim"] and left == ["victim"]

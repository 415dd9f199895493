"""The model library with the real demo models, through the CLI as a user runs it."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from engines.chat.loaded import ChatModel
from engines.chat.types import ChatOptions
from engines.models.library import ModelFile, folder_digest
from engines.models.manifest import read_manifest
from engines.types import DeviceChoice

pytestmark = pytest.mark.e2e

QUESTION = "What is the capital of France? Answer in one sentence."  # asked bare it is a near-tie in fp32


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "app", *args], capture_output=True, text=True, timeout=300)


def _digest(folder: Path) -> str:
    return folder_digest(ModelFile(f.path, f.size or 0, f.sha256 or "") for f in read_manifest(folder).files)


def test_list_shows_the_demo_models_with_size_sha256_and_devices(
    demo_classifier: Path, demo_chat_model: Path
) -> None:
    result = cli("models", "list")
    assert result.returncode == 0, result.stderr
    lines = {line.split()[0]: line for line in result.stdout.splitlines() if line.strip()}
    classifier = lines["efficientnet-lite0"].split()
    assert classifier[1:4] == ["image-classifier", "bundled", "18.7"]  # kind, origin, size (MB)
    assert _digest(demo_classifier)[:12] in classifier and "cpu,gpu,npu" in classifier
    chat = lines["smollm2-135m-instruct"].split()
    assert chat[1:3] == ["genai-llm", "bundled"] and _digest(demo_chat_model)[:12] in chat
    assert "int4" in chat and "cpu" in chat and "Apache-2.0" in chat and "fits" in chat

    listed = {m["name"]: m for m in json.loads(cli("models", "list", "--json").stdout)}
    demo = listed["smollm2-135m-instruct"]
    assert demo["sha256"] == _digest(demo_chat_model) and demo["read_only"] is True
    assert demo["size_bytes"] == sum(p.stat().st_size for p in demo_chat_model.iterdir() if p.name != "manifest.json")
    assert demo["devices"] == ["cpu"] and demo["context_length"] == 8192
    assert demo["fit"]["kv_cache_bytes"] == 30 * 3 * 64 * 2 * 2048 * 4  # layers x KV heads x head x K,V x ctx x fp32


def test_verify_rehashes_the_demo_models(demo_classifier: Path, demo_chat_model: Path) -> None:
    result = cli("models", "verify")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "efficientnet-lite0: ok (2 files" in result.stdout
    assert "smollm2-135m-instruct: ok (6 files" in result.stdout


def test_bundled_models_cannot_be_removed(demo_chat_model: Path) -> None:
    result = cli("models", "remove", "smollm2-135m-instruct")
    assert result.returncode == 2 and "read-only" in result.stderr
    assert (demo_chat_model / "model.onnx.data").is_file()


def test_an_imported_copy_of_the_demo_chat_model_can_chat(demo_chat_model: Path, tmp_path: Path) -> None:
    elsewhere = shutil.copytree(demo_chat_model, tmp_path / "downloads" / "SmolLM2 copy")
    result = cli("models", "import", str(elsewhere), "--name", "my-smollm", "--json")
    assert result.returncode == 0, result.stderr
    imported = json.loads(result.stdout)
    assert imported["origin"] == "yours" and imported["kind"] == "genai-llm"
    assert imported["sha256"] == _digest(demo_chat_model)  # same bytes as the bundled model
    assert imported["licence"] == "Apache-2.0" and imported["precision"] == "int4" and imported["devices"] == ["cpu"]
    folder = Path(imported["folder"])
    assert folder.parent == Path(os.environ["NPU_STUDIO_HOME"]) / "data" / "models" and folder.is_dir()
    shutil.rmtree(elsewhere)  # the library holds its own copy

    answer = cli("chat", "--model", "my-smollm", "--prompt", QUESTION, "--device", "cpu", "--json")
    assert answer.returncode == 0, answer.stderr
    assert "Paris" in json.loads(answer.stdout)["answer"]

    model = ChatModel.load(folder, DeviceChoice.parse("cpu"))
    conversation = model.new_conversation(options=ChatOptions(do_sample=False, max_new_tokens=24))
    conversation.send(QUESTION)
    assert "Paris" in conversation.messages[-1].content

    verify = cli("models", "verify", "my-smollm")
    assert verify.returncode == 0 and "my-smollm: ok (6 files" in verify.stdout
    fit = cli("models", "fit", "my-smollm", "--context", "8192")
    assert fit.returncode == 0 and fit.stdout.startswith("my-smollm: Fits: needs ~")
    assert "KV cache 377.5 MB for 8,192 tokens" in fit.stdout
    assert cli("models", "remove", "my-smollm").returncode == 0
    assert not folder.exists()


def test_an_imported_onnx_classifier_classifies_through_the_cli(
    demo_classifier: Path, samples: Path, tmp_path: Path
) -> None:
    src = tmp_path / "from-elsewhere"
    src.mkdir()
    shutil.copy(demo_classifier / "model.onnx", src / "effnet.onnx")
    shutil.copy(demo_classifier / "labels.txt", src / "classes.txt")
    result = cli("models", "import", str(src / "effnet.onnx"), "--labels", str(src / "classes.txt"),
                 "--mean", "127", "127", "127", "--std", "128", "128", "128", "--resize", "256", "--resample",
                 "bicubic", "--licence", "Apache-2.0", "--json")
    assert result.returncode == 0, result.stderr
    imported = json.loads(result.stdout)
    assert imported["name"] == "effnet" and imported["precision"] == "fp32"
    spec = read_manifest(Path(imported["folder"])).classifier or {}
    assert spec["input_size"] == [224, 224] and spec["layout"] == "NCHW" and spec["output_kind"] == "logits"
    assert spec["num_classes"] == 1000 and spec["input"] == "input" and spec["output"] == "logits"
    answer = cli("classify", str(samples / "coffee.png"), "--model", "effnet", "--device", "cpu", "--json")
    assert answer.returncode == 0, answer.stderr
    assert json.loads(answer.stdout)["results"][0]["top"][0]["label"] == "espresso"

"""Adding a model folder found on this machine to the library by reference (engines/models/reference.py):
hashed with progress and a cancel, checked like any untrusted folder, refused once its files change."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from app import paths
from app.cli import run
from engines.chat import config_policy
from engines.errors import CancelledError, ModelError
from engines.models import trial
from engines.models.found import name_for
from engines.models.library import find_model, remove_model, scan_library, verify_model
from engines.models.lookup import locate_model
from engines.models.native import refuse_library_keys
from engines.models.reference import add_found_folder, add_reference
from engines.models.reference_check import ReferenceChangedError
from engines.types import CancelToken
from tests.fixtures.machine_home import MachineHome
from tests.unit.tiny_models import COLOURS


def _rewrite(path: Path, text: str) -> None:
    """New contents without writing through a hard link (the weights are links to the tiny model)."""
    path.unlink()
    path.write_text(text, encoding="utf-8")


def _user() -> Path:
    return paths.user_models_dir()


def test_a_hub_cache_folder_is_added_by_reference_and_opened_from_there(machine: MachineHome) -> None:
    seen: list[tuple[int, int]] = []
    entry = add_reference(machine.hub_chat, _user(), tool="Hugging Face cache", progress=lambda *p: seen.append(p))
    assert entry.name == "SmolLM2-135M-Instruct-ONNX-cpu" and entry.origin == "by reference" and entry.usable
    assert entry.reference == os.path.realpath(machine.hub_chat)
    assert sorted(f.path for f in entry.files) == sorted(p.name for p in machine.hub_chat.iterdir())
    assert seen and seen[-1][0] == seen[-1][1] == entry.size_bytes and seen == sorted(seen)
    assert [p.name for p in (_user() / entry.name).iterdir()] == ["manifest.json"]  # nothing was copied
    located = locate_model(entry.name, paths.model_roots())
    assert located.folder == Path(entry.reference) and located.name == entry.name
    assert verify_model(find_model(entry.name, paths.bundled_models_dir(), _user()).folder).ok


def test_a_changed_file_is_refused_with_a_clear_line(
    machine: MachineHome, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run(["models", "add", str(machine.foundry_cpu), "--name", "foundry-cpu"]) == 0
    out = capsys.readouterr().out
    assert "Added foundry-cpu" in out and f"by reference to {machine.foundry_cpu}" in out
    template = machine.foundry_cpu / "chat_template.jinja"
    _rewrite(template, template.read_text(encoding="utf-8") + "{# changed #}")
    code = run(["chat", "--model", "foundry-cpu", "--device", "cpu", "--prompt", "hi"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1, err
    assert "'foundry-cpu' refers to" in err and "chat_template.jinja:" in err and "does not load it" in err
    entry = next(e for e in scan_library(paths.bundled_models_dir(), _user()) if e.name == "foundry-cpu")
    assert not entry.usable and "chat_template.jinja" in entry.problem
    assert run(["models", "verify", "foundry-cpu"]) == 1
    assert "CHANGED" in capsys.readouterr().out


def test_every_kind_of_change_is_noticed(machine: MachineHome) -> None:
    entry = add_reference(machine.foundry_qnn, _user(), name="qnn")
    folder = Path(entry.reference)
    config = folder / "genai_config.json"
    os.utime(config)  # modified later than it was added
    with pytest.raises(ReferenceChangedError, match="genai_config.json: modified since it was added"):
        locate_model("qnn", paths.model_roots())
    (folder / "extra.txt").write_text("x")
    (folder / "inference_model.json").unlink()
    problems = verify_model(_user() / "qnn").problems
    assert "inference_model.json: missing" in problems
    assert "extra.txt: added to the folder after it was added to the library" in problems


def test_a_same_size_config_edit_with_its_time_put_back_is_refused_before_loading(
    machine: MachineHome, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run(["models", "add", str(machine.foundry_qnn), "--name", "qnn"]) == 0
    capsys.readouterr()
    config = machine.foundry_qnn / "genai_config.json"
    before = config.stat()
    _rewrite(config, config.read_text(encoding="utf-8").replace("burst", "BURST"))  # same size
    os.utime(config, ns=(before.st_atime_ns, before.st_mtime_ns))  # and the same time
    assert config.stat().st_size == before.st_size
    code = run(["chat", "--model", "qnn", "--device", "cpu", "--prompt", "hi"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1, err
    assert "genai_config.json: contents changed (sha256 mismatch)" in err and "does not load it" in err
    entry = next(e for e in scan_library(paths.bundled_models_dir(), _user()) if e.name == "qnn")
    assert not entry.usable and "genai_config.json: contents changed" in entry.problem
    report = verify_model(_user() / "qnn")
    assert not report.ok and report.problems == ("genai_config.json: contents changed (sha256 mismatch)",)


def test_a_big_weight_file_is_hashed_before_loading_only_once_its_inode_or_ctime_moved(
    machine: MachineHome, monkeypatch: pytest.MonkeyPatch
) -> None:
    from engines.models import reference_check

    hashed: list[str] = []
    real_sha256 = reference_check.sha256_file
    monkeypatch.setattr(
        reference_check, "sha256_file",
        lambda path, *rest: hashed.append(Path(path).name) or real_sha256(path, *rest),
    )
    entry = add_reference(machine.foundry_cpu, _user(), name="cpu")
    weights = Path(entry.reference) / "model.onnx.data"
    assert weights.stat().st_size > reference_check.ALWAYS_HASHED_BYTES
    hashed.clear()  # adding it read its entry back (a check of its own)
    assert locate_model("cpu", paths.model_roots()).folder == Path(entry.reference)
    small = sorted(p.name for p in Path(entry.reference).iterdir() if p.name != "model.onnx.data")
    assert sorted(hashed) == small  # configs, tokenizer, template and the graph: hashed; the weights: not
    # a copy in its place (another inode, the same bytes, size and time): hashed, found equal, loaded
    weights.unlink()
    shutil.copy2(machine.foundry_qnn / "model.onnx.data", weights)
    hashed.clear()
    assert locate_model("cpu", paths.model_roots()).folder == Path(entry.reference) and "model.onnx.data" in hashed
    # one byte changed in place, the size kept and the time put back: ctime moved, so it is hashed
    before = weights.stat()
    with open(weights, "r+b") as handle:
        handle.seek(before.st_size // 2)
        byte = handle.read(1)
        handle.seek(before.st_size // 2)
        handle.write(bytes([byte[0] ^ 0xFF]))
    os.utime(weights, ns=(before.st_atime_ns, before.st_mtime_ns))
    with pytest.raises(ReferenceChangedError, match=r"model.onnx.data: contents changed \(sha256 mismatch\)"):
        locate_model("cpu", paths.model_roots())


def test_an_entry_added_before_ctimes_were_recorded_still_compares_size_and_time(machine: MachineHome) -> None:
    entry = add_reference(machine.foundry_cpu, _user(), name="older")
    manifest_path = _user() / "older" / "manifest.json"
    manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
    for item in manifest["files"]:
        del item["ctime_ns"], item["ino"]
    manifest_path.write_text(json.dumps(manifest), encoding="utf-8")
    folder = Path(entry.reference)
    assert locate_model("older", paths.model_roots()).folder == folder
    os.utime(folder / "model.onnx.data")
    with pytest.raises(ReferenceChangedError, match="model.onnx.data: modified since it was added"):
        locate_model("older", paths.model_roots())


def test_removing_a_reference_leaves_its_files(machine: MachineHome) -> None:
    add_reference(machine.foundry_cpu, _user(), name="linked")
    before = sorted(p.name for p in machine.foundry_cpu.iterdir())
    remove_model("linked", paths.bundled_models_dir(), _user())
    assert not (_user() / "linked").exists() and sorted(p.name for p in machine.foundry_cpu.iterdir()) == before


def test_hashing_can_be_cancelled_and_leaves_nothing(machine: MachineHome) -> None:
    token = CancelToken()

    def progress(done: int, total: int) -> None:
        if done > 0:
            token.cancel()

    with pytest.raises(CancelledError):
        add_reference(machine.foundry_cpu, _user(), name="cancelled", progress=progress, cancel=token)
    assert sorted(p.name for p in _user().iterdir()) == []


def test_a_folder_from_another_tool_is_as_untrusted_as_any(machine: MachineHome, tmp_path: Path) -> None:
    folder = machine.foundry_cpu
    (folder / "helper.dll").write_bytes(b"MZ")
    with pytest.raises(ModelError, match="native library"):
        add_reference(folder, _user(), name="dll")
    (folder / "helper.dll").unlink()
    secret = tmp_path / "secret.txt"
    secret.write_text("secret")
    os.symlink(secret, folder / "notes.txt")
    with pytest.raises(ModelError, match="outside the model's folder"):
        add_reference(folder, _user(), name="link")
    (folder / "notes.txt").unlink()
    config = json.loads((folder / "genai_config.json").read_text())
    config["model"]["decoder"]["session_options"]["provider_options"] = [{"qnn": {"profiling_file_path": "/tmp/x"}}]
    _rewrite(folder / "genai_config.json", json.dumps(config))
    with pytest.raises(ModelError, match="profiling_file_path"):
        add_reference(folder, _user(), name="options")
    assert sorted(p.name for p in _user().iterdir()) == []


def test_a_copy_and_a_hugging_face_classifier_are_imports(machine: MachineHome) -> None:
    copied = add_found_folder(machine.foundry_cpu, _user(), copy=True)
    assert copied.name == "smollm2-135m-instruct-generic-cpu-1" and not copied.reference and copied.origin == "yours"
    assert (copied.folder / "model.onnx").is_file()
    vision = add_found_folder(machine.hub_vision, _user())
    assert vision.name == "colour-classifier-ONNX" and vision.kind == "image-classifier" and not vision.reference
    manifest = json.loads((vision.folder / "manifest.json").read_text())
    assert manifest["classifier"]["input_size"] == [8, 8] and manifest["classifier"]["num_classes"] == 4
    assert manifest["classifier"]["mean"] == [127.5, 127.5, 127.5]
    assert (vision.folder / "labels.txt").read_text().split() == list(COLOURS)  # id2label, in index order


def test_names_for_found_folders() -> None:
    hub = Path("/h/.cache/huggingface/hub/models--microsoft--Phi-3.5-mini-instruct-onnx/snapshots/abc")
    assert name_for(hub / "cpu_and_mobile" / "cpu-int4") == "Phi-3.5-mini-instruct-onnx-cpu_and_mobile-cpu-int4"
    foundry = Path("/h/.foundry/cache/models/Microsoft/phi-4-mini-instruct-qnn-npu-2/v2")
    assert name_for(foundry) == "phi-4-mini-instruct-qnn-npu-2"
    assert name_for(Path("/d/models/llama/cpu")) == "llama-cpu"
    assert name_for(Path("/d/models/my model!")) == "my-model"


def test_the_trial_tells_two_hub_snapshots_apart(machine: MachineHome, tmp_path: Path, tiny_llm: Path) -> None:
    key = trial.content_key(machine.hub_chat, trial.CHAT)
    config = json.loads((machine.hub_chat / "genai_config.json").read_text())
    config["search"]["top_k"] = 7
    blob = Path(os.path.realpath(machine.hub_chat / "genai_config.json"))
    _rewrite(blob, json.dumps(config))
    assert trial.content_key(machine.hub_chat, trial.CHAT) != key  # linked files are part of the key


def test_a_reference_chats_after_its_trial(machine: MachineHome, capsys: pytest.CaptureFixture[str]) -> None:
    add_reference(machine.hub_chat, _user(), name="hub-chat")
    code = run(["chat", "--model", "hub-chat", "--device", "cpu", "--prompt", "Hi", "--json", "--max-new-tokens", "3"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert json.loads(captured.out)["stats"]["generated_tokens"] >= 1


# --- the genai config allow-list, widened by the keys real NPU folders carry -----------------------------


def _config(options: list[dict[str, object]]) -> dict[str, object]:
    return {"model": {"decoder": {"session_options": {"provider_options": options}}}}


def test_openvino_npu_and_qnn_genie_keys_pass() -> None:
    config_policy.check_config(_config([{"OpenVINO": {
        "device_type": "NPU", "enable_causallm": "True",
        "load_config": '{"NPU":{"MAX_PROMPT_LEN":"4096","MIN_RESPONSE_LEN":"128"}}',
    }}]))  # fmt: skip
    config_policy.check_config(_config([{"qnn": {
        "genie_model": "True", "enable_htp_shared_memory_allocator": "1", "genie_log_level": "error",
    }}]))  # fmt: skip
    config_policy.check_config(_config([{"qnn": {"backend_type": "gpu", "enable_dx12_shared_memory_allocator": "1"}}]))
    config_policy.check_config(_config([{"QNNExecutionProvider": {"htp_performance_mode": "burst"}}]))


@pytest.mark.parametrize(
    "options",
    [
        {"OpenVINO": {"load_config": '{"NPU":{"CACHE_DIR":"C:/anywhere"}}'}},
        {"OpenVINO": {"load_config": '{"NPU":{"MAX_PROMPT_LEN":"lots"}}'}},
        {"OpenVINO": {"load_config": "not json"}},
        {"OpenVINO": {"cache_dir": "C:/anywhere"}},
        {"qnn": {"backend_type": "C:/evil"}},
        {"VitisAI": {"config_file": "vaip_config.json"}},
    ],
)
def test_other_values_and_keys_stay_refused(options: dict[str, object]) -> None:
    with pytest.raises(ModelError, match="genai_config.json sets"):
        config_policy.check_config(_config([options]))


def test_a_library_key_spelled_as_genai_spells_it_is_refused() -> None:
    with pytest.raises(ModelError, match="asks to load a native library"):
        refuse_library_keys(_config([{"VitisAI": {"external_ep_libray": "evil.dll"}}]), "genai_config.json")

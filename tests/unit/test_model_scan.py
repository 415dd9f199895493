"""The model scan (engines/models/scan.py, found.py, here.py, places.py) on a home laid out as Foundry
Local and the Hugging Face cache leave it (tests/fixtures/machine_home.py), with the tiny chat model."""

from __future__ import annotations

import json
import os
import stat
import sys
import time
from pathlib import Path

import pytest

from engines.errors import ModelError
from engines.models import places as places_module
from engines.models.found import FoundModel, Target
from engines.models.here import NEEDS, RUNS, UNUSABLE, MachineDevices, judge
from engines.models.paths import resolve_inside
from engines.models.places import (
    AI_TOOLKIT,
    AI_TOOLKIT_SETTING,
    FOUNDRY,
    HUGGING_FACE,
    Place,
    ai_toolkit_places,
    default_places,
    hugging_face_cache,
    parse_cache_location,
)
from engines.models.scan import ScanLimits, scan
from engines.runtime.planning import DeviceSet
from engines.types import CPU_EP, DeviceType
from tests.fixtures.machine_home import AITK_MOVED, MachineHome, vscode_user_dir

CPU_ONLY = MachineDevices(DeviceSet.of([]), DeviceSet.of([]))
WITH_QNN = MachineDevices(DeviceSet.of(["QNNExecutionProvider"]), DeviceSet.of(["QNNExecutionProvider"]))


def _scan(limits: ScanLimits | None = None, devices: MachineDevices = CPU_ONLY, extra: tuple[str, ...] = ()) -> object:
    found_places, notes = default_places(extra)
    return scan(found_places, limits, judge=lambda f: judge(f, devices), notes=notes)


def test_the_scan_finds_exactly_the_real_models(machine: MachineHome) -> None:
    report = _scan()
    found = {m.folder: m for m in report.models}
    assert set(found) == machine.real
    assert {b.folder for b in report.broken} >= {machine.broken}
    assert machine.outside_model not in found  # reached only through a link out of the Foundry folder
    by_tool = {p.place.tool: p for p in report.places}
    assert by_tool[FOUNDRY].links_skipped == 1 and by_tool[FOUNDRY].downloading == 1
    assert by_tool[HUGGING_FACE].loops_skipped >= 1
    assert not any(p.stopped for p in report.places)  # the 10,000-file tree fits in the default bounds
    assert by_tool[FOUNDRY].entries > 10_000


def test_what_each_found_folder_is(machine: MachineHome) -> None:
    found = {m.folder: m for m in _scan().models}
    qnn, cpu = found[machine.foundry_qnn], found[machine.foundry_cpu]
    assert (qnn.tool, qnn.publisher, qnn.name) == (FOUNDRY, "Microsoft", "smollm2-135m-instruct-qnn-npu:1")
    assert (qnn.target.ep, qnn.target.device, qnn.target.label) == ("QNNExecutionProvider", "NPU", "QNN NPU")
    assert cpu.target.label == "CPU" and cpu.context_length == 256 and cpu.kind == "genai-llm"
    assert cpu.size_bytes == sum(f.stat().st_size for f in machine.foundry_cpu.iterdir()) and cpu.size_complete
    hub = found[machine.hub_chat]
    assert hub.name == "HuggingFaceTB/SmolLM2-135M-Instruct-ONNX (cpu)" and hub.publisher == "HuggingFaceTB"
    assert hub.licence == "apache-2.0" and "based on HuggingFaceTB/SmolLM2-135M-Instruct" in hub.details
    vision = found[machine.hub_vision]
    assert vision.kind == "image-classifier" and vision.licence == "mit"
    assert "4 classes" in vision.details and "model file onnx/model.onnx" in vision.details


def test_on_this_machine_the_qnn_model_needs_the_qualcomm_npu(machine: MachineHome) -> None:
    found = {m.folder: m for m in _scan().models}
    qnn = found[machine.foundry_qnn]
    assert qnn.verdict == NEEDS
    assert qnn.runs_here.startswith("needs the Qualcomm NPU: not on this machine")
    assert found[machine.foundry_cpu].verdict == RUNS and found[machine.foundry_cpu].runs_here == "runs here on the CPU"
    with_npu = {m.folder: m for m in _scan(devices=WITH_QNN).models}
    assert with_npu[machine.foundry_qnn].runs_here == "runs here on the Qualcomm NPU (QNN NPU)"


def _found(target: Target, *, precompiled: bool = False, problem: str = "") -> FoundModel:
    return FoundModel(Path("/m"), FOUNDRY, "genai-llm", "m", "", target, "int4", 1, 1, True,
                      precompiled=precompiled, problem=problem)  # fmt: skip


def test_the_verdict_comes_from_the_planner_and_the_device_the_config_names() -> None:
    openvino_gpu_only = DeviceSet((("OpenVINOExecutionProvider", DeviceType.GPU), (CPU_EP, DeviceType.CPU)))
    machine = MachineDevices(openvino_gpu_only, openvino_gpu_only)
    npu = judge(_found(Target("OpenVINOExecutionProvider", "NPU")), machine)
    gpu = judge(_found(Target("OpenVINOExecutionProvider", "GPU")), machine)
    assert npu.verdict == NEEDS and npu.runs_here.startswith("needs the Intel NPU: not on this machine")
    assert gpu.verdict == RUNS and "the Intel GPU" in gpu.runs_here
    compiled = judge(_found(Target("QNNExecutionProvider", "NPU"), precompiled=True), CPU_ONLY)
    assert "precompiled nodes run on that device only" in compiled.runs_here
    refused = judge(_found(Target(CPU_EP, "CPU"), problem="it ships a native library (x.dll)"), WITH_QNN)
    assert refused.verdict == UNUSABLE
    assert refused.runs_here == "NPU Studio cannot use it: it ships a native library (x.dll)"


def test_a_config_npu_studio_refuses_is_said_without_loading(machine: MachineHome) -> None:
    config_path = machine.foundry_cpu / "genai_config.json"
    config = json.loads(config_path.read_text())
    config["model"]["decoder"]["session_options"]["custom_ops_library"] = "onnx_custom_ops.dll"
    config_path.unlink()
    config_path.write_text(json.dumps(config))
    found = {m.folder: m for m in _scan().models}
    assert found[machine.foundry_cpu].verdict == UNUSABLE
    assert "asks to load a native library" in found[machine.foundry_cpu].runs_here


def test_bounds_stop_a_huge_tree_and_the_other_places_are_still_scanned(machine: MachineHome) -> None:
    report = _scan(ScanLimits(max_entries=2_000))
    by_tool = {p.place.tool: p for p in report.places}
    assert by_tool[FOUNDRY].stopped == "more than 2,000 entries"
    assert {m.folder for m in report.models} >= {machine.hub_chat, machine.hub_vision}
    crowded = _scan(ScanLimits(max_dir_entries=50))
    # the tree lists 100 folders (50 entered), each of them 100 files: 51 listings read in part
    assert {p.place.tool: p for p in crowded.places}[FOUNDRY].crowded == 51
    started = time.monotonic()
    rushed = _scan(ScanLimits(seconds=0.0))
    assert time.monotonic() - started < 5
    assert all(p.stopped.startswith("out of time") for p in rushed.places if p.exists)


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="pipes are POSIX")
def test_a_pipe_named_like_a_config_is_never_opened(machine: MachineHome) -> None:
    report = _scan()  # opening the pipe would block this test forever
    pipes = [b for b in report.broken if "someone--pipe" in str(b.folder)]
    assert pipes and "not a regular file" in pipes[0].problem
    assert stat.S_ISFIFO(os.stat(pipes[0].folder / "genai_config.json").st_mode)


def test_folders_from_the_settings_are_scanned_first(machine: MachineHome, tmp_path: Path, tiny_llm: Path) -> None:
    from tests.fixtures.machine_home import _copy_model

    mine = _copy_model(tiny_llm, tmp_path / "mine" / "a" / "chat")
    report = _scan(extra=(str(tmp_path / "mine"),))
    assert report.models[0].folder == mine and report.models[0].tool == "Your folder"


def test_ai_toolkit_models_are_found_where_it_keeps_them_and_where_its_setting_moved_them(
    machine: MachineHome,
) -> None:
    report = _scan()
    toolkit = [p for p in report.places if p.place.tool == AI_TOOLKIT]
    assert [(p.place.path, p.place.how) for p in toolkit] == [
        (machine.home / ".aitk" / "models", "default"),
        (machine.home / AITK_MOVED, f"VS Code setting {AI_TOOLKIT_SETTING}"),
    ]
    found = {m.folder: m for m in report.models}
    default, moved = found[machine.aitk_chat], found[machine.aitk_moved]
    assert (default.tool, default.publisher) == (AI_TOOLKIT, "microsoft")
    assert default.name == "SmolLM2-135M-Instruct-onnx (cpu/smollm2-135m-cpu-int4)"
    assert (moved.tool, moved.publisher, moved.name) == (
        AI_TOOLKIT,
        "HuggingFaceTB",
        "SmolLM2-135M-Instruct (cpu/smollm2-moved)",
    )
    assert default.verdict == moved.verdict == RUNS and default.target.label == "CPU"
    assert not report.notes  # its settings.json has a comment and trailing commas, as VS Code allows


def _settings(home: Path, text: str) -> Path:
    path = vscode_user_dir(home) / "settings.json"
    path.unlink()
    path.write_text(text, encoding="utf-8")
    return path


def test_vscode_settings_are_only_read_and_a_bad_one_is_a_note(machine: MachineHome, tmp_path: Path) -> None:
    def moved() -> tuple[list[Path], list[str]]:
        places, notes = ai_toolkit_places()
        return [p.path for p in places[1:]], notes

    elsewhere = tmp_path / "D drive" / "models"
    _settings(machine.home, json.dumps({"windowsaistudio.playground.agentModelStorage": str(elsewhere)}))
    assert moved() == ([elsewhere], [])  # the same words, spelled as a nested key
    _settings(machine.home, '{"windowsaistudio.playgroundAgentModelStorage": "models/here"}')
    assert moved()[0] == [] and "not an absolute path" in moved()[1][0]
    _settings(machine.home, '{"windowsaistudio.playgroundAgentModelStorage": ["/a"]}')
    assert moved()[0] == [] and "not a folder path" in moved()[1][0]
    _settings(machine.home, '{"windowsaistudio.playgroundAgentModelStorage": "/a", /* never closed')
    assert moved()[0] == [] and "could not be read: it is not valid JSON" in moved()[1][0]
    _settings(machine.home, '{"a": "' + "x" * (2 << 20) + '"}')
    assert moved()[0] == [] and "could not be read" in moved()[1][0]
    _settings(machine.home, '{"windowsaistudio.playgroundAgentModelStorage": "~/AI Models"}')
    assert moved() == ([machine.home / AITK_MOVED], [])  # `~` is the only thing expanded
    _settings(
        machine.home,
        json.dumps({"windowsaistudio.playgroundAgentModelStorage": str(machine.home / ".aitk" / "models")}),
    )
    assert moved() == ([], [])  # the default folder itself: listed once
    (vscode_user_dir(machine.home) / "settings.json").unlink()
    assert moved() == ([], [])  # no VS Code: nothing to say
    if hasattr(os, "mkfifo"):
        os.mkfifo(vscode_user_dir(machine.home) / "settings.json")
        assert moved()[0] == [] and "not a regular file" in moved()[1][0]  # opening it would block


def test_hugging_face_cache_location_follows_huggingface_hub(tmp_path: Path) -> None:
    assert hugging_face_cache({"HF_HUB_CACHE": str(tmp_path / "a"), "HF_HOME": "x"}) == (tmp_path / "a", "HF_HUB_CACHE")
    assert hugging_face_cache({"HUGGINGFACE_HUB_CACHE": str(tmp_path / "b")})[1] == "HUGGINGFACE_HUB_CACHE"
    assert hugging_face_cache({"HF_HOME": str(tmp_path / "h")}) == (tmp_path / "h" / "hub", "HF_HOME")
    assert hugging_face_cache({"XDG_CACHE_HOME": str(tmp_path / "x")})[0] == tmp_path / "x" / "huggingface" / "hub"
    assert hugging_face_cache({})[0] == Path(os.path.expanduser("~")) / ".cache" / "huggingface" / "hub"


def test_foundry_cache_location_is_parsed_defensively(tmp_path: Path) -> None:
    cache = tmp_path / "models cache"
    cache.mkdir()
    assert parse_cache_location(f"\x1b[32m💾 Cache directory path: {cache}\x1b[0m\n") == cache
    assert parse_cache_location(json.dumps({"cacheDirectory": str(cache)})) == cache
    assert parse_cache_location(f"{cache}\n") == cache
    assert parse_cache_location(f"Cache directory path: {tmp_path / 'missing'}") is None
    assert parse_cache_location("Cache directory path: models") is None  # relative: whose?
    assert parse_cache_location("🟢 Service is Started on http://127.0.0.1:5273/\n") is None
    assert parse_cache_location("") is None


def _fake_foundry(bin_dir: Path, body: str) -> None:
    bin_dir.mkdir(parents=True, exist_ok=True)
    script = bin_dir / "foundry"
    script.write_text(f"#!{sys.executable}\nimport sys, time\n{body}\n", encoding="utf-8")
    script.chmod(0o755)


@pytest.mark.skipif(sys.platform == "win32", reason="a POSIX script stands in for foundry.exe")
def test_the_foundry_cli_names_the_cache_and_never_hangs_the_scan(
    machine: MachineHome, tmp_path: Path, tiny_llm: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.fixtures.machine_home import _copy_model

    moved = tmp_path / "D" / "foundry-models"
    model = _copy_model(tiny_llm, moved / "Microsoft" / "moved-model-1" / "v1")
    bin_dir = tmp_path / "bin"
    _fake_foundry(bin_dir, f"print('💾 Cache directory path: {moved}')")
    monkeypatch.setenv("PATH", str(bin_dir))
    found_places, notes = default_places()
    assert found_places[0] == Place(FOUNDRY, moved, 5, "`foundry cache location`") and notes == []
    report = scan(found_places)
    assert model in {m.folder for m in report.models}
    _fake_foundry(bin_dir, "time.sleep(60)")
    monkeypatch.setattr(places_module, "FOUNDRY_TIMEOUT_S", 0.5)
    started = time.monotonic()
    found_places, notes = places_module.default_places()
    assert time.monotonic() - started < 5
    assert [p.how for p in found_places if p.tool == FOUNDRY] == ["default"]
    assert notes and "gave no answer within" in notes[0]


def test_a_snapshot_may_link_into_its_own_blobs_and_nowhere_else(tmp_path: Path) -> None:
    repository = tmp_path / "hub" / "models--org--name"
    snapshot = repository / "snapshots" / "rev" / "cpu"
    snapshot.mkdir(parents=True)
    (repository / "blobs").mkdir()
    (repository / "blobs" / "abc").write_text("{}")
    os.symlink("../../../blobs/abc", snapshot / "genai_config.json")
    named = resolve_inside(snapshot, "genai_config.json")  # the link in the folder, which leads into blobs/
    assert named == snapshot.resolve() / "genai_config.json"
    assert named.resolve() == (repository / "blobs" / "abc").resolve()
    (tmp_path / "secret").write_text("x")
    os.symlink(tmp_path / "secret", snapshot / "out.json")
    with pytest.raises(ModelError, match="outside the model's folder"):
        resolve_inside(snapshot, "out.json")
    other = tmp_path / "hub" / "models--evil--other" / "blobs"
    other.mkdir(parents=True)
    (other / "x").write_text("x")
    os.symlink(other / "x", snapshot / "theirs.json")
    with pytest.raises(ModelError, match="outside the model's folder"):
        resolve_inside(snapshot, "theirs.json")  # another repository's blobs are not this folder's
    plain = tmp_path / "plain" / "blobs"
    plain.mkdir(parents=True)
    (plain / "y").write_text("y")
    os.symlink(plain / "y", tmp_path / "plain" / "y.json")
    with pytest.raises(ModelError):
        resolve_inside(tmp_path / "plain" / "sub", "../y.json")


def test_a_blobs_folder_that_is_a_link_is_not_trusted(tmp_path: Path) -> None:
    repository = tmp_path / "models--org--name"
    snapshot = repository / "snapshots" / "rev"
    snapshot.mkdir(parents=True)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "abc").write_text("secret")
    os.symlink(elsewhere, repository / "blobs")
    os.symlink("../../blobs/abc", snapshot / "tokenizer.json")
    with pytest.raises(ModelError, match="outside the model's folder"):
        resolve_inside(snapshot, "tokenizer.json")


def test_precompiled_epcontext_nodes_say_which_device_and_precision(machine: MachineHome) -> None:
    """A config that names no provider, over a model whose nodes are QNN context binaries: the head of
    the ONNX file (its node list) tells, without loading anything."""
    import onnx
    from onnx import TensorProto, helper

    node = helper.make_node(
        "EPContext", ["input_ids"], ["logits"], domain="com.microsoft", name="ctx",
        embed_mode=0, ep_cache_context="ctx_qnn.bin", source="QNNExecutionProvider", main_context=1,
    )  # fmt: skip
    graph = helper.make_graph(
        [node], "g", [helper.make_tensor_value_info("input_ids", TensorProto.INT64, [1, "s"])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, "s", 8])],
    )  # fmt: skip
    opsets = [helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)]
    model = helper.make_model(graph, opset_imports=opsets)
    folder = machine.foundry_cpu
    onnx.save(model, folder / "ctx.onnx")
    (folder / "ctx_qnn.bin").write_bytes(b"\0" * 64)
    config_path = folder / "genai_config.json"
    config = json.loads(config_path.read_text())
    config["model"]["decoder"]["filename"] = "ctx.onnx"
    config["model"]["decoder"]["session_options"]["provider_options"] = []
    config_path.unlink()
    config_path.write_text(json.dumps(config))
    found = {m.folder: m for m in _scan().models}[folder]
    target = found.target
    assert (target.ep, target.device, target.source) == ("QNNExecutionProvider", "NPU", "EPContext nodes")
    assert found.precompiled and found.precision == "npu-context"
    assert "precompiled for QNN NPU (EPContext nodes): it runs on that device only" in found.details
    assert found.verdict == NEEDS and "its precompiled nodes run on that device only" in found.runs_here


@pytest.mark.parametrize(
    ("device_type", "device"),
    [("NPU", "NPU"), ("GPU.1", "GPU"), ("AUTO:GPU,NPU", "GPU"), ("HETERO:NPU,CPU", "NPU"), ("AUTO:CPU,GPU", "CPU")],
)
def test_an_openvino_config_runs_on_the_first_device_it_names(device_type: str, device: str) -> None:
    from engines.models.found import chat_target

    options = {"device_type": device_type}
    config = {"model": {"decoder": {"session_options": {"provider_options": [{"OpenVINO": options}]}}}}
    target, _ = chat_target(config, b"")
    assert (target.ep, target.device) == ("OpenVINOExecutionProvider", device)

"""Chat model folders (validation before any native load) and provider setup at the genai boundary."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from engines import runtime as engines_runtime
from engines.chat import model as chat_model
from engines.chat.folder import CHAT_TEMPLATE_FILE, DML_EP, GENAI_CONFIG, QNN_EP, ModelFolder, validate_model_folder
from engines.chat.loaded import ChatModel
from engines.chat.model import plan_providers
from engines.errors import DeviceUnavailableError, ModelError
from engines.types import CPU_EP, DeviceChoice

CPU_ONLY = frozenset({CPU_EP})

# --------------------------------------------------------------------------------------------
# Folder validation
# --------------------------------------------------------------------------------------------


@pytest.fixture
def folder(tiny_llm: Path, tmp_path: Path) -> Path:
    """A copy of the tiny genai folder to break in each test."""
    copy = tmp_path / "model"
    shutil.copytree(tiny_llm, copy)
    return copy


def edit_config(folder: Path, change: Callable[[dict[str, Any]], None]) -> None:
    path = folder / GENAI_CONFIG
    config = json.loads(path.read_text())
    change(config)
    path.write_text(json.dumps(config))


def problem(folder: Path) -> str:
    with pytest.raises(ModelError) as info:
        validate_model_folder(folder)
    return str(info.value)


def test_valid_folder_lists_its_files(folder: Path) -> None:
    info = validate_model_folder(folder)
    assert info.files == ("model.onnx", "model.onnx.data")
    assert info.model_type == "llama"
    assert info.context_length == 256
    assert info.default_max_length == 256
    assert info.config_providers == ()


def test_missing_folder(tmp_path: Path) -> None:
    assert "Model folder not found" in problem(tmp_path / "nope")


def test_file_instead_of_folder(folder: Path) -> None:
    assert "is a file, not a model folder" in problem(folder / GENAI_CONFIG)


def test_no_genai_config(folder: Path) -> None:
    (folder / GENAI_CONFIG).unlink()
    assert "genai_config.json is missing" in problem(folder)


def test_config_not_json(folder: Path) -> None:
    (folder / GENAI_CONFIG).write_text('{"model": {"type": "llama",}')
    text = problem(folder)
    assert "genai_config.json is not valid JSON" in text and "line 1" in text


def test_config_not_utf8(folder: Path) -> None:
    (folder / GENAI_CONFIG).write_bytes(b'{"model": "\xff\xfe"}')
    assert "not UTF-8" in problem(folder)


def test_config_without_model_section(folder: Path) -> None:
    (folder / GENAI_CONFIG).write_text('{"search": {}}')
    assert 'no "model" section' in problem(folder)


def test_config_without_decoder_filename(folder: Path) -> None:
    edit_config(folder, lambda c: c["model"]["decoder"].pop("filename"))
    assert "model.decoder.filename" in problem(folder)


def test_config_with_bad_context_length(folder: Path) -> None:
    edit_config(folder, lambda c: c["model"].update(context_length="big"))
    assert "context_length" in problem(folder)


@pytest.mark.parametrize("name", ["/etc/passwd", "C:\\Windows\\model.onnx", "\\\\server\\share\\model.onnx"])
def test_absolute_model_path_refused(folder: Path, name: str) -> None:
    edit_config(folder, lambda c: c["model"]["decoder"].update(filename=name))
    assert "absolute path" in problem(folder)


@pytest.mark.parametrize("name", ["../model.onnx", "sub/../../model.onnx", "..\\model.onnx"])
def test_parent_path_refused(folder: Path, name: str) -> None:
    edit_config(folder, lambda c: c["model"]["decoder"].update(filename=name))
    assert "'..'" in problem(folder)


def test_symlink_out_of_the_folder_refused(folder: Path, tmp_path: Path) -> None:
    outside = tmp_path / "elsewhere.onnx"
    shutil.copy2(folder / "model.onnx", outside)
    (folder / "model.onnx").unlink()
    (folder / "model.onnx").symlink_to(outside)
    assert "outside the model's folder" in problem(folder)


def test_symlinked_config_out_of_the_folder_refused(folder: Path, tmp_path: Path) -> None:
    outside = tmp_path / "config.json"
    shutil.move(folder / GENAI_CONFIG, outside)
    (folder / GENAI_CONFIG).symlink_to(outside)
    assert "outside the model's folder" in problem(folder)


def test_missing_model_file(folder: Path) -> None:
    (folder / "model.onnx").unlink()
    text = problem(folder)
    assert "model.onnx" in text and "missing" in text


def test_missing_external_data(folder: Path) -> None:
    (folder / "model.onnx.data").unlink()
    text = problem(folder)
    assert "model.onnx.data" in text and "missing" in text


def test_external_data_pointing_outside_refused(folder: Path) -> None:
    data = (folder / "model.onnx").read_bytes()
    # Same length, so the protobuf stays valid: "model.onnx.data" -> "../x.onnx.data".
    (folder / "model.onnx").write_bytes(data.replace(b"model.onnx.data", b"../xx.onnx.data"))
    assert "outside the model's folder" in problem(folder)


def test_extra_model_file_named_in_config_must_exist(folder: Path) -> None:
    edit_config(folder, lambda c: c["model"].setdefault("embedding", {}).update(filename="embeddings.onnx"))
    text = problem(folder)
    assert "embeddings.onnx" in text and "model.embedding.filename" in text


@pytest.mark.parametrize("name", ["tokenizer.json", "tokenizer_config.json"])
def test_missing_tokenizer_file(folder: Path, name: str) -> None:
    (folder / name).unlink()
    assert f"has no {name}" in problem(folder)


def test_tokenizer_config_not_json(folder: Path) -> None:
    (folder / "tokenizer_config.json").write_text("{")
    assert "tokenizer_config.json is not valid JSON" in problem(folder)


def test_missing_chat_template(folder: Path) -> None:
    (folder / CHAT_TEMPLATE_FILE).unlink()
    assert "has no chat template" in problem(folder)


def test_empty_chat_template(folder: Path) -> None:
    (folder / CHAT_TEMPLATE_FILE).write_text("  \n")
    assert "has no chat template" in problem(folder)


def test_chat_template_inside_tokenizer_config_is_enough(folder: Path) -> None:
    template = (folder / CHAT_TEMPLATE_FILE).read_text()
    (folder / CHAT_TEMPLATE_FILE).unlink()
    config = json.loads((folder / "tokenizer_config.json").read_text())
    config["chat_template"] = template
    (folder / "tokenizer_config.json").write_text(json.dumps(config))
    assert validate_model_folder(folder).files


@pytest.mark.parametrize(
    ("where", "key", "value"),
    [
        ("session_options", "custom_ops_library", "libevil.so"),
        ("session_options", "ep_library_path", "evil.dll"),
        ("root", "custom_ops", "evil.dll"),
    ],
)
def test_native_libraries_named_by_the_config_are_refused(folder: Path, where: str, key: str, value: str) -> None:
    def change(config: dict[str, Any]) -> None:
        target = config["model"]["decoder"]["session_options"] if where == "session_options" else config
        target[key] = value

    edit_config(folder, change)
    text = problem(folder)
    assert "native library" in text and key in text


@pytest.mark.parametrize("backend", ["C:\\temp\\QnnHtp.dll", "/tmp/libQnnHtp.so", "evil.dll"])
def test_qnn_backend_paths_other_than_the_standard_ones_are_refused(folder: Path, backend: str) -> None:
    edit_config(
        folder,
        lambda c: c["model"]["decoder"]["session_options"].update(
            provider_options=[{"qnn": {"backend_path": backend}}]
        ),
    )
    assert "backend library" in problem(folder)


def test_config_providers_are_read(folder: Path) -> None:
    providers = [{"qnn": {"backend_path": "QnnHtp.dll", "htp_performance_mode": "burst"}}, {"dml": {}}]
    edit_config(folder, lambda c: c["model"]["decoder"]["session_options"].update(provider_options=providers))
    assert validate_model_folder(folder).config_providers == (QNN_EP, DML_EP)


# --------------------------------------------------------------------------------------------
# Provider plans (pure)
# --------------------------------------------------------------------------------------------


def model_folder(providers: tuple[str, ...] = ()) -> ModelFolder:
    return ModelFolder(Path("/models/m"), "llama", 256, 256, ("model.onnx",), providers)


def test_cpu_choice_is_plain_cpu() -> None:
    plan = plan_providers(model_folder(), DeviceChoice.parse("cpu"), CPU_ONLY)
    assert (plan.ep, plan.fell_back, plan.from_config) == (CPU_EP, False, False)


def test_qnn_missing_falls_back_to_cpu_and_says_why() -> None:
    plan = plan_providers(model_folder(), DeviceChoice.parse("qnn"), CPU_ONLY)
    assert plan.ep == CPU_EP and plan.fell_back
    assert "QNN" in plan.reason and "ARM64" in plan.reason
    placement = plan.placement()
    assert placement.fell_back and placement.requested_eps == (QNN_EP,) and placement.active_eps == (CPU_EP,)


def test_qnn_missing_in_strict_mode_is_an_error() -> None:
    with pytest.raises(DeviceUnavailableError, match="QNN is not available for chat"):
        plan_providers(model_folder(), DeviceChoice.parse("qnn", strict=True), CPU_ONLY)


def test_available_ep_is_used_with_its_options() -> None:
    choice = DeviceChoice.parse("dml", ep_options={"device_id": "1"})
    plan = plan_providers(model_folder(), choice, CPU_ONLY | {DML_EP})
    assert plan.ep == DML_EP and plan.options == (("device_id", "1"),) and not plan.fell_back


@pytest.mark.parametrize(("policy", "ep"), [("npu", QNN_EP), ("efficiency", QNN_EP), ("gpu", DML_EP)])
def test_policies_pick_the_matching_ep(policy: str, ep: str) -> None:
    plan = plan_providers(model_folder(), DeviceChoice.parse(policy), CPU_ONLY | {QNN_EP, DML_EP})
    assert plan.ep == ep and not plan.fell_back


def test_performance_prefers_the_gpu_then_the_npu() -> None:
    assert plan_providers(model_folder(), DeviceChoice.parse("performance"), CPU_ONLY | {QNN_EP}).ep == QNN_EP
    both = CPU_ONLY | {QNN_EP, DML_EP}
    assert plan_providers(model_folder(), DeviceChoice.parse("performance"), both).ep == DML_EP


def test_npu_policy_without_npu() -> None:
    plan = plan_providers(model_folder(), DeviceChoice.parse("npu"), CPU_ONLY)
    assert plan.fell_back and "No usable NPU for chat" in plan.reason
    with pytest.raises(DeviceUnavailableError, match="No usable NPU for chat"):
        plan_providers(model_folder(), DeviceChoice.parse("npu", strict=True), CPU_ONLY)


def test_auto_means_npu_then_gpu_then_cpu_and_keeps_the_config_options_of_the_planned_ep() -> None:
    cpu = plan_providers(model_folder(), DeviceChoice(), CPU_ONLY)
    assert cpu.ep == CPU_EP and not cpu.fell_back
    plan = plan_providers(model_folder((QNN_EP,)), DeviceChoice(), CPU_ONLY | {QNN_EP})
    assert plan.ep == QNN_EP and plan.from_config
    assert plan_providers(model_folder(), DeviceChoice(), CPU_ONLY | {QNN_EP, DML_EP}).ep == QNN_EP
    gpu = plan_providers(model_folder(), DeviceChoice(), CPU_ONLY | {DML_EP})
    assert gpu.ep == DML_EP and not gpu.from_config


def test_auto_with_a_config_provider_this_build_lacks() -> None:
    plan = plan_providers(model_folder((QNN_EP,)), DeviceChoice(), CPU_ONLY)
    assert plan.fell_back and plan.ep == CPU_EP and "the model asks for QNN" in plan.reason
    with pytest.raises(DeviceUnavailableError):
        plan_providers(model_folder((QNN_EP,)), DeviceChoice(strict=True), CPU_ONLY)


def test_an_ep_genai_cannot_drive() -> None:
    plan = plan_providers(model_folder(), DeviceChoice.parse("TensorrtExecutionProvider"), CPU_ONLY)
    assert plan.fell_back and "cannot run chat models on Tensorrt" in plan.reason


# --------------------------------------------------------------------------------------------
# The genai boundary, with a fake onnxruntime_genai that records every call
# --------------------------------------------------------------------------------------------


class FakeGenai:
    """Records Config / Model / register calls; a Model fails for the providers in `unsupported`."""

    def __init__(self, unsupported: dict[str, str] | None = None, template: str = "<t>") -> None:
        self.calls: list[tuple[Any, ...]] = []
        self.unsupported = unsupported or {}
        self.template = template
        fake = self

        class Config:
            def __init__(self, path: str) -> None:
                fake.calls.append(("Config", path))
                self.providers: list[str] = []

            def clear_providers(self) -> None:
                fake.calls.append(("clear_providers",))
                self.providers.clear()

            def append_provider(self, name: str) -> None:
                fake.calls.append(("append_provider", name))
                self.providers.append(name)

            def set_provider_option(self, ep: str, key: str, value: str) -> None:
                fake.calls.append(("set_provider_option", ep, key, value))

        class Model:
            def __init__(self, config: Config) -> None:
                fake.calls.append(("Model", tuple(config.providers)))
                for name in config.providers:
                    if name in fake.unsupported:
                        raise RuntimeError(fake.unsupported[name])
                self.device_type = config.providers[0].upper() if config.providers else "CPU"

        class Tokenizer:
            eos_token_ids = (2,)
            bos_token_id = 1

            def __init__(self, model: Model) -> None:
                fake.calls.append(("Tokenizer",))

            def apply_chat_template(self, messages: str, add_generation_prompt: bool = True) -> str:
                if not fake.template:
                    raise RuntimeError("Empty chat template.")
                return fake.template + messages

            def encode(self, text: str) -> list[int]:
                return [ord(c) for c in text]

        self.Config, self.Model, self.Tokenizer = Config, Model, Tokenizer

    def register_execution_provider_library(self, name: str, path: str) -> None:
        self.calls.append(("register", name, path))

    def names(self) -> list[str]:
        return [c[0] for c in self.calls]


@pytest.fixture
def fake_genai(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[..., FakeGenai]]:
    def install(**kwargs: Any) -> FakeGenai:
        fake = FakeGenai(**kwargs)
        chat_model.use_fake_genai(fake)
        return fake

    monkeypatch.setattr(engines_runtime, "qnn_plugin", lambda: None)
    yield install
    chat_model.use_fake_genai(None)


def qnn_plugin() -> SimpleNamespace:
    return SimpleNamespace(
        get_ep_name=lambda: QNN_EP,
        get_library_path=lambda: "C:/npu-studio/onnxruntime_qnn/onnxruntime_providers_qnn.dll",
        get_qnn_htp_path=lambda: "C:/npu-studio/onnxruntime_qnn/QnnHtp.dll",
    )


def test_qnn_plugin_is_registered_before_the_model_and_configured(
    fake_genai: Callable[..., FakeGenai], monkeypatch: pytest.MonkeyPatch, tiny_llm: Path
) -> None:
    fake = fake_genai()
    monkeypatch.setattr(engines_runtime, "qnn_plugin", qnn_plugin)
    model = ChatModel.load(tiny_llm, DeviceChoice.parse("qnn", strict=True), available=CPU_ONLY | {QNN_EP})
    assert fake.calls[:6] == [
        ("Config", str(tiny_llm.resolve())),
        ("register", QNN_EP, "C:/npu-studio/onnxruntime_qnn/onnxruntime_providers_qnn.dll"),
        ("clear_providers",),
        ("append_provider", "qnn"),
        ("set_provider_option", "qnn", "backend_path", "C:/npu-studio/onnxruntime_qnn/QnnHtp.dll"),
        ("Model", ("qnn",)),
    ]
    assert model.ep == QNN_EP and not model.placement.fell_back and model.device == "QNN"
    # A second model does not register the plugin again.
    ChatModel.load(tiny_llm, DeviceChoice.parse("qnn"), available=CPU_ONLY | {QNN_EP})
    assert fake.names().count("register") == 1


def test_dml_options_reach_the_config(fake_genai: Callable[..., FakeGenai], tiny_llm: Path) -> None:
    fake = fake_genai()
    choice = DeviceChoice.parse("dml", ep_options={"device_id": "1"})
    ChatModel.load(tiny_llm, choice, available=CPU_ONLY | {DML_EP})
    assert ("append_provider", "dml") in fake.calls
    assert ("set_provider_option", "dml", "device_id", "1") in fake.calls
    assert "register" not in fake.names()


def test_cpu_clears_the_config_providers(fake_genai: Callable[..., FakeGenai], tiny_llm: Path) -> None:
    fake = fake_genai()
    ChatModel.load(tiny_llm, DeviceChoice.parse("cpu"), available=CPU_ONLY)
    assert fake.names()[:3] == ["Config", "clear_providers", "Model"]
    assert "append_provider" not in fake.names()


def test_auto_keeps_the_config_providers(
    fake_genai: Callable[..., FakeGenai], monkeypatch: pytest.MonkeyPatch, folder: Path
) -> None:
    edit_config(
        folder,
        lambda c: c["model"]["decoder"]["session_options"].update(
            provider_options=[{"qnn": {"backend_path": "QnnHtp.dll"}}]
        ),
    )
    fake = fake_genai()
    monkeypatch.setattr(engines_runtime, "qnn_plugin", qnn_plugin)
    model = ChatModel.load(folder, DeviceChoice(), available=CPU_ONLY | {QNN_EP})
    assert "clear_providers" not in fake.names() and "register" in fake.names()
    assert ("set_provider_option", "qnn", "backend_path", "C:/npu-studio/onnxruntime_qnn/QnnHtp.dll") in fake.calls
    assert model.ep == QNN_EP


QNN_NOT_BUILT = "QNN execution provider is not supported in this build. "


def test_native_refusal_falls_back_to_cpu(fake_genai: Callable[..., FakeGenai], tiny_llm: Path) -> None:
    fake = fake_genai(unsupported={"qnn": QNN_NOT_BUILT})
    model = ChatModel.load(tiny_llm, DeviceChoice.parse("qnn"), available=CPU_ONLY | {QNN_EP})
    assert [c for c in fake.calls if c[0] == "Model"] == [("Model", ("qnn",)), ("Model", ())]
    assert model.ep == CPU_EP and model.placement.fell_back
    assert "not supported by the ONNX Runtime build installed here" in model.plan.reason


def test_native_refusal_in_strict_mode(fake_genai: Callable[..., FakeGenai], tiny_llm: Path) -> None:
    fake_genai(unsupported={"qnn": QNN_NOT_BUILT})
    with pytest.raises(DeviceUnavailableError) as info:
        ChatModel.load(tiny_llm, DeviceChoice.parse("qnn", strict=True), available=CPU_ONLY | {QNN_EP})
    assert "not supported by the ONNX Runtime build installed here" in str(info.value)
    assert "RuntimeError" not in str(info.value)


def test_a_cpu_failure_is_a_model_error(fake_genai: Callable[..., FakeGenai], tiny_llm: Path) -> None:
    fake_genai(unsupported={"qnn": "x"})

    def broken(config: Any) -> None:
        raise RuntimeError("Load model from model.onnx failed: Protobuf parsing failed.")

    chat_model._og_override.Model = broken
    with pytest.raises(ModelError, match="not a valid ONNX model"):
        ChatModel.load(tiny_llm, DeviceChoice.parse("cpu"), available=CPU_ONLY)


def test_a_template_genai_cannot_use_is_a_model_error(fake_genai: Callable[..., FakeGenai], tiny_llm: Path) -> None:
    fake_genai(template="")
    with pytest.raises(ModelError, match="no usable chat template"):
        ChatModel.load(tiny_llm, DeviceChoice.parse("cpu"), available=CPU_ONLY)


def test_an_invalid_folder_never_reaches_genai(fake_genai: Callable[..., FakeGenai], folder: Path) -> None:
    fake = fake_genai()
    (folder / "tokenizer.json").unlink()
    with pytest.raises(ModelError):
        ChatModel.load(folder, DeviceChoice.parse("cpu"), available=CPU_ONLY)
    assert fake.calls == []


# --------------------------------------------------------------------------------------------
# The real onnxruntime-genai of this build
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("device", "ep", "words"),
    [("qnn", QNN_EP, "not supported by the ONNX Runtime build"), ("dml", DML_EP, "not supported by the ONNX Runtime")],
)
def test_real_genai_refusal_becomes_a_fallback(tiny_llm: Path, device: str, ep: str, words: str) -> None:
    """Claim the EP is there: this Linux onnxruntime-genai refuses it at og.Model, and we fall back."""
    model = ChatModel.load(tiny_llm, DeviceChoice.parse(device), available=CPU_ONLY | {ep})
    assert model.ep == CPU_EP and model.device == "CPU"
    assert model.placement.fell_back and words in model.plan.reason
    with pytest.raises(DeviceUnavailableError, match=words):
        ChatModel.load(tiny_llm, DeviceChoice.parse(device, strict=True), available=CPU_ONLY | {ep})

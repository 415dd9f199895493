"""Windows ML and the plugin EPs as the user meets them: the devices command and its download (consent,
offline), the QNN backend sessions and chat get, the doctor's report, per-EP model variants and the
chat catalog's NPU models per vendor. Fakes at the `windowsml` / `onnxruntime` boundary."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from engines.runtime import catalog, devices, registration
from engines.types import DeviceType
from tests.unit.fake_ort import QNN, directml_laptop
from tests.unit.fake_windowsml import EpReadyState, FakeCatalogEp
from tests.unit.test_windows_eps import OPENVINO, REPO, VITIS, Install, _qnn_catalog, _snapdragon_with_catalog

# the same fixtures (re-exported by the "as" form)
from tests.unit.test_windows_eps import use as use
from tests.unit.test_windows_eps import windows as windows

# ---- the CLI: each state in words, the download only with consent -------------------------------------------


def _cli(args: list[str]) -> int:
    from app.cli import run

    return run(args)


def test_cli_lists_the_catalog_and_offers_the_download(use: Install, windows: Any, capsys: Any) -> None:
    windows("ARM64")
    use(_snapdragon_with_catalog(_qnn_catalog(EpReadyState.NotPresent), qnn_plugin=None))
    assert _cli(["devices"]) == 0
    out = capsys.readouterr().out
    assert "Windows ML catalog (windowsml 2.5.96, build 26100): QNN 2.2420.43 (not downloaded)" in out
    assert "npu-studio devices --download-eps qnn" in out
    assert "not downloaded yet" in out and "Bundled plugin onnxruntime-qnn: not installed" in out


def test_cli_download_needs_consent_and_reports_progress(
    use: Install, windows: Any, capsys: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    windows("ARM64")
    ep = _qnn_catalog(EpReadyState.NotPresent)
    use(_snapdragon_with_catalog(ep, qnn_plugin=None))
    monkeypatch.setattr(catalog, "windows_update_reachable", lambda timeout=3.0: True)
    monkeypatch.setattr(sys, "stdin", SimpleNamespace(isatty=lambda: False))
    assert _cli(["devices", "--download-eps"]) == 2
    assert "add --yes to agree" in capsys.readouterr().err and ep.ensure_calls == 0
    assert _cli(["devices", "--download-eps", "qnn", "--yes"]) == 0
    out = capsys.readouterr().out
    assert "QNN: 100%" in out and "✔ QNN is ready." in out and "✔ NPU" in out
    assert ep.ensure_calls == 1


def test_cli_download_offline_is_not_attempted(
    use: Install, windows: Any, capsys: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    ep = _qnn_catalog(EpReadyState.NotPresent)
    use(_snapdragon_with_catalog(ep))
    monkeypatch.setattr(catalog, "windows_update_reachable", lambda timeout=3.0: False)
    assert _cli(["devices", "--download-eps", "--yes"]) == 1
    assert "offline" in capsys.readouterr().out and ep.ensure_calls == 0


# ---- the EP in use is the one sessions and chat are configured for ------------------------------------------


def test_a_catalog_qnn_gets_its_own_htp_backend_in_sessions_and_chat(use: Install, windows: Any) -> None:
    from engines.chat import model as chat_model
    from engines.runtime.sessions import SessionSettings, default_ep_options

    windows("ARM64")
    use(_snapdragon_with_catalog(_qnn_catalog()))
    devices.discover()
    catalog_htp = r"C:\Program Files\WindowsApps\QNN\QnnHtp.dll"
    assert default_ep_options(QNN, SessionSettings())["backend_path"] == catalog_htp
    calls: list[tuple[str, str]] = []

    class Og:
        def register_execution_provider_library(self, name: str, path: str) -> None:
            calls.append((name, path))
            raise RuntimeError(f"EP library is already registered under {name}")  # the shared ONNX Runtime

    with chat_model._plugin_lock:
        chat_model._registered_plugins.clear()
    assert chat_model.register_qnn_plugin(Og()) == catalog_htp
    assert calls == [(QNN, r"C:\Program Files\WindowsApps\QNN\onnxruntime_providers_qnn.dll")]


def test_without_the_catalog_sessions_use_the_bundled_htp_backend(use: Install, windows: Any) -> None:
    from engines.runtime.sessions import SessionSettings, default_ep_options

    windows("ARM64")
    use(_snapdragon_with_catalog(build=22631))
    devices.discover()
    assert default_ep_options(QNN, SessionSettings())["backend_path"] == r"C:\app\onnxruntime_qnn\QnnHtp.dll"


# ---- doctor ----------------------------------------------------------------------------------------------------


def test_doctor_reports_the_catalog_the_sources_and_a_second_ort_build(
    use: Install, windows: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from engines import doctor

    windows("ARM64")
    fake = _snapdragon_with_catalog(_qnn_catalog(), FakeCatalogEp(OPENVINO, "1.8.69", "", EpReadyState.NotPresent))
    fake.supported_ops[QNN] = None
    use(fake)
    installed = {"onnxruntime-windowsml": "1.30.0.202609102321", "onnxruntime": "1.32.0"}
    monkeypatch.setattr(doctor, "_package_version", lambda name: installed.get(name, ""))
    report = doctor.run_doctor(classifier=None, chat_model=None, chat=None)
    text = report.text()
    assert "PROBLEM: 2 ONNX Runtime builds are installed (onnxruntime 1.32.0, onnxruntime-windowsml" in text
    assert "Windows ML catalog (windowsml 2.5.96, Windows build 26100): QNNExecutionProvider 2.2420.43 (ready)" in text
    assert "Plugin EP QNN 2.2420.43 from Windows ML catalog: registered" in text
    assert "Plugin EP OpenVINO 1.8.69 from Windows ML catalog: not downloaded" in text
    assert "Plugin EP QNN 2.7.0 from onnxruntime-qnn: installed, not used (not used: QNN 2.2420.43 from the" in text
    assert "Windows ML catalog" in next(line for line in text.splitlines() if "✔ NPU" in line)
    # every usable NPU gets a strict session (the fake has no kernels to run, so only its creation counts)
    assert any(s.check == "strict session" and s.device == QNN for s in report.steps)
    strict = [s for s in fake.sessions if s.options.config.get("session.disable_cpu_ep_fallback") == "1"]
    assert strict and strict[0].assignment.keys() == {QNN}
    assert report.as_dict()["versions"]["windows_ml"]["providers"][0]["name"] == QNN


def test_the_compiled_model_cache_key_follows_the_qnn_in_use(use: Install, windows: Any) -> None:
    from engines.runtime.compiled_cache import ep_version_for

    windows("ARM64")
    use(_snapdragon_with_catalog(_qnn_catalog()))
    from_catalog, _ = ep_version_for(QNN, devices.discover())
    registration.reset_registrations()
    use(_snapdragon_with_catalog(build=22631))
    bundled, _ = ep_version_for(QNN, devices.discover())
    assert "Windows ML catalog 2.2420.43" in from_catalog and "onnxruntime-qnn" not in from_catalog
    assert "onnxruntime-qnn 2.7.0" in bundled and from_catalog != bundled


# ---- per-EP model variants -----------------------------------------------------------------------------------


def test_each_npu_ep_gets_the_variant_it_takes(tmp_path: Path) -> None:
    from engines.models.variants import resolve_variant
    from engines.types import DeviceChoice

    def variant(name: str, precision: str, activations: str, derived: str = "net") -> Path:
        folder = tmp_path / name
        folder.mkdir()
        manifest = {
            "schema": 1, "name": name, "precision": precision, "devices": ["npu"] if derived else ["cpu", "npu"],
            "source": {"derived_from": derived}, "quantization": {"activations": activations} if activations else {},
            "verification": {"top1_agreement_with_float": {"agree": 6, "total": 6}},
        }
        (folder / "manifest.json").write_text(json.dumps(manifest))
        return folder

    base = variant("net", "fp32", "", derived="")
    a16 = variant("net-qdq", "qdq-a16w8", "uint16")
    roots = [tmp_path]
    assert resolve_variant(base, DeviceChoice.parse("qnn"), roots) == a16
    assert resolve_variant(base, DeviceChoice.parse("openvino"), roots) == base  # FP16 on the NPU, not a16
    assert resolve_variant(base, DeviceChoice.parse("vitisai"), roots) == base
    a8 = variant("net-qdq-a8", "qdq-a8w8", "uint8")
    assert resolve_variant(base, DeviceChoice.parse("openvino"), roots) == a8
    assert resolve_variant(base, DeviceChoice.parse("npu"), roots, ep=VITIS) == a8
    assert resolve_variant(base, DeviceChoice.parse("qnn"), roots) == a16  # QNN keeps the 16-bit one


def test_the_chat_catalog_says_per_npu_vendor_what_exists() -> None:
    from engines.models.catalog import load_catalog, load_npu_availability

    path = REPO / "assets" / "catalog.json"
    entries = {e.id: e for e in load_catalog(path)}
    by_vendor = {n.vendor: n for n in load_npu_availability(path)}
    assert {"Qualcomm", "Intel", "AMD"} <= by_vendor.keys()
    for n in by_vendor.values():
        assert n.downloadable or n.none_here, f"{n.vendor}: say honestly that none is downloadable"
        for model_id in n.downloadable:
            assert "npu" in entries[model_id].devices
    assert "-openvino-npu" in by_vendor["Intel"].elsewhere and "-vitis-npu" in by_vendor["AMD"].elsewhere
    assert "ryzenai-npu" in by_vendor["AMD"].elsewhere


def test_an_openvino_that_lists_only_the_gpu_still_says_why_there_is_no_npu(use: Install, windows: Any) -> None:
    from tests.unit.fake_ort import FakeEpDevice, FakeHw, HwType

    windows("AMD64")
    fake = directml_laptop()
    fake.plugins = {"onnxruntime_ep_openvino": SimpleNamespace(
        __version__="1.8.1", get_ep_name=lambda: OPENVINO, get_library_path=lambda: r"C:\app\openvino_plugin.dll"
    )}
    fake._plugin_devices = [FakeEpDevice(OPENVINO, "Intel", FakeHw(HwType.GPU, "Intel", 0x8086, 0x7D55))]
    use(fake)
    cards = devices.discover().find_ep(OPENVINO)
    gpu = next(c for c in cards if c.type == DeviceType.GPU)
    npu = next(c for c in cards if c.type == DeviceType.NPU)
    assert gpu.usable and gpu.source == "bundled plugin"
    assert not npu.usable and "found the Intel GPU but no Intel NPU" in npu.reason


@pytest.mark.parametrize(
    ("providers", "build", "words"),
    [
        ([FakeCatalogEp(QNN, "2.2420.43", r"C:\W\qnn.dll")], 26100, "QNN 2.2420.43 (ready)"),
        ([], 26100, "offers no execution provider for this PC"),
        ([FakeCatalogEp(QNN, "2.2420.43", r"C:\W\qnn.dll")], 22631, "not used. Windows ML's execution providers need"),
    ],
)
def test_cli_says_each_catalog_state(
    use: Install, windows: Any, capsys: Any, providers: list[FakeCatalogEp], build: int, words: str
) -> None:
    windows("ARM64")
    use(_snapdragon_with_catalog(*providers, build=build))
    assert _cli(["devices"]) == 0
    out = capsys.readouterr().out
    assert words in out and "✔ NPU" in out  # the bundled QNN serves whatever the catalog says


def test_genai_is_imported_after_onnxruntime(monkeypatch: pytest.MonkeyPatch) -> None:
    """onnxruntime-genai-winml reuses the ONNX Runtime loaded in the process: it must come second."""
    import importlib

    from engines import runtime

    order: list[str] = []
    real = importlib.import_module

    def record(name: str, package: str | None = None) -> Any:
        if name in ("onnxruntime", "onnxruntime_genai"):
            order.append(name)
        return real(name, package)

    monkeypatch.setattr(importlib, "import_module", record)
    monkeypatch.setattr(runtime, "_genai_alone", False)  # as in a new process (another test may have settled it)
    runtime.import_genai()
    assert order == ["onnxruntime", "onnxruntime_genai"]
    # Once genai was loaded on its own (a CPU-only chat process), the order is settled: nothing more is imported.
    order.clear()
    monkeypatch.setattr(runtime, "_genai_alone", True)
    assert runtime.import_genai() is sys.modules["onnxruntime_genai"]
    assert order == []

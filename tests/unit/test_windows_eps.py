"""Windows ML's EP catalog and the bundled plugin EPs: registration order, every catalog state the docs
list, the known user-reported failures, the consent-gated download, and the real OpenVINO plugin on Linux."""

from __future__ import annotations

import json
import platform
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from engines.runtime import catalog, devices, reasons, registration
from engines.runtime.catalog import PrepareStatus
from engines.types import DeviceType, EpSource
from tests.unit.fake_ort import CPU, DML, QNN, directml_laptop, snapdragon
from tests.unit.fake_windowsml import EpReadyState, FakeCatalogEp, FakeWindowsMl, npu_device

REPO = Path(__file__).resolve().parents[2]
OPENVINO = "OpenVINOExecutionProvider"
VITIS = "VitisAIExecutionProvider"
Install = Callable[[Any], Any]


@pytest.fixture
def use(fake_runtime: Install) -> Install:
    return fake_runtime


@pytest.fixture
def windows(monkeypatch: pytest.MonkeyPatch) -> Callable[[str], None]:
    """Make the reasons speak as on Windows of the given architecture (the fakes do the rest)."""

    def as_windows(machine: str) -> None:
        monkeypatch.setattr(reasons, "sys", SimpleNamespace(platform="win32"))
        monkeypatch.setattr(reasons.platform, "machine", lambda: machine)

    return as_windows


def _snapdragon_with_catalog(*providers: FakeCatalogEp, build: int = 26100, **overrides: Any) -> Any:
    fake = snapdragon(**overrides)
    fake.windowsml = FakeWindowsMl(list(providers))
    fake.windows_build = build
    return fake


def _qnn_catalog(state: EpReadyState = EpReadyState.Ready, **kw: Any) -> FakeCatalogEp:
    library = r"C:\Program Files\WindowsApps\QNN\onnxruntime_providers_qnn.dll"
    return FakeCatalogEp(QNN, "2.2420.43", library, state, **kw)


# ---- the catalog first, the bundled plugin second ----------------------------------------------------------


def test_a_ready_catalog_ep_is_registered_first_and_the_card_says_so(use: Install, windows: Any) -> None:
    windows("ARM64")
    fake = _snapdragon_with_catalog(_qnn_catalog())
    fake._plugin_devices[0].ep_metadata["version"] = "2.2420.43"  # what the catalog's library reports
    use(fake)
    report = devices.discover()
    npu = report.find_ep(QNN)[0]
    assert npu.usable and npu.source == EpSource.CATALOG.value and npu.ep_version == "2.2420.43"
    assert npu.vendor == "Qualcomm" and npu.driver_version == "30.0.140.1000"
    assert fake.registered == [(QNN, r"C:\Program Files\WindowsApps\QNN\onnxruntime_providers_qnn.dll")]
    bundled = next(p for p in report.plugins if p.package == "onnxruntime-qnn")
    assert not bundled.registered and "not used" in bundled.note and "Windows ML catalog" in bundled.note
    assert report.as_dict()["devices"][0]["source"] == "Windows ML catalog"


def test_without_the_catalog_the_bundled_plugin_serves_and_says_why(use: Install, windows: Any) -> None:
    windows("ARM64")
    use(_snapdragon_with_catalog(build=22631))  # Windows 11 23H2: no catalog EPs
    report = devices.discover()
    npu = report.find_ep(QNN)[0]
    assert npu.usable and npu.source == EpSource.BUNDLED.value and npu.ep_version == "2.7.0"
    assert not report.catalog.available
    assert "Windows 11 24H2 (build 26100)" in report.catalog.reason and "22631" in report.catalog.reason


def test_a_catalog_ep_that_fails_to_register_falls_back_to_the_bundled_plugin(use: Install, windows: Any) -> None:
    windows("ARM64")
    fake = _snapdragon_with_catalog(_qnn_catalog())
    real_register = fake.register_execution_provider_library

    def register(name: str, path: str) -> None:
        if "WindowsApps" in path:
            raise RuntimeError(
                "The requested API version [24] is not available, only API versions [1, 23] are supported in this "
                "build. Current ORT Version is: 1.23.2"
            )
        real_register(name, path)

    fake.register_execution_provider_library = register
    use(fake)
    report = devices.discover()
    npu = report.find_ep(QNN)[0]
    assert npu.usable and npu.source == EpSource.BUNDLED.value
    from_catalog = next(p for p in report.plugins if p.source == EpSource.CATALOG.value)
    assert not from_catalog.registered
    assert "newer ONNX Runtime (API 24)" in from_catalog.error and "API 23 at most" in from_catalog.error


def test_one_ep_that_fails_to_register_does_not_stop_the_others(use: Install, windows: Any) -> None:
    windows("AMD64")
    fake = directml_laptop()
    fake.windows_build = 26100
    fake.windowsml = FakeWindowsMl(
        [
            FakeCatalogEp(OPENVINO, "1.8.69", r"C:\WinML\OpenVINO\onnxruntime_providers_openvino.dll"),
            FakeCatalogEp(VITIS, "1.8.59", r"C:\WinML\VitisAI\onnxruntime_providers_vitisai.dll"),
        ]
    )
    fake.register_errors[OPENVINO] = "LoadLibrary failed with error 126 \"\" when trying to load openvino.dll"
    fake._plugin_devices = [npu_device(VITIS, "AMD", 0x1022, driver="32.0.203.290", text="AMD Ryzen AI NPU")]
    use(fake)
    report = devices.discover()
    vitis = report.find_ep(VITIS)[0]
    assert vitis.usable and vitis.source == "Windows ML catalog" and vitis.ep_version == "1.8.59"
    openvino = report.find_ep(OPENVINO)[0]
    assert not openvino.usable and "a DLL it needs is missing" in openvino.reason
    assert report.find_ep(DML)[0].usable and report.find_ep(DML)[0].source == "built in"


def test_an_msvcp140_clash_is_explained_in_plain_words(use: Install, windows: Any) -> None:
    windows("ARM64")
    use(snapdragon(plugin_load_error=(
        "LoadLibrary failed with error 1114 \"A dynamic link library (DLL) initialization routine failed.\" "
        r"when trying to load C:\app\onnxruntime_qnn\onnxruntime_providers_qnn.dll"
    )))
    npu = devices.discover().find_ep(QNN)[0]
    assert not npu.usable
    assert "msvcp140.dll" in npu.reason and "winrt-runtime" in npu.reason and "restart" in npu.reason


# ---- every catalog state, each with its words ---------------------------------------------------------------


def test_a_catalog_ep_not_downloaded_yet_is_never_downloaded_by_discovery(use: Install, windows: Any) -> None:
    windows("ARM64")
    not_present = _qnn_catalog(EpReadyState.NotPresent)
    use(_snapdragon_with_catalog(not_present, qnn_plugin=None))
    report = devices.discover()
    npu = report.find_ep(QNN)[0]
    assert not npu.usable and not_present.ensure_calls == 0
    assert "not downloaded yet" in npu.reason and "never downloaded without asking" in npu.reason
    assert report.downloadable() == [QNN]


def test_a_catalog_that_lists_nothing_says_so(use: Install, windows: Any) -> None:
    windows("AMD64")
    fake = directml_laptop()
    fake.windowsml, fake.windows_build = FakeWindowsMl([]), 26200
    use(fake)
    report = devices.discover()
    assert report.catalog.available and "offers no execution provider" in report.catalog.reason
    vitis = report.find_ep(VITIS)[0]
    assert not vitis.usable and "offers no execution provider" in vitis.reason and "32.0.203.280" in vitis.reason


def test_a_catalog_that_cannot_be_read_does_not_stop_discovery(use: Install, windows: Any) -> None:
    windows("ARM64")
    fake = _snapdragon_with_catalog()
    fake.windowsml.enum_error = 0x80070422
    use(fake)
    report = devices.discover()
    assert "Windows Update service is disabled" in report.catalog.reason and "0x80070422" in report.catalog.reason
    assert report.find_ep(QNN)[0].usable  # the bundled plugin still serves


def test_no_windowsml_package_and_not_windows_are_told_apart(use: Install, windows: Any) -> None:
    fake = snapdragon()
    fake.windows_build = 26100
    use(fake)
    assert "not installed" in devices.discover().catalog.reason
    fake.windows_build = 0
    assert devices.discover().catalog.reason == "Windows ML exists only on Windows."


@pytest.mark.parametrize(
    ("hresult", "words"),
    [
        (0x80073D3B, "no package of this EP for this PC's hardware"),
        (0x8024401C, "could not reach Windows Update"),
        (0x80240016, "waits for a restart"),
        (0x8024002E, "policy blocks downloads"),
        (0x80240FFF, "updates may be paused"),
        (0x80070070, "not enough free disk space"),
    ],
)
def test_a_failed_download_says_why_with_its_code(use: Install, windows: Any, hresult: int, words: str) -> None:
    windows("ARM64")
    ep = _qnn_catalog(EpReadyState.NotPresent, ensure_error=hresult)
    use(_snapdragon_with_catalog(ep, qnn_plugin=None))
    (result,) = catalog.download_eps(None, consent=True, online=lambda: True)
    assert result.status == PrepareStatus.FAILED
    assert words in result.message and f"0x{hresult:08X}" in result.message
    assert not devices.discover().find_ep(QNN)[0].usable


# ---- the download: consent, offline, progress, cancel --------------------------------------------------------


def test_without_consent_or_offline_nothing_is_attempted(use: Install) -> None:
    ep = _qnn_catalog(EpReadyState.NotPresent)
    use(_snapdragon_with_catalog(ep))
    (refused,) = catalog.download_eps(None, consent=False, online=lambda: True)
    assert refused.status == PrepareStatus.NEEDS_CONSENT and "only downloaded when you ask" in refused.message
    (offline,) = catalog.download_eps(None, consent=True, online=lambda: False)
    assert offline.status == PrepareStatus.FAILED and "offline" in offline.message
    assert ep.ensure_calls == 0


def test_a_consented_download_reports_progress_then_the_npu_is_usable(use: Install, windows: Any) -> None:
    windows("ARM64")
    ep = _qnn_catalog(EpReadyState.NotPresent)
    use(_snapdragon_with_catalog(ep, qnn_plugin=None))
    seen: list[tuple[str, float]] = []
    (result,) = catalog.download_eps(
        None, consent=True, online=lambda: True, on_progress=lambda n, v: seen.append((n, v))
    )
    assert result.ok and seen == [(QNN, 0.25), (QNN, 0.5), (QNN, 1.0)]
    npu = devices.discover().find_ep(QNN)[0]
    assert npu.usable and npu.source == "Windows ML catalog"


def test_a_download_can_be_cancelled(use: Install) -> None:
    hold, cancel = threading.Event(), threading.Event()
    ep = _qnn_catalog(EpReadyState.NotPresent, hold=hold)
    use(_snapdragon_with_catalog(ep))
    timer = threading.Timer(0.2, cancel.set)
    timer.start()
    (result,) = catalog.download_eps([QNN], consent=True, online=lambda: True, cancel=cancel)
    timer.join()
    assert result.status == PrepareStatus.CANCELLED and "cancelled" in result.message
    assert ep.state == EpReadyState.NotPresent


# ---- drivers ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("driver", "usable", "words"),
    [("32.0.203.290", True, ""), ("32.0.203.250", False, "older than"), ("32.0.203.310", False, "newer than")],
)
def test_vitisai_needs_a_driver_neither_too_old_nor_too_new(
    use: Install, windows: Any, driver: str, usable: bool, words: str
) -> None:
    windows("AMD64")
    fake = directml_laptop()
    fake.windows_build = 26100
    fake.windowsml = FakeWindowsMl([FakeCatalogEp(VITIS, "1.8.59", r"C:\WinML\vitisai.dll")])
    fake._plugin_devices = [npu_device(VITIS, "AMD", 0x1022, driver=driver)]
    use(fake)
    npu = devices.discover().find_ep(VITIS)[0]
    assert npu.usable is usable and words in npu.reason


def test_a_meteor_lake_npu_is_noted_on_the_bundled_openvino_card(use: Install, windows: Any) -> None:
    windows("AMD64")
    fake = directml_laptop()
    fake.plugins = {"onnxruntime_ep_openvino": SimpleNamespace(
        __version__="1.8.1", get_ep_name=lambda: OPENVINO, get_library_path=lambda: r"C:\app\openvino_plugin.dll"
    )}
    fake._plugin_devices = [npu_device(OPENVINO, "Intel", 0x8086, 0x7D1D, "32.0.100.3104")]
    use(fake)
    npu = devices.discover().find_ep(OPENVINO)[0]
    assert npu.usable and npu.source == "bundled plugin" and npu.type == DeviceType.NPU
    assert "Meteor Lake" in dict(npu.metadata)["note"]


def test_the_reasons_on_an_intel_laptop_without_the_catalog(use: Install, windows: Any) -> None:
    windows("AMD64")
    fake = directml_laptop()
    fake.windows_build = 22631
    fake.windowsml = FakeWindowsMl([])
    use(fake)
    report = devices.discover()
    openvino = report.find_ep(OPENVINO)[0]
    assert "24H2" in openvino.reason and "onnxruntime-ep-openvino is not installed" in openvino.reason
    assert "Meteor Lake" in openvino.reason
    assert "only on Windows on ARM64" in report.find_ep(QNN)[0].reason


# ---- the real OpenVINO plugin EP on this Linux machine -----------------------------------------------------------

on_linux_x86 = pytest.mark.skipif(
    not (sys.platform == "linux" and platform.machine() == "x86_64"),
    reason="onnxruntime-ep-openvino ships for manylinux x86_64 and win_amd64 only",
)


@pytest.fixture
def real_runtime() -> Iterator[None]:
    from engines import runtime

    runtime.use_fake(None)
    registration.reset_registrations()
    yield
    registration.reset_registrations()


@on_linux_x86
def test_the_real_openvino_plugin_registers_and_says_it_found_no_intel_device(real_runtime: None) -> None:
    import onnxruntime as ort
    import onnxruntime_ep_openvino  # a dependency on linux x86_64: it must be installed

    report = devices.discover()
    status = next(p for p in report.plugins if p.package == "onnxruntime-ep-openvino")
    assert status.registered and not status.error and status.version == "1.8.1"
    assert Path(status.library) == Path(onnxruntime_ep_openvino.get_library_path())
    assert not [d for d in ort.get_ep_devices() if d.ep_name == OPENVINO]  # no Intel device on this CPU
    card = report.find_ep(OPENVINO)[0]
    assert not card.usable and card.source == "bundled plugin" and card.ep_version == "1.8.1"
    assert "registered but found no Intel NPU" in card.reason
    assert report.find_ep(CPU)[0].usable
    devices.discover()  # a second discovery does not register twice (ONNX Runtime would refuse)


@on_linux_x86
def test_devices_json_lists_the_openvino_plugin_as_registered_with_its_reason() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "app", "devices", "--json"], cwd=REPO, capture_output=True, text=True, timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    plugin = next(p for p in data["plugins"] if p["package"] == "onnxruntime-ep-openvino")
    assert plugin["registered"] and plugin["source"] == "bundled plugin"
    card = next(d for d in data["devices"] if d["ep"] == OPENVINO)
    assert card["usable"] is False and "found no Intel NPU" in card["reason"]
    assert data["windows_ml"]["available"] is False



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
    assert resolve_variant(base, DeviceChoice.parse("npu"), roots, npu_available=True, ep=VITIS) == a8
    assert resolve_variant(base, DeviceChoice.parse("qnn"), roots) == a16  # QNN keeps the 16-bit one


def test_the_chat_catalog_says_per_npu_vendor_what_exists() -> None:
    from engines.models.downloads import load_catalog, load_npu_availability

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

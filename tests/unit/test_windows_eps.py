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


def test_an_msvcp140_clash_at_onnxruntime_import_is_explained(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib

    from engines import runtime

    runtime.use_fake(None)
    real = importlib.import_module

    def failing(name: str, package: str | None = None) -> Any:
        if name == "onnxruntime":
            raise ImportError(
                "DLL load failed while importing onnxruntime_pybind11_state: "
                "A dynamic link library (DLL) initialization routine failed."
            )
        return real(name, package)

    monkeypatch.setattr(importlib, "import_module", failing)
    with pytest.raises(ImportError) as raised:  # still an ImportError for callers that expect one
        runtime.ort()
    assert isinstance(raised.value, runtime.RuntimeLoadError)
    text = raised.value.user_text()
    assert "msvcp140.dll" in text and "winrt-runtime" in text and "Redistributable" in text

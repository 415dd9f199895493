"""A long-lived process loads a bundled plugin EP only when it offers a device (engines/runtime/plugin_probe.py):
the policy with a fake runtime and a fake probe, then the real child probe and the real app on this machine."""

from __future__ import annotations

import contextlib
import json
import os
import platform
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from engines.runtime import devices, plugin_probe, registration
from tests.unit.fake_ort import CPU, FakeEpDevice, FakeHw, HwType, directml_laptop
from tests.unit.fake_windowsml import npu_device

REPO = Path(__file__).resolve().parents[2]
OPENVINO = "OpenVINOExecutionProvider"
Install = Callable[[Any], Any]
Probe = Callable[[list[tuple[str, str]]], dict[str, int]]


def _intel_plugin_laptop(*, with_npu: bool) -> Any:
    fake = directml_laptop()
    fake.plugins = {"onnxruntime_ep_openvino": SimpleNamespace(
        __version__="1.8.1", get_ep_name=lambda: OPENVINO, get_library_path=lambda: "/opt/openvino/plugin.so"
    )}  # fmt: skip
    fake._plugin_devices = [npu_device(OPENVINO, "Intel", 0x8086, 0x643E, "32.0.100.4239")] if with_npu else []
    return fake


@pytest.fixture
def asked() -> list[list[tuple[str, str]]]:
    """What the fake probe was asked (tests/conftest.py takes the probe away after each test)."""
    return []


def _probe(calls: list[list[tuple[str, str]]], answer: dict[str, int]) -> Probe:
    def probe(candidates: list[tuple[str, str]]) -> dict[str, int]:
        calls.append(list(candidates))
        return dict(answer)

    return probe


def test_a_plugin_offering_no_device_is_never_loaded_and_the_card_says_why(
    fake_runtime: Install, asked: list[list[tuple[str, str]]]
) -> None:
    fake = fake_runtime(_intel_plugin_laptop(with_npu=False))
    registration.set_plugin_probe(_probe(asked, {OPENVINO: 0}))
    report = devices.discover()
    assert asked == [[(OPENVINO, "/opt/openvino/plugin.so")]]
    assert not [name for name, _ in fake.registered if name == OPENVINO]  # never loaded into this process
    status = next(p for p in report.plugins if p.ep == OPENVINO)
    assert status.installed and not status.registered and status.no_device and not status.error
    card = report.find_ep(OPENVINO)[0]
    assert not card.usable
    assert "OpenVINO 1.8.1 (bundled plugin) found no device on this machine, so it is not kept loaded" in card.reason
    devices.discover()  # asked once a process: a second discovery does not start another child
    assert len(asked) == 1


@pytest.mark.parametrize("answer", [{OPENVINO: 1}, {}], ids=["offers a device", "no answer"])
def test_a_plugin_with_a_device_or_without_an_answer_is_registered_as_before(
    fake_runtime: Install, asked: list[list[tuple[str, str]]], answer: dict[str, int]
) -> None:
    fake = fake_runtime(_intel_plugin_laptop(with_npu=True))
    registration.set_plugin_probe(_probe(asked, answer))
    report = devices.discover()
    assert (OPENVINO, "/opt/openvino/plugin.so") in fake.registered
    assert next(p for p in report.plugins if p.ep == OPENVINO).registered
    assert report.find_ep(OPENVINO)[0].usable


def test_a_plugin_that_crashed_the_probe_is_not_loaded_and_the_card_says_why(
    fake_runtime: Install, asked: list[list[tuple[str, str]]]
) -> None:
    fake = fake_runtime(_intel_plugin_laptop(with_npu=True))
    why = "ended the separate process that tried it (exit code -6), so it is not loaded"
    registration.set_plugin_probe(_probe(asked, {OPENVINO: why}))
    report = devices.discover()
    assert not [name for name, _ in fake.registered if name == OPENVINO]
    status = next(p for p in report.plugins if p.ep == OPENVINO)
    assert not status.registered and status.error == f"the OpenVINO library {why}"
    assert report.find_ep(OPENVINO)[0].reason == f"onnxruntime-ep-openvino: the OpenVINO library {why}."
    devices.discover()
    assert len(asked) == 1  # not tried again in this process


def test_without_the_probe_every_plugin_is_registered(fake_runtime: Install) -> None:
    fake = fake_runtime(_intel_plugin_laptop(with_npu=False))
    report = devices.discover()
    assert (OPENVINO, "/opt/openvino/plugin.so") in fake.registered
    assert "is registered but found no Intel NPU" in report.find_ep(OPENVINO)[0].reason


@pytest.mark.parametrize(("cpu", "asked_about"), [("Intel", []), ("AMD", [OPENVINO]), ("", [OPENVINO])])
def test_the_child_is_asked_only_about_plugins_for_another_vendor_than_the_cpus(
    fake_runtime: Install, monkeypatch: pytest.MonkeyPatch, cpu: str, asked_about: list[str]
) -> None:
    """OpenVINO on an Intel machine offers at least its CPU: registered at once, no child (0.2-0.3 s) asked."""
    ids = {"Intel": 0x8086, "AMD": 0x1022, "": 0}
    cpu_device = FakeEpDevice(CPU, "Microsoft", FakeHw(HwType.CPU, cpu, ids[cpu]), {"version": "1.24.4"})
    fake_runtime(directml_laptop(ep_devices=(cpu_device,)))
    calls: list[list[tuple[str, str]]] = []
    monkeypatch.setattr(plugin_probe, "offered_devices", lambda c: calls.append(list(c)) or {})
    plugin_probe.ask_when_foreign([(OPENVINO, "/opt/openvino/plugin.so")])
    assert [ep for ep, _ in (calls[0] if calls else [])] == asked_about


# ---- the real probe and the real app on this machine -----------------------------------------------------------

on_linux_x86 = pytest.mark.skipif(
    not (sys.platform == "linux" and platform.machine() == "x86_64"),
    reason="onnxruntime-ep-openvino ships for manylinux x86_64 and win_amd64 only",
)

COUNT_HERE = """
import sys, onnxruntime as ort
ort.register_execution_provider_library(sys.argv[1], sys.argv[2])
print(sum(1 for d in ort.get_ep_devices() if d.ep_name == sys.argv[1]))
"""


def _openvino_devices_here() -> tuple[str, int]:
    """The OpenVINO plugin's library and the devices it offers when registered in a process of its own."""
    import onnxruntime_ep_openvino  # a dependency on linux x86_64: it must be installed

    library = str(onnxruntime_ep_openvino.get_library_path())
    done = subprocess.run(
        [sys.executable, "-c", COUNT_HERE, OPENVINO, library], capture_output=True, text=True, timeout=120, check=True
    )
    return library, int(done.stdout.split()[-1])


@on_linux_x86
def test_the_child_probe_counts_what_registering_in_a_process_finds(tmp_path: Path) -> None:
    library, count = _openvino_devices_here()
    missing = str(tmp_path / "no_such_plugin.so")
    answer = plugin_probe.offered_devices([(OPENVINO, library), ("NoSuchExecutionProvider", missing)])
    assert answer == {OPENVINO: count}  # a library that does not load is left for this process to explain


@pytest.mark.parametrize(("target", "words"), [
    ("tests.unit.probe_children:crash", "ended the separate process that tried it (exit code -6)"),
    ("tests.unit.probe_children:hang", "did not finish registering within 2 s in a separate process"),
])  # fmt: skip
def test_a_child_that_crashes_or_hangs_answers_why_for_every_candidate(target: str, words: str) -> None:
    """Real child processes: one that dies of SIGABRT (as a faulting plugin library would), one that hangs."""
    if os.name != "posix":
        words = words.replace(" (exit code -6)", "")
    candidates = [(OPENVINO, "/opt/openvino/plugin.so"), ("QNNExecutionProvider", "/opt/qnn/plugin.so")]
    started = time.monotonic()
    answer = plugin_probe.offered_devices(candidates, timeout_s=2.0, target=target)
    assert set(answer) == {OPENVINO, "QNNExecutionProvider"}
    assert all(isinstance(why, str) and words in why and why.endswith("so it is not loaded") for why in answer.values())
    assert time.monotonic() - started < 20  # the hung child is killed, not waited for


@on_linux_x86
def test_the_app_loads_the_openvino_plugin_only_when_it_offers_a_device(tmp_path: Path) -> None:
    _, count = _openvino_devices_here()
    probe = tmp_path / "probe.json"
    env = dict(
        os.environ, QT_QPA_PLATFORM="offscreen", NPU_STUDIO_HOME=str(tmp_path / "home"),
        NPU_STUDIO_STARTUP_PROBE=str(probe), NPU_STUDIO_STARTUP_WAIT_MODELS="1", NPU_STUDIO_STARTUP_STAY="1",
    )  # fmt: skip
    app = subprocess.Popen([sys.executable, "-m", "app"], cwd=REPO, env=env, stdout=subprocess.DEVNULL,
                           stderr=subprocess.PIPE)
    log = tmp_path / "home" / "logs" / "npu-studio.log"

    def asked() -> bool:  # the app's device discovery asked the probe (it logs the answer)
        return log.exists() and "plugin probe (" in log.read_text(encoding="utf-8", errors="replace")

    try:
        deadline, state = time.monotonic() + 300, {}
        while not ("vision_ready_at" in state and asked()) and app.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
            with contextlib.suppress(OSError, ValueError):
                state = json.loads(probe.read_text())
        assert "vision_ready_at" in state and not state.get("vision_failed") and asked()
        assert f"{{'{OPENVINO}': {count}}}" in log.read_text(encoding="utf-8")
        maps = Path(f"/proc/{app.pid}/maps").read_text()
        assert ("libopenvino" in maps) is (count > 0)
    finally:
        app.terminate()
        app.wait(timeout=30)

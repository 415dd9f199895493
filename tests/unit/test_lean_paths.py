"""What the hot paths do without: discovery that registers no plugin EP when only the CPU is asked for, a
package's version read from its .dist-info folder, the chat devices of a CPU choice without discovery, and
RAM and physical cores read on Linux without psutil (each the same answer as the way it replaces)."""

from __future__ import annotations

import importlib.metadata
import os
import sys
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from engines import runtime
from engines.chat.model import chat_devices
from engines.models.fit import system_memory
from engines.runtime import devices
from engines.types import CPU_EP, DeviceChoice, physical_cores
from tests.unit.fake_ort import CPU, snapdragon

linux = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc and /sys")


def test_the_cpu_by_name_is_planned_without_registering_a_plugin(fake_runtime: Callable[[Any], Any]) -> None:
    fake = fake_runtime(snapdragon(qnn_plugin=SimpleNamespace(
        __version__="2.7.0", get_library_path=lambda: "qnn.dll", get_ep_name=lambda: "QNNExecutionProvider",
        get_qnn_htp_path=lambda: "QnnHtp.dll")))  # fmt: skip
    for text in ("cpu", CPU_EP):
        report = devices.discover_for(DeviceChoice.parse(text))
        assert fake.registered == [] and report.plugins == () and not report.catalog.available
        assert [d.ep for d in report.devices] == [CPU]
    report = devices.discover_for(DeviceChoice.parse("auto"))  # anything else discovers everything
    assert [name for name, _ in fake.registered] == ["QNNExecutionProvider"] and report.find_ep("QNNExecutionProvider")


def test_a_package_version_comes_from_its_dist_info_folder(tmp_path: Path) -> None:
    (tmp_path / "some_plugin").mkdir()
    (tmp_path / "some_plugin" / "__init__.py").write_text("", encoding="utf-8")
    (tmp_path / "some_plugin-1.8.1.dist-info").mkdir()
    module = SimpleNamespace(__file__=str(tmp_path / "some_plugin" / "__init__.py"))
    assert runtime.package_version(module, "some-plugin") == "1.8.1"
    assert runtime.package_version(SimpleNamespace(__version__="2.0", __file__=module.__file__), "some-plugin") == "2.0"
    assert runtime.package_version(SimpleNamespace(), "no-such-distribution-here") == ""
    import onnxruntime_ep_openvino  # the real bundled plugin: the same answer as importlib.metadata's

    assert runtime.package_version(onnxruntime_ep_openvino, "onnxruntime-ep-openvino") == importlib.metadata.version(
        "onnxruntime-ep-openvino"
    )


def test_the_chat_devices_of_a_cpu_choice_need_no_discovery(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_discovery(**kwargs: Any) -> Any:
        raise AssertionError("discovery ran for a CPU choice")

    monkeypatch.setattr(devices, "discover", no_discovery)
    found = chat_devices(None, DeviceChoice.parse("cpu"))
    assert found == chat_devices(frozenset({CPU_EP}))
    with pytest.raises(AssertionError, match="discovery ran"):
        chat_devices(None, DeviceChoice.parse("auto"))


@linux
def test_ram_is_read_as_psutil_reads_it() -> None:
    import psutil

    available, total = system_memory()
    memory = psutil.virtual_memory()
    assert total == memory.total
    assert abs(available - memory.available) < 256 << 20  # read a moment apart on a busy machine


@linux
def test_physical_cores_are_counted_as_psutil_counts_them(monkeypatch: pytest.MonkeyPatch) -> None:
    import psutil

    allowed = len(os.sched_getaffinity(0))
    assert physical_cores() == max(1, min(allowed, psutil.cpu_count(logical=False) or allowed))
    monkeypatch.setitem(sys.modules, "psutil", None)  # psutil could not even be imported: /sys still answers
    assert physical_cores() >= 1

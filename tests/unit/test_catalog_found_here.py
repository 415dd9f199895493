"""`npu-studio models catalog`'s "Chat on the NPU, by vendor" on a home holding models other tools downloaded
(tests/fixtures/machine_home.py): per NPU vendor, exactly the chat models found here whose config targets
that vendor's NPU, each with whether this machine runs it; the JSON carries the same."""

from __future__ import annotations

import json

import pytest

from app.cli import run
from engines.models.here import machine_devices
from engines.runtime.planning import DeviceSet
from engines.types import DeviceType
from tests.fixtures.machine_home import MachineHome

WRONG_CLAIM = "served by Foundry Local"  # the old text: Foundry's NPU variants are genai folders in its cache


def _by_vendor(out: str) -> dict[str, list[str]]:
    """The catalog's per-vendor section: each vendor's heading and the lines under it."""
    section = out.split("Chat on the NPU, by vendor:\n", 1)[1]
    blocks: dict[str, list[str]] = {}
    heading = ""
    for line in section.splitlines():
        if line.startswith("    "):
            blocks[heading].append(line.strip())
        elif line.startswith("  ") and line.strip():
            heading = line.strip()
            blocks[heading] = []
    return blocks


def _has_npu(devices: DeviceSet, ep: str) -> bool:
    return any(e == ep and kind == DeviceType.NPU for e, kind in devices.usable)


def test_each_npu_vendor_lists_exactly_the_models_found_here_for_its_npu(
    machine: MachineHome, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run(["models", "catalog"]) == 0
    out = capsys.readouterr().out
    blocks = _by_vendor(out)
    assert list(blocks) == ["Qualcomm (QNN)", "Intel (OpenVINO)", "AMD (VitisAI)", "NVIDIA (TensorRT RTX)"]

    def here(vendor: str) -> list[str]:
        return [line for line in blocks[vendor] if line.startswith("On this machine:")]

    devices = machine_devices().chat
    qnn, openvino = here("Qualcomm (QNN)"), here("Intel (OpenVINO)")
    assert (
        qnn == [line for line in qnn if "smollm2-135m-instruct-qnn-npu:1 (Foundry Local): " in line] and len(qnn) == 1
    )
    assert len(openvino) == 1 and "smollm2-135m-instruct-openvino-npu:1 (Foundry Local): " in openvino[0]
    if not _has_npu(devices, "QNNExecutionProvider"):  # this Linux machine: no Qualcomm NPU
        assert qnn[0].endswith(": needs the Qualcomm NPU: not on this machine "
                               "(NPU Studio would run it on the CPU instead, more slowly)")  # fmt: skip
    else:
        assert qnn[0].endswith(": runs here on the Qualcomm NPU (QNN NPU)")
    if not _has_npu(devices, "OpenVINOExecutionProvider"):
        assert ": needs the Intel NPU: not on this machine" in openvino[0]
    # the CPU copies, the hub's and AI Toolkit's models run here but not on an NPU: never listed
    assert here("AMD (VitisAI)") == ["On this machine: none found (`npu-studio models scan` says where it looked)"]
    assert here("NVIDIA (TensorRT RTX)") == []  # a GPU, not an NPU
    # Intel and AMD: nothing to download, then what is on this machine, then where else to look
    intel = blocks["Intel (OpenVINO)"]
    assert intel[0] == "To download: none in NPU Studio's catalog" and intel[1] == openvino[0]
    assert blocks["AMD (VitisAI)"][0] == "To download: none in NPU Studio's catalog"
    assert blocks["Qualcomm (QNN)"][0] == "To download: phi-3.5-mini-instruct-qnn"
    assert WRONG_CLAIM not in out and "is found on this machine" not in out


def test_the_json_carries_the_same_per_vendor_models(machine: MachineHome, capsys: pytest.CaptureFixture[str]) -> None:
    assert run(["models", "catalog", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    vendors = {v["vendor"]: v for v in data["npu_by_vendor"]}
    assert {v: [m["folder"] for m in vendors[v]["found_here"]] for v in vendors} == {
        "Qualcomm": [str(machine.foundry_qnn)],
        "Intel": [str(machine.foundry_openvino)],
        "AMD": [],
        "NVIDIA": [],
    }
    qnn = vendors["Qualcomm"]["found_here"][0]
    assert (qnn["execution_provider"], qnn["device"], qnn["tool"]) == ("QNNExecutionProvider", "NPU", "Foundry Local")
    if not _has_npu(machine_devices().chat, "QNNExecutionProvider"):
        assert qnn["verdict"] == "needs" and qnn["runs_here"].startswith("needs the Qualcomm NPU: not on this machine")
    assert (
        vendors["Qualcomm"]["downloadable"] == ["phi-3.5-mini-instruct-qnn"] and vendors["Intel"]["downloadable"] == []
    )
    assert WRONG_CLAIM not in json.dumps(data)


def test_no_scan_leaves_the_machine_out(machine: MachineHome, capsys: pytest.CaptureFixture[str]) -> None:
    assert run(["models", "catalog", "--no-scan"]) == 0
    blocks = _by_vendor(capsys.readouterr().out)
    assert not any(line.startswith("On this machine") for lines in blocks.values() for line in lines)
    assert blocks["Intel (OpenVINO)"][0] == "To download: none in NPU Studio's catalog"
